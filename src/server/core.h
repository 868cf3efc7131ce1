// The network-free heart of the server: configuration, hooks, the scheduler,
// session slots, metrics, and the HTTP routes other than WebSocket. server.cpp
// puts Beast around it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "server/server.h"
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
  uint64_t http_requests = 0;
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

  // Creates a stream session; throws Error(kInvalidArgument) for a bad language.
  std::shared_ptr<session::StreamSession> open_session(const std::string& language, bool file);
  // Folds a finished session's counters into the totals and forgets it.
  void close_session(const std::shared_ptr<session::StreamSession>& session);

  // Token check: true when no token is configured or `token` matches it.
  bool token_ok(const std::string& token) const;
  // Token from an "Authorization: Bearer x" header ("" when absent).
  static std::string bearer_token(const std::string& authorization);

  // HTTP routes (blocking for transcriptions: call off the I/O threads).
  HttpResponse handle(const HttpRequest& request);
  bool is_blocking_route(const HttpRequest& request) const;
  // CORS headers for a response to a request with this Origin ("" when none apply).
  std::vector<std::pair<std::string, std::string>> cors_headers(const std::string& origin) const;

  std::string metrics_text() const;
  // Ends every live session with an error (shutdown grace time ran out).
  void fail_all(const std::string& message);
  void count_http_request();
  void count_error();

 private:
  HttpResponse transcribe(const HttpRequest& request);

  ServerConfig config_;
  ServerHooks hooks_;
  session::Scheduler scheduler_;
  std::atomic<size_t> active_{0};
  mutable std::mutex mutex_;
  MetricTotals totals_;
  std::vector<std::weak_ptr<session::StreamSession>> live_;
};

// OpenAI-style error body: {"error":{"message":...,"type":...}}.
HttpResponse openai_error(int status, const std::string& message, const std::string& type = "invalid_request_error");

// Parts of a multipart/form-data body.
struct FormPart {
  std::string name;
  std::string filename;
  std::string content_type;
  std::string data;
};
// Throws Error(kInvalidArgument) naming what is wrong.
std::vector<FormPart> parse_multipart(const std::string& content_type, const std::string& body);

}  // namespace earshot::server
