#include "server/core.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/text.h"
#include "protocol/target.h"
#include "server/routes.h"

namespace earshot::server {

using protocol::parse_target;

namespace {

// Constant-time comparison so the token cannot be guessed byte by byte from timing.
bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

HttpResponse json_response(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

}  // namespace

HttpResponse openai_error(int status, const std::string& message, const std::string& type) {
  return json_response(status,
                       {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}});
}

Core::Core(ServerConfig config, ServerHooks hooks)
    : config_(std::move(config)), hooks_(std::move(hooks)), scheduler_(config_.workers, config_.pass_threads) {
  // A file is bounded by the upload limit; none of it may be skipped.
  config_.file.max_pending_seconds = 0;
  if (!hooks_.make_processor) throw Error(ErrorCode::kInternal, "server needs a processor factory");
}

SessionSlot& SessionSlot::operator=(SessionSlot&& other) noexcept {
  if (this != &other) {
    if (core_) core_->release_slot();
    core_ = std::exchange(other.core_, nullptr);
  }
  return *this;
}

SessionSlot::~SessionSlot() {
  if (core_) core_->release_slot();
}

bool Core::acquire_slot() {
  size_t current = active_.load();
  while (current < static_cast<size_t>(std::max(0, config_.max_sessions))) {
    if (active_.compare_exchange_weak(current, current + 1)) return true;
  }
  std::lock_guard lock(mutex_);
  ++totals_.sessions_refused;
  ++refusals_[static_cast<size_t>(Refusal::kMaxSessions)];
  return false;
}

bool Core::ready() const {
  return !draining_ && active_.load() < static_cast<size_t>(std::max(0, config_.max_sessions));
}

void Core::count_refusal(Refusal reason) {
  std::lock_guard lock(mutex_);
  ++refusals_[static_cast<size_t>(reason)];
}

HttpResponse Core::draining_refusal(const std::string& path) {
  count_refusal(Refusal::kDraining);
  const std::string message = "server draining (shutting down): connect again to reach another instance";
  const Route* route = find_route(path);
  HttpResponse r = dialect_error(route ? route->dialect : Dialect::kWlk, 503, message);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

void LagHistogram::observe(double lag) {
  size_t i = 0;
  while (i < std::size(kBounds) && lag > kBounds[i]) ++i;
  ++counts[i];
  ++samples;
  sum += lag;
}

void Core::sample_lags() {
  const int64_t now = (hooks_.now ? hooks_.now() : std::chrono::steady_clock::now()).time_since_epoch().count();
  int64_t next = next_lag_sample_.load();
  if (now < next || !next_lag_sample_.compare_exchange_strong(next, now + 1'000'000'000)) return;
  std::vector<std::shared_ptr<session::StreamSession>> streams;
  {
    std::lock_guard lock(mutex_);
    for (const LiveSession& l : live_)
      if (auto p = l.session.lock(); p && !l.file) streams.push_back(p);
  }
  std::vector<double> lags;
  for (const auto& s : streams) lags.push_back(s->status().lag_transcription());
  std::lock_guard lock(mutex_);
  for (double lag : lags) lag_.observe(lag);
}

void Core::release_slot() { --active_; }

std::shared_ptr<session::StreamSession> Core::open_session(const std::string& language, bool file) {
  return open_session(language, file, file ? config_.file : config_.stream);
}

std::shared_ptr<session::StreamSession> Core::open_session(const std::string& language, bool file,
                                                           const session::StreamOptions& options) {
  return open_session(language, file, options, {});
}

std::shared_ptr<session::StreamSession> Core::open_session(const std::string& language, bool file,
                                                           const session::StreamOptions& options,
                                                           std::map<std::string, std::string> stage_params) {
  return open_session({language, file, options, std::move(stage_params), {}});
}

std::shared_ptr<session::StreamSession> Core::open_session(SessionRequest request) {
  const std::string& language = request.language;
  const bool file = request.file;
  const session::StreamOptions options = request.options.value_or(file ? config_.file : config_.stream);
  if (hooks_.check_language && language != "auto") {
    std::string problem = hooks_.check_language(language);
    if (!problem.empty()) throw Error(ErrorCode::kInvalidArgument, problem);
  }
  std::unique_ptr<OnlineProcessor> processor =
      hooks_.make_processor({language, Keyterms::merge(config_.keyterms, request.keyterms), request.delay_ms});
  std::unique_ptr<session::VoiceActivityDetector> vad;
  if (hooks_.make_vad) vad = hooks_.make_vad();
  std::vector<std::unique_ptr<stages::Stage>> chain;
  if (hooks_.make_stages) chain = hooks_.make_stages({language, std::move(request.stage_params), !file});
  session::StreamSession::Clock clock;  // steady_clock's unless the hooks bring one
  if (hooks_.now)
    clock = [now = hooks_.now] { return std::chrono::duration<double>(now().time_since_epoch()).count(); };
  auto session = std::make_shared<session::StreamSession>(std::move(processor), std::move(vad), options,
                                                          std::move(clock), std::move(chain));
  std::lock_guard lock(mutex_);
  // Checked where fail_all() reads the list: a session is either failed by it or never opened.
  if (stopped_) throw Error(ErrorCode::kIo, "server stopped");
  (file ? totals_.sessions_total_file : totals_.sessions_total_ws)++;
  live_.push_back({session, file});
  return session;
}

void Core::close_session(const std::shared_ptr<session::StreamSession>& session) {
  if (!session) return;
  session::SessionStats stats = session->stats();
  session::StreamStatus status = session->status();
  std::lock_guard lock(mutex_);
  totals_.passes += stats.passes;
  totals_.model_seconds += stats.model_seconds;
  totals_.audio_seconds += stats.audio_seconds;
  totals_.skipped_seconds += status.skipped_seconds;
  totals_.received_seconds += status.received_seconds;
  if (!status.error.empty()) ++totals_.session_errors;
  session_ended_ = true;
  live_.erase(std::remove_if(live_.begin(), live_.end(),
                             [&](const LiveSession& l) {
                               auto p = l.session.lock();
                               return !p || p == session;
                             }),
              live_.end());
}

bool Core::token_ok(const std::string& token) const {
  return config_.api_token.empty() || equal_constant_time(token, config_.api_token);
}

std::string Core::bearer_token(const std::string& authorization) {
  // Auth schemes are case-insensitive (RFC 9110 section 11.1).
  std::string value = trim(authorization, " \t");
  if (value.size() <= 7 || value[6] != ' ') return "";
  for (size_t i = 0; i < 6; ++i)
    if (std::tolower(static_cast<unsigned char>(value[i])) != "bearer"[i]) return "";
  return trim(value.substr(7), " \t");
}

void Core::fail_all(const std::string& message) {
  std::vector<std::shared_ptr<session::StreamSession>> live;
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    for (const LiveSession& l : live_)
      if (auto p = l.session.lock()) live.push_back(p);
  }
  for (auto& s : live) s->fail(message);
  scheduler_.wake_waiters();
}

void Core::count_http_request() {
  std::lock_guard lock(mutex_);
  ++totals_.http_requests;
}

void Core::trim_heap_if_sessions_ended() {
  if (!session_ended_.exchange(false)) return;
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

void Core::count_read_pause() {
  std::lock_guard lock(mutex_);
  ++totals_.read_pauses;
}

void Core::count_slow_client() {
  std::lock_guard lock(mutex_);
  ++totals_.slow_clients;
}

void Core::count_error() {
  std::lock_guard lock(mutex_);
  ++totals_.session_errors;
}

std::vector<std::pair<std::string, std::string>> Core::cors_headers(const std::string& origin) const {
  if (origin.empty() || config_.cors_origins.empty()) return {};
  bool any = std::find(config_.cors_origins.begin(), config_.cors_origins.end(), "*") != config_.cors_origins.end();
  bool listed =
      std::find(config_.cors_origins.begin(), config_.cors_origins.end(), origin) != config_.cors_origins.end();
  if (!any && !listed) return {};
  return {{"Access-Control-Allow-Origin", any ? "*" : origin},
          {"Vary", "Origin"},
          {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
          {"Access-Control-Allow-Headers", "Authorization, Content-Type"}};
}

bool Core::origin_allowed(const std::string& origin, const std::string& host) const {
  if (origin.empty()) return true;
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  const std::string o = lower(origin), h = lower(trim(host, " \t"));
  if (!h.empty() && (o == "http://" + h || o == "https://" + h)) return true;
  for (const std::string& allowed : config_.cors_origins)
    if (allowed == "*" || lower(allowed) == o) return true;
  return false;
}

bool Core::is_blocking_route(const HttpRequest& request) const {
  if (request.method != "POST") return false;
  const Route* route = find_route(parse_target(request.target).path);
  return route && route->upload;
}

HttpResponse Core::handle(const HttpRequest& request) {
  SessionSlot slot;
  if (std::optional<HttpResponse> refusal = admit(request, slot)) return std::move(*refusal);
  return slot ? run(request, std::move(slot)) : route(request);
}

std::optional<HttpResponse> Core::admit(const HttpRequest& request, SessionSlot& slot) {
  count_http_request();
  if (request.method == "OPTIONS") {
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    return r;
  }
  const std::string path = parse_target(request.target).path;
  const Route* route = find_route(path);
  const Dialect dialect = route && route->dialect != Dialect::kWlk ? route->dialect : Dialect::kOpenAi;
  // An unknown /v1/ path asks for the token as the known ones do.
  const bool needs_token = route ? route->needs_token : path.rfind("/v1/", 0) == 0;
  if (needs_token && !token_ok(request_token(dialect, request))) {
    if (is_blocking_route(request)) count_refusal(Refusal::kUnauthorized);
    HttpResponse r = dialect_error(dialect, 401, "invalid or missing API token");
    r.headers.emplace_back("WWW-Authenticate", dialect == Dialect::kDeepgram ? "Token" : "Bearer");
    return r;
  }
  if (!route) return std::nullopt;  // route() answers 404
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (!(get && route->get) && !(request.method == "POST" && route->upload)) {
    HttpResponse r = dialect_error(dialect, 405, std::string(route->usage) + " for " + path);
    std::string allow = route->get ? "GET, HEAD" : "";
    if (route->upload) allow += allow.empty() ? "POST" : ", POST";
    if (!allow.empty()) r.headers.emplace_back("Allow", allow);
    return r;
  }
  if (!is_blocking_route(request)) return std::nullopt;
  // The slot before the body is parsed or decoded: a full server refuses at once, cheaply.
  if (!acquire_slot()) {
    HttpResponse r = dialect_error(
        dialect, 429,
        "server busy: " + std::to_string(config_.max_sessions) + " sessions running (--max-sessions); retry later");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  slot = SessionSlot(this);
  return std::nullopt;
}

HttpResponse Core::run(const HttpRequest& request, SessionSlot slot) {
  (void)slot;  // held until the transcription is over
  const Route* route = find_route(parse_target(request.target).path);
  if (!route || !route->upload) return openai_error(404, "no upload route for " + request.target);
  return route->upload(*this, request);
}

HttpResponse Core::route(const HttpRequest& request) {
  const std::string path = parse_target(request.target).path;
  const Route* route = find_route(path);
  if (route && route->get && (request.method == "GET" || request.method == "HEAD")) return route->get(*this, request);
  return openai_error(404, "no route for " + request.method + " " + path);
}

std::string Core::metrics_text() const {
  MetricTotals t;
  LagHistogram lag;
  uint64_t refusals[kRefusalKinds] = {};
  size_t live_streams = 0, live_files = 0;
  std::vector<std::shared_ptr<session::StreamSession>> live;
  {
    std::lock_guard lock(mutex_);
    t = totals_;
    lag = lag_;
    std::copy(std::begin(refusals_), std::end(refusals_), refusals);
    for (const LiveSession& l : live_)
      if (auto p = l.session.lock()) {
        live.push_back(p);
        ++(l.file ? live_files : live_streams);
      }
  }
  double max_lag = 0, sum_lag = 0;
  size_t streams = 0;
  for (const auto& s : live) {
    session::SessionStats stats = s->stats();
    session::StreamStatus status = s->status();
    t.passes += stats.passes;
    t.model_seconds += stats.model_seconds;
    t.audio_seconds += stats.audio_seconds;
    t.skipped_seconds += status.skipped_seconds;
    t.received_seconds += status.received_seconds;
    max_lag = std::max(max_lag, status.lag_transcription());
    sum_lag += status.lag_transcription();
    ++streams;
  }
  std::ostringstream out;
  auto metric = [&](const char* name, const char* type, const char* help, auto value, const char* labels = "") {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
        << name << labels << ' ' << value << '\n';
  };
  metric("earshot_sessions_active", "gauge", "Streams and file transcriptions running now.", active_.load());
  out << "# HELP earshot_sessions_total Sessions opened since start.\n# TYPE earshot_sessions_total counter\n"
      << "earshot_sessions_total{kind=\"websocket\"} " << t.sessions_total_ws << '\n'
      << "earshot_sessions_total{kind=\"file\"} " << t.sessions_total_file << '\n';
  metric("earshot_sessions_refused_total", "counter", "Sessions refused because --max-sessions was reached.",
         t.sessions_refused);
  metric("earshot_session_errors_total", "counter", "Sessions ended by an error.", t.session_errors);
  metric("earshot_audio_seconds_total", "counter", "Seconds of audio handed to VAD and model.", t.audio_seconds);
  metric("earshot_audio_received_seconds_total", "counter", "Seconds of audio received from clients.",
         t.received_seconds);
  metric("earshot_audio_skipped_seconds_total", "counter",
         "Seconds of audio skipped because a session fell too far behind a client paced in real time.",
         t.skipped_seconds);
  metric("earshot_stream_read_pauses_total", "counter",
         "Times a stream's client, sending faster than real time, was not read until its session caught up "
         "(backpressure at --max-buffered-seconds; nothing is lost).",
         t.read_pauses);
  metric("earshot_passes_total", "counter", "Policy passes (process/flush calls) run.", t.passes);
  metric("earshot_model_seconds_total", "counter", "Wall seconds spent in VAD and model passes.", t.model_seconds);
  if (hooks_.model_times) {
    ModelTimes m = hooks_.model_times();
    metric("earshot_encoder_seconds_total", "counter", "Wall seconds in encoder passes.", m.encoder_seconds);
    metric("earshot_decoder_seconds_total", "counter", "Wall seconds in decoder passes.", m.decoder_seconds);
    metric("earshot_encoder_passes_total", "counter", "Encoder passes.", m.encoder_passes);
    metric("earshot_decoder_passes_total", "counter", "Decoder passes.", m.decoder_passes);
  }
  if (hooks_.batch_totals) {
    const BatchTotals b = hooks_.batch_totals();
    metric("earshot_batch_steps_total", "counter",
           "Model steps run batched across streams (Whisper decoder steps, streaming transducer chunks).", b.steps);
    metric("earshot_batch_graphs_total", "counter", "Graphs those steps ran in (steps / graphs: the mean batch size).",
           b.graphs);
    metric("earshot_batch_size_max", "gauge", "The largest batch so far (0: not counted by this family).", b.max_batch);
  }
  if (hooks_.stage_metrics)
    for (const stages::Metric& m : hooks_.stage_metrics())
      metric(m.name.c_str(), m.type.c_str(), m.help.c_str(), m.value);
  metric("earshot_lag_seconds_max", "gauge", "Largest remaining_time_transcription among live sessions.", max_lag);
  metric("earshot_lag_seconds_mean", "gauge", "Mean remaining_time_transcription of live sessions.",
         streams ? sum_lag / static_cast<double>(streams) : 0.0);
  metric("earshot_scheduler_queued", "gauge", "Sessions waiting for a worker.", scheduler_.queued());
  metric("earshot_scheduler_workers", "gauge", "Worker threads running model passes (--workers).",
         scheduler_.workers());
  metric("earshot_scheduler_pass_threads", "gauge", "Threads per model pass (0: the model's own, --threads).",
         scheduler_.pass_threads().threads);
  metric("earshot_scheduler_pass_threads_max", "gauge",
         "Threads a pass with none waiting behind it may take (--lend-cores).", scheduler_.pass_threads().max_threads);
  metric("earshot_scheduler_lent_steps_total", "counter", "Model steps that ran on cores borrowed from idle workers.",
         scheduler_.lent_steps());
  metric("earshot_http_requests_total", "counter", "HTTP requests served (WebSocket upgrades excluded).",
         t.http_requests);
  metric("earshot_streams_slow_client_total", "counter",
         "Streams ended because the client did not read its updates within --write-timeout.", t.slow_clients);
  // Fleet metrics: what a balancer's dashboard sums or compares across instances.
  out << "# HELP earshot_sessions_live Sessions open now, by kind.\n# TYPE earshot_sessions_live gauge\n"
      << "earshot_sessions_live{kind=\"websocket\"} " << live_streams << '\n'
      << "earshot_sessions_live{kind=\"file\"} " << live_files << '\n';
  metric("earshot_sessions_max", "gauge", "Sessions admitted at once (--max-sessions).", config_.max_sessions);
  out << "# HELP earshot_refusals_total Sessions not admitted, by reason (max_connections: TCP "
         "connections closed at accept).\n"
         "# TYPE earshot_refusals_total counter\n";
  const char* reasons[kRefusalKinds] = {"max_sessions", "draining", "unauthorized", "bad_request", "max_connections"};
  for (size_t i = 0; i < kRefusalKinds; ++i)
    out << "earshot_refusals_total{reason=\"" << reasons[i] << "\"} " << refusals[i] << '\n';
  metric("earshot_draining", "gauge", "1 while the instance drains (SIGTERM): new sessions go elsewhere.",
         draining_ ? 1 : 0);
  metric("earshot_ready", "gauge", "1 while /ready answers 200 (admitting sessions).", ready() ? 1 : 0);
  out << "# HELP earshot_stream_lag_seconds Live streams' lag behind the audio received, sampled once a second "
         "per stream.\n# TYPE earshot_stream_lag_seconds histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < LagHistogram::kBuckets; ++i) {
    cumulative += lag.counts[i];
    out << "earshot_stream_lag_seconds_bucket{le=\"";
    if (i < std::size(LagHistogram::kBounds))
      out << LagHistogram::kBounds[i];
    else
      out << "+Inf";
    out << "\"} " << cumulative << '\n';
  }
  out << "earshot_stream_lag_seconds_sum " << lag.sum << "\nearshot_stream_lag_seconds_count " << lag.samples << '\n';
  return out.str();
}

}  // namespace earshot::server
