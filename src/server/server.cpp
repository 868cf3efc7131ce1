// Beast around the Core: the listener (plain or TLS) and the WebSocket transport
// under the protocol adapters (/asr, /v1/listen); plain HTTP is http_session.cpp.
#include "server/server.h"

#include "server/server_impl.h"

namespace earshot::server {

namespace {

// --ssl-certfile/--ssl-keyfile into `tls`. Throws Error(kInvalidArgument) naming the file
// that is missing, unreadable, not PEM, or a key that does not belong to the certificate.
void load_tls_files(ssl::context& tls, const std::string& certfile, const std::string& keyfile) {
  // OpenSSL 3 reports a missing file as a bare "asio.ssl error": say why ourselves.
  for (const auto& [what, path] : {std::pair{"certificate", &certfile}, std::pair{"key", &keyfile}}) {
    if (std::FILE* file = std::fopen(path->c_str(), "rb"))
      std::fclose(file);
    else
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("cannot read TLS ") + what + " '" + *path + "': " + std::strerror(errno));
  }
  // The key first: loading the certificate then drops a key that does not belong to it,
  // whatever its type, and the check below catches both kinds of mismatch alike.
  beast::error_code ec;
  tls.use_private_key_file(keyfile, ssl::context::pem, ec);
  if (ec)
    throw Error(ErrorCode::kInvalidArgument,
                "cannot load TLS key '" + keyfile + "': not a usable PEM private key (OpenSSL: " + ec.message() + ")");
  tls.use_certificate_chain_file(certfile, ec);
  if (ec)
    throw Error(ErrorCode::kInvalidArgument, "cannot load TLS certificate '" + certfile +
                                                 "': not a usable PEM certificate chain (OpenSSL: " + ec.message() +
                                                 ")");
  if (SSL_CTX_check_private_key(tls.native_handle()) != 1)
    throw Error(ErrorCode::kInvalidArgument,
                "TLS key '" + keyfile + "' does not match the certificate '" + certfile + "'");
}

// The WebSocket transport: Beast, limits, the token check, a session slot, the
// idle timeout, shutdown and the write queue. What the messages mean is the
// protocol adapter's (stream_protocol.h).
template <class Stream>
class WsSession : public StreamConnection, public std::enable_shared_from_this<WsSession<Stream>> {
 public:
  WsSession(Stream&& stream, Server::Impl& impl, Permit connection, std::unique_ptr<StreamProtocol> protocol)
      : ws_(std::move(stream)),
        impl_(impl),
        connection_(std::move(connection)),
        protocol_(std::move(protocol)),
        timer_(ws_.get_executor()),
        finish_timer_(ws_.get_executor()) {}

  ~WsSession() override { finish_connection(); }

  void run(http::request<http::string_body> request) {
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    // The message limit is enforced by do_read, not Beast: Beast fails a frame over the limit at its
    // header, sends 1009 and closes with the rest of the frame unread, so the peer's TCP stack resets
    // the connection and the close frame can be lost. do_read closes politely and drains instead,
    // up to a bound: a frame announcing more than that (an exabyte, say) is refused by Beast at
    // its header, not waited for.
    ws_.read_message_max(std::max<size_t>(16 * impl_.core.config().max_message_bytes, size_t{64} << 20));
    upgrade_.target = parse_target(std::string(request.target()));
    upgrade_.authorization = std::string(request[http::field::authorization]);
    upgrade_.websocket_protocols = std::string(request[http::field::sec_websocket_protocol]);
    // A browser authenticating with the subprotocol pair ("token", key) needs "token" echoed back.
    const bool echo_token = upgrade_.websocket_protocols.rfind("token,", 0) == 0;
    ws_.set_option(websocket::stream_base::decorator([echo_token](websocket::response_type& res) {
      res.set(http::field::server, "earshot");
      if (echo_token) res.set(http::field::sec_websocket_protocol, "token");
    }));
    ws_.async_accept(request, beast::bind_front_handler(&WsSession::on_accept, this->shared_from_this()));
  }

  void begin_shutdown() override {
    net::post(ws_.get_executor(), [self = this->shared_from_this()] {
      self->shutting_down_ = true;
      if (self->started_ && !self->finished_) {
        // The server, not the client, ends this stream: its close says so (1001).
        self->server_ended_ = !self->protocol_->ended();
        self->protocol_->end_stream();
      }
    });
  }

  // No model pass starts after this; the one running (whose words the client must
  // get) is waited for, within final_pass_wait_seconds, then the final result goes out.
  void force_finish(std::shared_ptr<std::atomic<int>> done) override {
    net::post(ws_.get_executor(), [self = this->shared_from_this(), done] {
      if (!self->started_ || self->finished_ || self->close_code_ || self->protocol_->finished()) {
        --*done;
        return;
      }
      self->protocol_->halt();
      self->finish_after_pass(
          std::chrono::steady_clock::now() + seconds_of(self->impl_.core.config().final_pass_wait_seconds),
          std::move(done));
    });
  }

  size_t queued_bytes() const override { return queued_bytes_.load(); }

 private:
  void finish_after_pass(std::chrono::steady_clock::time_point deadline, std::shared_ptr<std::atomic<int>> done) {
    if (protocol_->model_running() && std::chrono::steady_clock::now() < deadline && !finished_) {
      finish_timer_.expires_after(std::chrono::milliseconds(5));
      finish_timer_.async_wait([self = this->shared_from_this(), deadline, done](beast::error_code) mutable {
        self->finish_after_pass(deadline, std::move(done));
      });
      return;
    }
    if (!finished_ && !close_code_ && !protocol_->finished()) {
      if (protocol_->model_running()) {
        char waited[32];
        std::snprintf(waited, sizeof waited, "%g", impl_.core.config().final_pass_wait_seconds);
        log_line(std::string("shutdown: a model pass still running after ") + waited +
                 " s; its words are left out of the stream's final result");
      }
      log_line("shutdown grace time over: sending a stream its text so far as final (--shutdown-grace-s)");
      apply(protocol_->force_finish());
      finish_connection();  // the model stops working on it
    }
    --*done;
  }

  void on_accept(beast::error_code ec) {
    if (ec) return;
    const Core& core = impl_.core;
    if (!core.token_ok(protocol_->token(upgrade_))) {
      impl_.core.count_refusal(Refusal::kUnauthorized);
      return apply(protocol_->unauthorized());
    }
    if (std::optional<Outgoing> refused = protocol_->prepare(upgrade_)) {
      impl_.core.count_refusal(Refusal::kBadRequest);
      return apply(*refused);
    }
    if (impl_.shutting_down) {
      impl_.core.count_refusal(Refusal::kDraining);
      return apply(protocol_->refusal("server shutting down", websocket::close_code::going_away));
    }
    if (!impl_.core.acquire_slot()) {
      return apply(protocol_->refusal("server busy: " + std::to_string(core.config().max_sessions) +
                                          " sessions already running (--max-sessions); try again later",
                                      websocket::close_code::try_again_later));
    }
    slot_ = SessionSlot(&impl_.core);
    Outgoing first = protocol_->start();
    const bool refused = first.close.has_value();
    apply(first);
    if (refused) return;
    started_ = true;
    impl_.register_stream(this->shared_from_this());
    protocol_->watch([weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->wake();
    });
    last_activity_ = std::chrono::steady_clock::now();
    do_read();
    arm_timer();
  }

  // The session has something new (any thread): one tick on the strand, however many
  // wakes arrive before it runs.
  void wake() {
    if (wake_posted_.exchange(true)) return;
    net::post(ws_.get_executor(), [self = this->shared_from_this()] {
      self->wake_posted_ = false;
      if (self->closing_ || self->finished_ || self->close_code_) return;
      self->resume_if_accepting(std::chrono::steady_clock::now());
      self->tick(std::chrono::steady_clock::now());
    });
  }

  // Backpressure's end: reads on once the session takes audio again.
  void resume_if_accepting(std::chrono::steady_clock::time_point now) {
    if (!paused_) return;
    last_activity_ = now;  // the server is the one not reading: the client is not idle
    if (protocol_->accepting_audio()) {
      paused_ = false;
      do_read();
    }
  }

  void apply(const Outgoing& out) {
    for (const std::string& m : out.messages) send(m);
    if (out.close) close_after_writes(out.close->first, out.close->second);
  }

  // Reads one message in pieces, never buffering more than one byte over --max-message-bytes.
  void do_read() {
    const size_t room = impl_.core.config().max_message_bytes + 1 - buffer_.size();
    ws_.async_read_some(buffer_, room, beast::bind_front_handler(&WsSession::on_read, this->shared_from_this()));
  }

  void on_read(beast::error_code ec, size_t) {
    // Normal close after the last result or an abrupt disconnect: either way this stream is over.
    if (ec) return finish_connection();
    last_activity_ = std::chrono::steady_clock::now();
    const size_t max_bytes = impl_.core.config().max_message_bytes;
    if (buffer_.size() > max_bytes) {
      log_line("closing a stream: message over --max-message-kb");
      buffer_.consume(buffer_.size());
      finish_connection();
      // Beast's close reads and discards the rest of the message until the peer's close frame.
      return close_after_writes(websocket::close_code::too_big, "message over " + std::to_string(max_bytes) + " bytes");
    }
    if (!ws_.is_message_done()) return do_read();
    if (started_ && !finished_) {
      auto data = buffer_.cdata();
      if (ws_.got_binary()) {
        apply(protocol_->on_binary(std::span<const uint8_t>(static_cast<const uint8_t*>(data.data()), data.size())));
      } else {
        apply(protocol_->on_text(std::string_view(static_cast<const char*>(data.data()), data.size())));
      }
    }
    buffer_.consume(buffer_.size());
    if (closing_) return;
    // Backpressure: a client ahead of real time is not read while its session holds
    // as much audio as it may; it is read again once the session took audio (wake).
    if (started_ && !finished_ && !protocol_->accepting_audio()) {
      paused_ = true;
      impl_.core.count_read_pause();
      return;
    }
    do_read();
  }

  void arm_timer() {
    timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(impl_.core.config().update_interval_seconds)));
    timer_.async_wait(beast::bind_front_handler(&WsSession::on_timer, this->shared_from_this()));
  }

  // Housekeeping every update interval: the lag sampler, the idle timeout, a client
  // that stopped reading, and a tick in case a wake was missed (the session's events
  // normally wake the stream at once).
  void on_timer(beast::error_code ec) {
    if (ec || closing_ || finished_ || close_code_) return;
    impl_.core.sample_lags();
    const auto now = std::chrono::steady_clock::now();
    resume_if_accepting(now);
    const double idle = std::chrono::duration<double>(now - last_activity_).count();
    if (idle > impl_.core.config().idle_timeout_seconds) {
      if (protocol_->finished()) return close_after_writes(websocket::close_code::normal, "done");
      if (!protocol_->ended()) {
        log_line("ending an idle stream (nothing received for " +
                 std::to_string(static_cast<int>(impl_.core.config().idle_timeout_seconds)) + " s)");
        idle_ended_ = true;
        protocol_->end_stream();
      }
    }
    if (protocol_->finished() && shutting_down_)
      return close_after_writes(websocket::close_code::going_away, "server shutting down");
    if (writing_) {
      const double write_timeout = impl_.core.config().write_timeout_seconds;
      if (std::chrono::duration<double>(now - write_started_).count() > write_timeout) return end_slow_client();
    }
    tick(now);
    if (!close_code_) arm_timer();
  }

  // What the session produced since the last tick, to the client. While an update is
  // being written none is made: the client reads slower than updates come, and the next
  // one (made when the write completes) carries every change since (full mode: the
  // latest snapshot; diff mode: one diff from what the client has). The queue stays
  // one update long.
  void tick(std::chrono::steady_clock::time_point now) {
    if (closing_ || finished_ || close_code_) return;
    if (writing_) {
      dirty_ = true;
      return;
    }
    dirty_ = false;
    Outgoing out = protocol_->on_tick();
    // A stream the server ended (shutdown) closes with 1001 even where the protocol's
    // own end is a normal close (Deepgram's 1000 after Metadata).
    if (out.close && server_ended_ && out.close->first == websocket::close_code::normal)
      out.close_with(websocket::close_code::going_away, "server shutting down");
    apply(out);
    if (out.close) return;
    if (out.finished_now) {
      last_activity_ = now;  // the client now has idle_timeout to close
      if (shutting_down_) return close_after_writes(websocket::close_code::going_away, "server shutting down");
      if (idle_ended_) return close_after_writes(websocket::close_code::normal, "idle timeout");
    }
  }

  void send(std::string text) {
    queued_bytes_ += text.size();
    queue_.push_back(std::move(text));
    if (!writing_) do_write();
  }

  // One update has waited --write-timeout to be written: the client does not read. The
  // session ends (its slot is free again); the close (1008, with the reason) follows the
  // update in flight, and the connection is dropped if even that cannot be written.
  void end_slow_client() {
    const double write_timeout = impl_.core.config().write_timeout_seconds;
    log_line("ending a stream whose client stopped reading: an update waited " +
             std::to_string(static_cast<int>(write_timeout)) + " s to be written (--write-timeout)");
    impl_.core.count_slow_client();
    finish_connection();
    while (queue_.size() > 1) {  // keep the one in flight
      queued_bytes_ -= queue_.back().size();
      queue_.pop_back();
    }
    close_after_writes(websocket::close_code::policy_error, "client not reading: an update waited " +
                                                                std::to_string(static_cast<int>(write_timeout)) +
                                                                " s (--write-timeout)");
    timer_.expires_after(seconds_of(std::max(5.0, write_timeout)));
    timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return;
      beast::error_code ignored;
      beast::get_lowest_layer(self->ws_).socket().close(ignored);
    });
  }

  void do_write() {
    if (queue_.empty()) {
      writing_ = false;
      if (close_code_ && !closing_) {
        closing_ = true;
        ws_.async_close(websocket::close_reason(static_cast<websocket::close_code>(*close_code_), close_reason_),
                        [self = this->shared_from_this()](beast::error_code) {
                          self->timer_.cancel();  // end_slow_client's deadline
                          self->finish_connection();
                        });
      }
      return;
    }
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    ws_.text(true);
    ws_.async_write(net::buffer(queue_.front()), [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->finish_connection();
      self->queued_bytes_ -= self->queue_.front().size();
      self->queue_.pop_front();
      // What changed while the update was written goes out next.
      if (self->queue_.empty() && self->dirty_ && !self->close_code_) {
        self->writing_ = false;
        self->tick(std::chrono::steady_clock::now());
        if (self->writing_ || self->close_code_) return;
      }
      self->do_write();
    });
  }

  void close_after_writes(uint16_t code, const std::string& reason) {
    if (close_code_) return;
    close_code_ = code;
    close_reason_ = reason;
    if (!writing_) do_write();
  }

  // Releases the session and its slot; safe to call more than once.
  void finish_connection() {
    if (finished_) return;
    finished_ = true;
    beast::error_code ignored;
    timer_.cancel();
    finish_timer_.cancel();
    protocol_->on_close();
    slot_ = SessionSlot();
  }

  websocket::stream<Stream> ws_;
  Server::Impl& impl_;
  Permit connection_;  // --max-connections
  std::unique_ptr<StreamProtocol> protocol_;
  net::steady_timer timer_;
  net::steady_timer finish_timer_;  // force_finish's wait for the running pass
  beast::flat_buffer buffer_;
  UpgradeRequest upgrade_;
  SessionSlot slot_;
  std::deque<std::string> queue_;
  bool writing_ = false;
  std::optional<uint16_t> close_code_;
  std::string close_reason_;
  bool closing_ = false;
  bool finished_ = false;
  bool started_ = false;
  bool idle_ended_ = false;
  bool shutting_down_ = false;
  bool server_ended_ = false;  // the server ended the stream (shutdown), not the client
  bool paused_ = false;        // not reading: backpressure (see on_read)
  bool dirty_ = false;         // the session changed while an update was being written
  std::atomic<bool> wake_posted_{false};
  std::chrono::steady_clock::time_point last_activity_;
  std::chrono::steady_clock::time_point write_started_;  // of the write in flight
  std::atomic<size_t> queued_bytes_{0};
};

}  // namespace

void serve_websocket(PlainStream&& stream, Server::Impl& impl, Permit connection,
                     std::unique_ptr<StreamProtocol> protocol, http::request<http::string_body> request) {
  std::make_shared<WsSession<PlainStream>>(std::move(stream), impl, std::move(connection), std::move(protocol))
      ->run(std::move(request));
}
void serve_websocket(TlsStream&& stream, Server::Impl& impl, Permit connection,
                     std::unique_ptr<StreamProtocol> protocol, http::request<http::string_body> request) {
  std::make_shared<WsSession<TlsStream>>(std::move(stream), impl, std::move(connection), std::move(protocol))
      ->run(std::move(request));
}

void Server::Impl::do_accept() {
  ++accept_attempts;
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) return on_accept_error(ec);
    if (accept_backoff_ms > 0) {
      log_line("accepting connections again");
      accept_backoff_ms = 0;
      std::lock_guard lock(mutex);
      accept_waits_ms.clear();
    }
    if (connections.fetch_add(1) >= std::max(1, core.config().max_connections)) {
      --connections;
      refuse_connection(socket);
      return do_accept();
    }
    Permit connection(&connections);
    if (const int bytes = core.config().send_buffer_bytes; bytes > 0) {
      beast::error_code ignored;
      socket.set_option(net::socket_base::send_buffer_size(bytes), ignored);
    }
    if (connections_full) {
      log_line("serving new connections again (below --max-connections)");
      connections_full = false;
    }
    if (tls) {
      auto stream = std::make_shared<TlsStream>(std::move(socket), *tls);
      beast::get_lowest_layer(*stream).expires_after(std::chrono::seconds(30));
      stream->async_handshake(ssl::stream_base::server,
                              [this, stream, connection = std::move(connection)](beast::error_code hec) mutable {
                                if (hec) return;
                                serve_http(std::move(*stream), *this, std::move(connection));
                              });
    } else {
      serve_http(PlainStream(std::move(socket)), *this, std::move(connection));
    }
    do_accept();
  });
}

// At --max-connections a new connection is closed at once (the accept loop goes on, so
// it never spins on a full backlog). Plain HTTP first gets a 503 with Retry-After: one
// non-blocking write into a fresh socket's empty send buffer, so it costs no wait; what
// the client already sent is read and dropped so that the close is not a reset that
// could discard the answer. TLS connections are just closed (no handshake for a refusal).
void Server::Impl::refuse_connection(tcp::socket& socket) {
  core.count_refusal(Refusal::kMaxConnections);
  const int limit = core.config().max_connections;
  if (!connections_full) {
    log_line("refusing new connections: " + std::to_string(limit) +
             " already open (--max-connections); open connections are still served");
    connections_full = true;
  }
  beast::error_code ec;
  if (!tls) {
    const std::string body =
        openai_error(503, "server busy: " + std::to_string(limit) + " connections open (--max-connections)",
                     "server_error")
            .body;
    const std::string answer =
        "HTTP/1.1 503 Service Unavailable\r\nServer: earshot\r\nRetry-After: 1\r\nConnection: close\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    socket.non_blocking(true, ec);
    if (!ec) socket.write_some(net::buffer(answer), ec);
    if (!ec) socket.shutdown(tcp::socket::shutdown_send, ec);
    char scratch[4096];
    for (int i = 0; i < 16 && !ec; ++i) socket.read_some(net::buffer(scratch), ec);
  }
  socket.close(ec);
}

// Out of file descriptors (or kernel memory) the listening socket stays readable and
// accept fails at once: retrying at once would spin. Wait, longer each time (50 ms up to
// 1 s), while the open connections are served; log once per episode.
void Server::Impl::on_accept_error(beast::error_code ec) {
  if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
  const int e = ec.value();
  const bool exhausted =
      ec.category() == beast::system_category() && (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM);
  if (!exhausted) return do_accept();  // the peer gave up (ECONNABORTED...): next one
  if (accept_backoff_ms == 0)
    log_line("cannot accept new connections: " + ec.message() +
             " (raise the open-file limit, ulimit -n); open connections are still served, retrying");
  accept_backoff_ms = accept_backoff_ms == 0 ? 50 : std::min(1000, accept_backoff_ms * 2);
  {
    std::lock_guard lock(mutex);
    if (accept_waits_ms.size() < 16) accept_waits_ms.push_back(accept_backoff_ms);
  }
  accept_timer.expires_after(std::chrono::milliseconds(accept_backoff_ms));
  accept_timer.async_wait([this](beast::error_code tec) {
    if (!tec && acceptor.is_open()) do_accept();
  });
}

Server::Server(ServerConfig config, ServerHooks hooks)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(hooks))) {}

Server::~Server() {
  impl_->core.fail_all("server stopped");
  // Transcriptions end once their sessions failed; joined so none outlives the server.
  impl_->blocking.stop();
  // The model workers stop while the I/O context lives: a worker's last step may
  // release a WebSocket connection's last reference (its listener), whose socket
  // needs the context (destroyed before Core and its scheduler).
  impl_->core.scheduler().stop();
  impl_->stop_threads();
}

void Server::start() {
  const ServerConfig& config = impl_->core.config();
  if (!config.ssl_certfile.empty() || !config.ssl_keyfile.empty()) {
    if (config.ssl_certfile.empty() || config.ssl_keyfile.empty())
      throw Error(ErrorCode::kInvalidArgument, "TLS needs both --ssl-certfile and --ssl-keyfile");
    impl_->tls.emplace(ssl::context::tls_server);
    load_tls_files(*impl_->tls, config.ssl_certfile, config.ssl_keyfile);
  }
  beast::error_code ec;
  auto address = net::ip::make_address(config.host, ec);
  if (ec) {
    tcp::resolver resolver(impl_->ioc);
    auto results = resolver.resolve(config.host, std::to_string(config.port), ec);
    if (ec || results.empty()) throw Error(ErrorCode::kInvalidArgument, "cannot resolve --host '" + config.host + "'");
    address = results.begin()->endpoint().address();
  }
  tcp::endpoint endpoint(address, config.port);
  auto& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error(ErrorCode::kIo,
                "cannot listen on " + config.host + ":" + std::to_string(config.port) + ": " + ec.message());
  }
  impl_->port = acceptor.local_endpoint().port();
  impl_->do_accept();
  impl_->arm_housekeeping();
  for (int i = 0; i < std::max(1, config.io_threads); ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

uint16_t Server::port() const { return impl_->port; }

std::string Server::url() const {
  const ServerConfig& config = impl_->core.config();
  return std::string(impl_->tls ? "https://" : "http://") + config.host + ":" + std::to_string(impl_->port);
}

size_t Server::active_sessions() const { return impl_->core.active(); }

size_t Server::send_queue_bytes() const {
  size_t total = 0;
  for (const auto& s : impl_->live_connections()) total += s->queued_bytes();
  return total;
}

uint64_t Server::accept_attempts() const { return impl_->accept_attempts.load(); }

size_t Server::open_connections() const { return static_cast<size_t>(std::max(0, impl_->connections.load())); }

size_t Server::open_uploads() const { return static_cast<size_t>(std::max(0, impl_->uploads.load())); }

std::vector<int> Server::accept_retry_waits_ms() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->accept_waits_ms;
}

std::string Server::metrics_text() const { return impl_->core.metrics_text(); }

void Server::shutdown() {
  if (impl_->shutting_down.exchange(true)) return;
  impl_->core.begin_drain();
  // Draining: the listener stays open so /health, /ready and /metrics answer and new
  // sessions get a refusal (not a reset) while live streams go on.
  const auto drain_end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(impl_->core.config().drain_seconds);
  // A second signal (hurry_up) cuts the drain and the grace short.
  auto busy = [&] { return (impl_->live_streams() > 0 || impl_->blocking.in_flight() > 0) && !impl_->hurry; };
  while (busy() && std::chrono::steady_clock::now() < drain_end)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (auto& s : impl_->live_connections()) s->begin_shutdown();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(impl_->core.config().shutdown_grace_seconds);
  while (busy() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (impl_->live_streams() > 0 || impl_->blocking.in_flight() > 0) {
    log_line("shutdown grace time over; ending the sessions still running");
    // Streams first get their text so far as final (and ready_to_stop); then the rest fails.
    std::vector<std::shared_ptr<StreamConnection>> live = impl_->live_connections();
    auto pending = std::make_shared<std::atomic<int>>(static_cast<int>(live.size()));
    for (auto& s : live) s->force_finish(pending);
    live.clear();
    const auto forced_deadline = std::chrono::steady_clock::now() +
                                 seconds_of(impl_->core.config().final_pass_wait_seconds) + std::chrono::seconds(2);
    while (*pending > 0 && std::chrono::steady_clock::now() < forced_deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  net::post(impl_->acceptor.get_executor(), [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->core.fail_all("server stopped");
  // Let the connections flush their last messages before the loop stops.
  const auto flush_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while ((impl_->live_streams() > 0 || impl_->blocking.in_flight() > 0) &&
         std::chrono::steady_clock::now() < flush_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->stop_threads();
}

void Server::hurry_up() {
  if (!impl_->hurry.exchange(true)) log_line("ending the remaining streams now: their text so far as final");
}

void Server::run_until_signal() {
  std::mutex mutex;
  std::condition_variable cv;
  bool signalled = false;
  net::signal_set signals(impl_->ioc, SIGINT, SIGTERM);
  // The first signal drains (shutdown()); a second one ends the streams still running at once.
  std::function<void(beast::error_code, int)> on_signal = [&](beast::error_code ec, int sig) {
    if (ec) return;
    const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    std::lock_guard lock(mutex);
    if (signalled) {
      log_line(std::string("received ") + name + " again");
      hurry_up();
      return;
    }
    log_line(std::string("received ") + name + ", finishing sessions (send it again to end them now)");
    signalled = true;
    cv.notify_all();
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return signalled; });
  }
  shutdown();
}

}  // namespace earshot::server
