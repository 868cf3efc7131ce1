// `earshot serve`: HTTP + WebSocket server speaking WhisperLiveKit's protocol
// (/asr), the OpenAI-compatible transcription endpoint, health, models,
// Prometheus metrics and the web page. One loaded model shared by every
// session (through the processor factory), per-session state, model work on
// the scheduler's workers, network I/O on its own threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before Boost.Asio, whose awaitable.hpp uses std::exchange without it
#include <vector>

#include "audio/audio.h"
#include "policy/online_processor.h"
#include "session/stream_session.h"
#include "session/voice_activity.h"

namespace earshot::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0 = any free port (tests)
  bool pcm_input = false;
  std::string default_language = "auto";
  bool translation_available = false;
  std::string api_token;                  // "" = no authentication
  std::vector<std::string> cors_origins;  // "*" allows any origin
  std::string ssl_certfile, ssl_keyfile;  // both set = TLS (https/wss)
  int max_sessions = 16;                  // WebSocket streams + file transcriptions at once
  size_t max_message_bytes = 1 << 20;     // one WebSocket frame/message of audio
  double idle_timeout_seconds = 60;       // a stream that sends nothing this long is ended
  size_t max_upload_bytes = 25u << 20;    // POST /v1/audio/transcriptions
  double transcription_timeout_seconds = 600;
  double update_interval_seconds = 0.05;  // how often a stream's state is checked for changes
  double shutdown_grace_seconds = 30;     // SIGINT/SIGTERM: time left to sessions to drain
  int io_threads = 1;
  int workers = 1;  // sessions whose model work runs at the same time
  session::StreamOptions stream;
  session::StreamOptions file;       // whole-file transcription (no skipping)
  std::string model_id = "whisper";  // /v1/models and /health
  std::string backend = "earshot";
};

// Engine timing counters for /metrics (totals since start), when the engine offers them.
struct ModelTimes {
  double encoder_seconds = 0;
  double decoder_seconds = 0;
  uint64_t encoder_passes = 0;
  uint64_t decoder_passes = 0;
};

struct ServerHooks {
  // A new online processor for one stream in `language` ("auto" or a code).
  // Throws Error(kInvalidArgument) with a message for a language the model
  // cannot do; the client gets it as an error message.
  std::function<std::unique_ptr<OnlineProcessor>(const std::string& language)> make_processor;
  session::VadFactory make_vad;  // null: every sample is speech (--no-vac)
  // Decoder for encoded input (webm/opus...); null means encoded input is refused.
  std::function<std::unique_ptr<audio::StreamDecoder>()> make_decoder;
  // Optional check of a language code: "" when usable, else the reason.
  std::function<std::string(const std::string& language)> check_language;
  std::function<ModelTimes()> model_times;  // optional
};

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
  // Blocks until SIGINT or SIGTERM, then shutdown().
  void run_until_signal();

  size_t active_sessions() const;
  std::string metrics_text() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace earshot::server
