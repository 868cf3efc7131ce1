// `earshot serve`: HTTP + WebSocket server speaking WhisperLiveKit's protocol
// (/asr), the OpenAI-compatible transcription endpoint, health, models,
// Prometheus metrics and the web page. One loaded model shared by every
// session (through the processor factory), per-session state, model work on
// the scheduler's workers, network I/O on its own threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>  // before Boost.Asio, whose awaitable.hpp uses std::exchange without it
#include <vector>

#include "server/config.h"

namespace earshot::server {

class Server {
 public:
  Server(ServerConfig config, ServerHooks hooks);
  ~Server();  // stops at once (no drain); call shutdown() first for a graceful end
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts serving on background threads. Throws Error(kIo) naming the
  // address when it cannot bind, Error(kInvalidArgument) for bad TLS files.
  void start();
  uint16_t port() const;    // the bound port (after start)
  std::string url() const;  // http(s)://host:port

  // Graceful stop: no new connections; every stream is ended and gets its final
  // update and ready_to_stop; returns when all are gone or the grace time ran out.
  void shutdown();
  // During shutdown(): cut the drain and the grace short, so the streams still
  // running get their text so far as final now (what a second signal does).
  void hurry_up();
  // Blocks until SIGINT or SIGTERM, then shutdown(); a second signal calls hurry_up().
  void run_until_signal();

  size_t active_sessions() const;
  // Bytes waiting in the WebSocket streams' write queues now (all streams together).
  size_t send_queue_bytes() const;
  // accept() calls since start (each retry after an error counts).
  uint64_t accept_attempts() const;
  // While accept() fails for want of file descriptors: the wait before each retry so
  // far (ms, the first 16 of the episode); empty while connections are accepted.
  std::vector<int> accept_retry_waits_ms() const;
  // Open TCP connections (--max-connections counts these) and upload bodies being
  // received (--max-uploads) now.
  size_t open_connections() const;
  size_t open_uploads() const;
  std::string metrics_text() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace earshot::server
