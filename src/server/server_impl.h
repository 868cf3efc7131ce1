// What the Beast front of the server shares between its files (server.cpp: the
// listener and the WebSocket transport; http_session.cpp: plain HTTP/1.1). Private to
// server/: nothing outside includes it.
#pragma once

// clang-format off
#include <utility>  // before Boost.Asio, whose awaitable.hpp uses std::exchange without it
// clang-format on
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/error.h"
#include "protocol/target.h"
#include "server/core.h"
#include "server/server.h"
#include "server/stream_protocol.h"
#include "server/worker_pool.h"

namespace earshot::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using protocol::parse_target;

inline void log_line(const std::string& text) { std::fprintf(stderr, "earshot serve: %s\n", text.c_str()); }

inline std::chrono::steady_clock::duration seconds_of(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

inline void shutdown_stream(PlainStream& stream) {
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}
inline void shutdown_stream(TlsStream& stream) {
  beast::error_code ec;
  beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_send, ec);
}

// One unit of a counted limit (--max-uploads, --max-connections), held for as long as
// the object lives (move-only).
class Permit {
 public:
  Permit() = default;
  explicit Permit(std::atomic<int>* count) : count_(count) {}
  Permit(Permit&& o) noexcept : count_(std::exchange(o.count_, nullptr)) {}
  Permit& operator=(Permit&& o) noexcept {
    if (this != &o) {
      release();
      count_ = std::exchange(o.count_, nullptr);
    }
    return *this;
  }
  ~Permit() { release(); }

 private:
  void release() {
    if (count_) --*count_;
    count_ = nullptr;
  }
  std::atomic<int>* count_ = nullptr;
};

// A live /asr connection, as the server sees it for shutdown.
class StreamConnection {
 public:
  virtual ~StreamConnection() = default;
  virtual void begin_shutdown() = 0;
  // The shutdown grace ran out: send the final result now, then close. `done` is
  // decremented once that happened (or there was nothing to do).
  virtual void force_finish(std::shared_ptr<std::atomic<int>> done) = 0;
  // Bytes of messages waiting to be written to the client (the one in flight included).
  virtual size_t queued_bytes() const = 0;
};

struct Server::Impl {
  Impl(ServerConfig config, ServerHooks hooks)
      : core(std::move(config), std::move(hooks)),
        acceptor(ioc),
        blocking(static_cast<size_t>(std::max(1, core.config().max_sessions))) {}

  Core core;
  net::io_context ioc;
  std::optional<ssl::context> tls;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  std::atomic<bool> shutting_down{false};
  std::atomic<bool> hurry{false};   // a second signal: the drain and the grace are cut short
  std::atomic<int> uploads{0};      // upload bodies being received (--max-uploads)
  std::atomic<int> connections{0};  // open connections (--max-connections), each holding a Permit
  bool connections_full = false;    // refusing at --max-connections (logged once); the accept handler's
  // After the io_context: jobs hold connections, which must die before it.
  WorkerPool blocking;
  std::mutex mutex;
  std::vector<std::weak_ptr<StreamConnection>> streams;
  net::steady_timer accept_timer{ioc};
  net::steady_timer housekeeping{ioc};
  int accept_backoff_ms = 0;  // > 0 while accept() fails for want of file descriptors
  std::atomic<uint64_t> accept_attempts{0};
  // The waits before each accept retry of the episode now (empty while accepting), the first 16.
  std::vector<int> accept_waits_ms;  // under mutex

  void do_accept();
  void on_accept_error(beast::error_code ec);
  void refuse_connection(tcp::socket& socket);
  // Once a second: the heap trimmed after sessions ended (bursts of ends cost one trim).
  void arm_housekeeping() {
    housekeeping.expires_after(std::chrono::seconds(1));
    housekeeping.async_wait([this](beast::error_code ec) {
      if (ec) return;
      core.trim_heap_if_sessions_ended();
      arm_housekeeping();
    });
  }
  std::vector<std::shared_ptr<StreamConnection>> live_connections() {
    std::lock_guard lock(mutex);
    std::vector<std::shared_ptr<StreamConnection>> live;
    for (auto& w : streams)
      if (auto p = w.lock()) live.push_back(p);
    return live;
  }
  void register_stream(const std::shared_ptr<StreamConnection>& s) {
    std::lock_guard lock(mutex);
    streams.push_back(s);
  }
  size_t live_streams() {
    std::lock_guard lock(mutex);
    size_t n = 0;
    for (auto& w : streams) n += !w.expired();
    return n;
  }
  void stop_threads() {
    ioc.stop();
    for (std::thread& t : threads)
      if (t.joinable()) t.join();
    threads.clear();
  }
};

// A new connection's HTTP/1.1 session (http_session.cpp), after the TLS handshake for TlsStream.
// `connection` (--max-connections) goes with the socket, to the WebSocket session on an upgrade.
void serve_http(PlainStream&& stream, Server::Impl& impl, Permit connection);
void serve_http(TlsStream&& stream, Server::Impl& impl, Permit connection);
// An upgraded connection's WebSocket session (server.cpp), speaking `protocol`.
void serve_websocket(PlainStream&& stream, Server::Impl& impl, Permit connection,
                     std::unique_ptr<StreamProtocol> protocol, http::request<http::string_body> request);
void serve_websocket(TlsStream&& stream, Server::Impl& impl, Permit connection,
                     std::unique_ptr<StreamProtocol> protocol, http::request<http::string_body> request);

}  // namespace earshot::server
