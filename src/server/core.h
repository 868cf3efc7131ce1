// The network-free heart of the server: configuration, hooks, the scheduler,
// session slots, drain, metrics, and admission of HTTP requests by the route table
// (routes.h: what each path answers). server.cpp puts Beast around it.
#pragma once

#include <atomic>
#include <chrono>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/config.h"
#include "server/multipart.h"
#include "session/scheduler.h"

namespace earshot::server {

struct HttpRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Counters exported at /metrics. Live sessions are read when the page is made;
// finished sessions fold their counters in here.
struct MetricTotals {
  uint64_t sessions_total_ws = 0;
  uint64_t sessions_total_file = 0;
  uint64_t sessions_refused = 0;
  uint64_t session_errors = 0;
  uint64_t passes = 0;
  double model_seconds = 0;
  double audio_seconds = 0;
  double skipped_seconds = 0;
  double received_seconds = 0;
  uint64_t read_pauses = 0;  // backpressure: a stream's reads paused until its session caught up
  uint64_t http_requests = 0;
  uint64_t slow_clients = 0;  // streams ended because the client stopped reading
};

// Why a session (or, kMaxConnections, a TCP connection) was not admitted
// (/metrics: earshot_refusals_total{reason}).
enum class Refusal { kMaxSessions, kDraining, kUnauthorized, kBadRequest, kMaxConnections };
inline constexpr size_t kRefusalKinds = 5;

// Lag of live streams behind the audio received (remaining_time_transcription),
// sampled once a second per stream: a Prometheus histogram, so a fleet's
// percentiles come from summing the instances' buckets.
struct LagHistogram {
  static constexpr double kBounds[] = {0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60};
  static constexpr size_t kBuckets = std::size(kBounds) + 1;  // the last is +Inf
  uint64_t counts[kBuckets] = {};                             // per bucket, not cumulative
  uint64_t samples = 0;
  double sum = 0;
  void observe(double lag);
};

class Core;

// What a protocol opens a session with.
struct SessionRequest {
  std::string language = "auto";  // "auto" or a code; checked against the model
  bool file = false;              // a whole-file transcription (else a live stream)
  // nullopt: the server's stream or file options (ServerConfig::stream / ::file).
  std::optional<session::StreamOptions> options;
  // The protocol's stage parameters (stages::StreamRequest: target_language, diarize...).
  std::map<std::string, std::string> stage_params;
  Keyterms keyterms;  // the stream's own vocabulary; the server's defaults are added to it
  // How far the stream's text may trail its audio, in ms, for a model that lets a
  // stream choose (Voxtral Realtime); 0 = the server's --delay-ms. The protocols'
  // delay_ms parameter; a model without a stream delay refuses any other value.
  int delay_ms = 0;
};

// One of the --max-sessions slots, held for as long as the object lives (move-only).
class SessionSlot {
 public:
  SessionSlot() = default;
  explicit SessionSlot(Core* core) : core_(core) {}
  SessionSlot(SessionSlot&& other) noexcept : core_(std::exchange(other.core_, nullptr)) {}
  SessionSlot& operator=(SessionSlot&& other) noexcept;
  ~SessionSlot();
  explicit operator bool() const { return core_ != nullptr; }

 private:
  Core* core_ = nullptr;
};

class Core {
 public:
  Core(ServerConfig config, ServerHooks hooks);

  const ServerConfig& config() const { return config_; }
  const ServerHooks& hooks() const { return hooks_; }
  session::Scheduler& scheduler() { return scheduler_; }

  // Session slots (--max-sessions): false when the server is full (counted as a refusal).
  bool acquire_slot();
  void release_slot();
  size_t active() const { return active_.load(); }

  // Draining (SIGTERM): /ready answers 503, new sessions are refused, live ones go on.
  void begin_drain() { draining_ = true; }
  bool draining() const { return draining_.load(); }
  // Admitting sessions: not draining and below --max-sessions (GET /ready).
  bool ready() const;
  void count_refusal(Refusal reason);
  // What a WebSocket upgrade to `path` gets while draining, before the upgrade: 503 with
  // Retry-After and the protocol's error body, so a balancer (nginx's proxy_next_upstream
  // http_503) retries another instance and the client never sees it.
  HttpResponse draining_refusal(const std::string& path);
  // Samples every live stream's lag into the histogram when a second passed since the
  // last sample (cheap otherwise: the stream transports call it on every tick).
  void sample_lags();

  // Creates a stream session; throws Error(kInvalidArgument) for a bad language.
  std::shared_ptr<session::StreamSession> open_session(const std::string& language, bool file);
  // The same with options of the caller's (a protocol that needs word times or short pauses).
  std::shared_ptr<session::StreamSession> open_session(const std::string& language, bool file,
                                                       const session::StreamOptions& options);
  // A stream whose protocol passes the stages its parameters (stages::StreamRequest:
  // target_language, diarize...), which the stages hook reads.
  std::shared_ptr<session::StreamSession> open_session(const std::string& language, bool file,
                                                       const session::StreamOptions& options,
                                                       std::map<std::string, std::string> stage_params);
  // The general form: everything a protocol asks of a session.
  std::shared_ptr<session::StreamSession> open_session(SessionRequest request);
  // Folds a finished session's counters into the totals and forgets it.
  void close_session(const std::shared_ptr<session::StreamSession>& session);

  // Token check: true when no token is configured or `token` matches it.
  bool token_ok(const std::string& token) const;
  // Token from an "Authorization: Bearer x" header ("" when absent).
  static std::string bearer_token(const std::string& authorization);

  // HTTP routes. handle() = admit() then run() or route(), all on the calling thread.
  HttpResponse handle(const HttpRequest& request);
  // The cheap half, for the I/O thread: counts the request, answers OPTIONS, checks
  // the token, and for a file transcription the method and a session slot, before
  // anything is decoded. A refusal (401, 405, 429 with Retry-After) comes back at
  // once; otherwise `slot` is filled for a blocking route and left empty for the rest.
  std::optional<HttpResponse> admit(const HttpRequest& request, SessionSlot& slot);
  // A blocking route (model work on a whole file) holding its slot: call off the I/O threads.
  HttpResponse run(const HttpRequest& request, SessionSlot slot);
  // Every other route (fast).
  HttpResponse route(const HttpRequest& request);
  bool is_blocking_route(const HttpRequest& request) const;
  // Whether a browser page at `origin` may open a WebSocket stream: no Origin (not a
  // browser), the page's own origin (http or https on the Host the request came to), or
  // one listed in --cors-origins ("*" = any). Browsers do not apply CORS to WebSocket,
  // so without this check any page the user opens could stream to a local server.
  bool origin_allowed(const std::string& origin, const std::string& host) const;
  // CORS headers for a response to a request with this Origin ("" when none apply).
  std::vector<std::pair<std::string, std::string>> cors_headers(const std::string& origin) const;

  // An uploaded file's audio through `decoder`, in pieces, stopping as soon as it
  // passes max_audio_seconds (too_long then says so; samples are dropped). Decoder
  // failures propagate as thrown.
  struct UploadAudio {
    std::vector<float> samples;
    std::string too_long;
  };
  UploadAudio decode_upload(const std::string& bytes, audio::StreamDecoder& decoder) const;
  // Runs a whole file through a new session and waits (no polling) until it is done,
  // failed, or transcription_timeout_seconds passed. The session is closed on return.
  struct FileResult {
    session::EventBatch batch;
    bool timed_out = false;
  };
  FileResult transcribe_samples(const std::shared_ptr<session::StreamSession>& session,
                                const std::vector<float>& samples);

  std::string metrics_text() const;
  // Ends every live session with an error and refuses new ones (shutdown).
  void fail_all(const std::string& message);
  void count_http_request();
  void count_error();
  void count_slow_client();
  void count_read_pause();
  // Returns the heap's free memory to the system (glibc's malloc_trim) when a session
  // ended since the last call: glibc keeps what a session freed otherwise, and RSS only
  // ratchets up under churn. Cheap when nothing ended; the server calls it once a second.
  void trim_heap_if_sessions_ended();

 private:
  ServerConfig config_;
  ServerHooks hooks_;
  session::Scheduler scheduler_;
  std::atomic<size_t> active_{0};
  mutable std::mutex mutex_;
  MetricTotals totals_;
  struct LiveSession {
    std::weak_ptr<session::StreamSession> session;
    bool file = false;
  };
  std::vector<LiveSession> live_;
  bool stopped_ = false;  // after fail_all(); under mutex_
  std::atomic<bool> session_ended_{false};
  std::atomic<bool> draining_{false};
  uint64_t refusals_[kRefusalKinds] = {};    // under mutex_
  LagHistogram lag_;                         // under mutex_
  std::atomic<int64_t> next_lag_sample_{0};  // steady_clock nanoseconds
};

// OpenAI-style error body: {"error":{"message":...,"type":...}}.
HttpResponse openai_error(int status, const std::string& message, const std::string& type = "invalid_request_error");

}  // namespace earshot::server
