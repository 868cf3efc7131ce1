// Plain HTTP/1.1 connections of `earshot serve` (each may become a WebSocket stream
// by upgrade): header admission before any body byte, upload permits, refusals that
// drain the declared body, and model work on the blocking pool.
#include "server/server_impl.h"

namespace earshot::server {

namespace {

// Header fields beyond this are refused with 431: a request's headers stay small in memory.
constexpr size_t kHeaderLimit = 16 * 1024;
// Bodies of routes that do not read them (anything but an upload): kept small.
constexpr size_t kSmallBodyLimit = 64 * 1024;

// HTTP/1.1: the headers are read and admitted (token, method, session slot, upload
// permit) before any body byte is, so an unauthenticated or refused upload costs
// the server its headers only.
template <class Stream>
class HttpSession : public std::enable_shared_from_this<HttpSession<Stream>> {
 public:
  HttpSession(Stream&& stream, Server::Impl& impl, Permit connection)
      : stream_(std::move(stream)),
        impl_(impl),
        connection_(std::move(connection)),
        body_timer_(stream_.get_executor()) {}

  void run() { do_read(); }

 private:
  std::chrono::steady_clock::duration idle() const { return seconds_of(impl_.core.config().idle_timeout_seconds); }

  void do_read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    // Set once the headers are admitted. Not boost::none: Boost 1.74's header check then
    // compares a length with an empty optional and refuses every body.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    // A connection idle between requests, or sending its headers too slowly, is closed quietly.
    beast::get_lowest_layer(stream_).expires_after(idle());
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&HttpSession::on_header, this->shared_from_this()));
  }

  void on_header(beast::error_code ec, size_t) {
    if (ec == http::error::end_of_stream) return shutdown_stream(stream_);
    if (ec == http::error::header_limit)
      return refuse(openai_error(431, "request headers larger than " + std::to_string(kHeaderLimit / 1024) + " KiB"));
    if (ec && ec.category() == http::make_error_code(http::error::bad_method).category())
      return refuse(openai_error(400, "malformed HTTP request: " + ec.message()));
    if (ec) return;  // timeout, reset
    http::request_parser<http::string_body>& parser = *parser_;
    keep_alive_ = parser.get().keep_alive();
    if (websocket::is_upgrade(parser.get())) {
      if (!parser.is_done()) return refuse(openai_error(400, "a WebSocket upgrade has no body"));
      return upgrade(parser.release());
    }
    HttpRequest request;
    request.method = std::string(parser.get().method_string());
    request.target = std::string(parser.get().target());
    for (const auto& field : parser.get()) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request.headers[name] = std::string(field.value());
    }
    std::string origin = request.header("origin");
    Core& core = impl_.core;
    SessionSlot slot;
    try {
      if (std::optional<HttpResponse> refusal = core.admit(request, slot)) return refuse(*refusal, origin);
    } catch (const std::exception& e) {
      return refuse(openai_error(500, e.what(), "server_error"), origin);
    }
    if (slot && impl_.shutting_down) {
      core.count_refusal(Refusal::kDraining);
      HttpResponse r = openai_error(503, "server shutting down", "server_error");
      r.headers.emplace_back("Retry-After", "5");
      return refuse(r, origin);
    }
    if (parser.is_done()) return dispatch(std::move(request), std::move(slot), std::move(origin));
    const ServerConfig& config = core.config();
    // Multipart framing adds a little to the file itself.
    const uint64_t limit = slot ? config.max_upload_bytes + 64 * 1024 : kSmallBodyLimit;
    if (parser.content_length() && *parser.content_length() > limit) return too_large(origin, bool(slot));
    if (slot) {
      if (++impl_.uploads > std::max(1, config.max_uploads)) {
        --impl_.uploads;
        HttpResponse r = openai_error(503,
                                      "server busy: " + std::to_string(config.max_uploads) +
                                          " uploads being received (--max-uploads); retry later",
                                      "server_error");
        r.headers.emplace_back("Retry-After", "1");
        return refuse(r, origin);
      }
      permit_ = Permit(&impl_.uploads);
    }
    parser.body_limit(limit);
    pending_.emplace(Pending{std::move(request), std::move(slot), std::move(origin)});
    if (boost::beast::iequals(parser.get()[http::field::expect], "100-continue")) {
      // curl waits for this (or a second) before sending a large body: the headers are admitted.
      auto res = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      beast::get_lowest_layer(stream_).expires_after(idle());
      return http::async_write(stream_, *res, [self = this->shared_from_this(), res](beast::error_code wec, size_t) {
        if (!wec) self->read_body();
      });
    }
    read_body();
  }

  // The body in pieces, each within --idle-timeout, the whole within --body-timeout-s,
  // and at --body-min-rate-kb on average once its grace passed: a stalled, trickling or
  // endless body gets 408 and frees its permit. Our own timer: the stream's would close
  // the socket and leave no way to answer.
  void read_body() {
    beast::get_lowest_layer(stream_).expires_never();
    const ServerConfig& config = impl_.core.config();
    const auto now = std::chrono::steady_clock::now();
    if (body_started_ == std::chrono::steady_clock::time_point{}) body_started_ = now;
    auto deadline = std::min(now + idle(), body_started_ + seconds_of(config.body_timeout_seconds));
    if (config.body_min_bytes_per_second > 0)  // when the average rate would fall below the minimum
      deadline = std::min(
          deadline, body_started_ + seconds_of(config.body_rate_grace_seconds + static_cast<double>(body_bytes_ + 1) /
                                                                                    config.body_min_bytes_per_second));
    const uint64_t generation = ++read_generation_;
    body_timer_.expires_at(deadline);
    body_timer_.async_wait([self = this->shared_from_this(), generation](beast::error_code ec) {
      if (ec || generation != self->read_generation_) return;
      self->stalled_ = true;
      beast::error_code ignored;
      beast::get_lowest_layer(self->stream_).socket().cancel(ignored);
    });
    const auto read_started = now;
    http::async_read_some(stream_, buffer_, *parser_,
                          [self = this->shared_from_this(), read_started](beast::error_code ec, size_t n) {
                            self->on_body(ec, n, read_started);
                          });
  }

  // Why a body timer fired, in words the client can act on.
  std::string slow_body_reason(std::chrono::steady_clock::time_point read_started) const {
    const ServerConfig& config = impl_.core.config();
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - body_started_).count();
    auto number = [](double v) { return std::to_string(static_cast<long long>(v)); };
    if (elapsed >= config.body_timeout_seconds)
      return "request body not complete after " + number(config.body_timeout_seconds) + " s (--body-timeout-s)";
    if (std::chrono::duration<double>(now - read_started).count() >= config.idle_timeout_seconds)
      return "request body stalled: nothing received for " + number(config.idle_timeout_seconds) +
             " s (--idle-timeout)";
    return "request body too slow: " + number(static_cast<double>(body_bytes_)) + " bytes in " + number(elapsed) +
           " s, below the minimum of " + number(config.body_min_bytes_per_second) + " bytes/s (--body-min-rate-kb)";
  }

  void on_body(beast::error_code ec, size_t n, std::chrono::steady_clock::time_point read_started) {
    ++read_generation_;
    body_timer_.cancel();
    body_bytes_ += n;
    if (stalled_) {
      permit_ = Permit();
      const std::string reason = slow_body_reason(read_started);
      log_line("closing an HTTP request: " + reason);
      return refuse(openai_error(408, reason), pending_->origin);
    }
    if (ec == http::error::body_limit) return too_large(pending_->origin, bool(pending_->slot));
    if (ec) return;
    if (!parser_->is_done()) return read_body();
    permit_ = Permit();
    body_bytes_ = 0;
    body_started_ = {};
    Pending p = std::move(*pending_);
    pending_.reset();
    p.request.body = std::move(parser_->get().body());
    dispatch(std::move(p.request), std::move(p.slot), std::move(p.origin));
  }

  void dispatch(HttpRequest request, SessionSlot slot, std::string origin) {
    if (slot) return run_blocking(std::move(request), std::move(slot), std::move(origin));
    HttpResponse response;
    try {
      response = impl_.core.route(request);
    } catch (const std::exception& e) {
      response = openai_error(500, e.what(), "server_error");
    }
    if (request.method == "HEAD") response.body.clear();
    write(response, origin);
  }

  void upgrade(http::request<http::string_body> req) {
    if (impl_.shutting_down) {
      // Refused before the upgrade: a balancer retries another instance (deploy/nginx).
      keep_alive_ = false;
      return write(impl_.core.draining_refusal(parse_target(std::string(req.target())).path), req[http::field::origin]);
    }
    std::unique_ptr<StreamProtocol> protocol =
        make_stream_protocol(parse_target(std::string(req.target())).path, impl_.core);
    if (!protocol) {
      keep_alive_ = false;
      return write(openai_error(404, "no WebSocket endpoint at " + std::string(req.target())), "");
    }
    const std::string origin(req[http::field::origin]);
    if (!impl_.core.origin_allowed(origin, std::string(req[http::field::host]))) {
      log_line("refused a WebSocket upgrade from origin " + origin.substr(0, 200) +
               " (not this server's page nor in --cors-origins)");
      keep_alive_ = false;
      return write(openai_error(403, "WebSocket from origin '" + origin +
                                         "' refused: not this server's own page nor listed in --cors-origins"),
                   "");
    }
    beast::get_lowest_layer(stream_).expires_never();
    serve_websocket(std::move(stream_), impl_, std::move(connection_), std::move(protocol), std::move(req));
  }

  // An answer without reading (the rest of) the request: then the connection ends. Until
  // then what the client still sends of its declared body (at most the upload limit, 10 s)
  // is read into a 64 KiB scratch and dropped: clients such as Node's fetch read the
  // answer only once their body is written, and would see a reset instead of the 401.
  void refuse(const HttpResponse& r, const std::string& origin = "") {
    if (!parser_->is_done()) {
      keep_alive_ = false;
      const uint64_t most = impl_.core.config().max_upload_bytes + 64 * 1024;
      // content_length() is only defined once the header is parsed (beast asserts it):
      // a refusal of a malformed or oversized header has no declared body to drain.
      const auto declared = parser_->is_header_done() ? parser_->content_length() : boost::none;
      linger_limit_ = declared ? static_cast<size_t>(std::min<uint64_t>(*declared, most)) : kSmallBodyLimit;
    }
    write(r, origin);
  }

  void too_large(const std::string& origin, bool upload) {
    permit_ = Permit();
    keep_alive_ = false;
    const size_t limit = upload ? impl_.core.config().max_upload_bytes : kSmallBodyLimit;
    // The client may be sending the whole file: drop (never keep) up to a few times the limit.
    linger_limit_ = 4 * limit + (1u << 20);
    write(openai_error(413, std::string(upload ? "upload" : "request body") + " larger than the limit of " +
                                std::to_string(limit) + " bytes"),
          origin);
  }

  // Model work for a whole file: on the bounded pool, answered on this connection's strand.
  void run_blocking(HttpRequest request, SessionSlot slot, std::string origin) {
    beast::get_lowest_layer(stream_).expires_never();
    auto job = [self = this->shared_from_this(), request = std::move(request), slot = std::move(slot),
                origin]() mutable {
      HttpResponse response;
      try {
        response = self->impl_.core.run(request, std::move(slot));
      } catch (const std::exception& e) {
        response = openai_error(500, e.what(), "server_error");
      }
      auto executor = self->stream_.get_executor();
      net::post(executor,
                [self = std::move(self), response = std::move(response), origin] { self->write(response, origin); });
    };
    // std::function needs a copyable callable: the move-only job rides in a shared_ptr.
    auto shared = std::make_shared<decltype(job)>(std::move(job));
    if (!impl_.blocking.post([shared] { (*shared)(); }))
      write(openai_error(503, "server shutting down", "server_error"), origin);
  }

  void write(const HttpResponse& r, beast::string_view origin) {
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "earshot");
    if (!r.content_type.empty()) res->set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res->set(name, value);
    for (const auto& [name, value] : impl_.core.cors_headers(std::string(origin))) res->set(name, value);
    res->keep_alive(keep_alive_);
    res->body() = r.body;
    res->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(idle());
    http::async_write(stream_, *res, [self = this->shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec) return;
      if (self->linger_limit_ > 0) return self->linger(0);
      if (!self->keep_alive_) return shutdown_stream(self->stream_);
      self->do_read();
    });
  }

  // After refusing a request whose body was not read: keep reading (and dropping) what
  // the client is still sending, up to linger_limit_ bytes or 10 s.
  void linger(size_t discarded) {
    if (discarded == 0) {
      shutdown_stream(stream_);
      beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(10));
      scratch_.resize(64 * 1024);
    }
    if (discarded > linger_limit_) return;
    stream_.async_read_some(net::buffer(scratch_),
                            [self = this->shared_from_this(), discarded](beast::error_code ec, size_t n) {
                              if (!ec) self->linger(discarded + n);
                            });
  }

  struct Pending {
    HttpRequest request;
    SessionSlot slot;
    std::string origin;
  };

  Stream stream_;
  Server::Impl& impl_;
  Permit connection_;  // --max-connections
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<Pending> pending_;
  Permit permit_;
  net::steady_timer body_timer_;
  std::chrono::steady_clock::time_point body_started_;  // of the body being read ({} between bodies)
  uint64_t body_bytes_ = 0;                             // of the body being read
  uint64_t read_generation_ = 0;                        // a body timer armed for an earlier read is stale
  bool stalled_ = false;
  bool keep_alive_ = true;
  size_t linger_limit_ = 0;  // > 0: linger after the response, then close
  std::vector<char> scratch_;
};

}  // namespace

void serve_http(PlainStream&& stream, Server::Impl& impl, Permit connection) {
  std::make_shared<HttpSession<PlainStream>>(std::move(stream), impl, std::move(connection))->run();
}
void serve_http(TlsStream&& stream, Server::Impl& impl, Permit connection) {
  std::make_shared<HttpSession<TlsStream>>(std::move(stream), impl, std::move(connection))->run();
}

}  // namespace earshot::server
