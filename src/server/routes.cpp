// The route table: each path's dialect, token rule and handlers.
#include "server/routes.h"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

#include "protocol/deepgram/messages.h"
#include "protocol/target.h"
#include "protocol/wlk/protocol.h"
#include "server/deepgram_adapter.h"
#include "server/flux_adapter.h"
#include "server/realtime_adapter.h"
#include "server/stream_protocol.h"
#include "server/web_page.h"
#include "server/wlk_adapter.h"

namespace earshot::server {

namespace {

HttpResponse json_response(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

HttpResponse page(Core&, const HttpRequest&) {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::string(web_page());
  return r;
}

// Liveness: 200 for as long as the process serves. "draining" appears only while it
// drains. Each stage the server runs, by name: the page shows its target-language box
// when "translation" is there.
HttpResponse health(Core& core, const HttpRequest&) {
  nlohmann::json body = {{"status", "ok"}, {"backend", core.config().backend}, {"ready", !core.draining()}};
  if (core.draining()) body["draining"] = true;
  for (const std::string& stage : core.config().stages) body[stage] = true;
  return json_response(200, body);
}

// Readiness (a balancer's or Kubernetes' probe): 503 while draining or full.
HttpResponse ready(Core& core, const HttpRequest&) {
  const bool ok = core.ready();
  HttpResponse r = json_response(ok ? 200 : 503, {{"ready", ok},
                                                  {"draining", core.draining()},
                                                  {"sessions", core.active()},
                                                  {"max_sessions", core.config().max_sessions}});
  if (!ok) r.headers.emplace_back("Retry-After", core.draining() ? "5" : "1");
  return r;
}

HttpResponse models(Core& core, const HttpRequest&) {
  return json_response(
      200,
      {{"object", "list"}, {"data", {{{"id", core.config().model_id}, {"object", "model"}, {"owned_by", "earshot"}}}}});
}

HttpResponse metrics(Core& core, const HttpRequest&) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = core.metrics_text();
  return r;
}

// clang-format off
constexpr Route kRoutes[] = {
  {.path = "/",           .get = page,    .usage = "use GET"},
  {.path = "/index.html", .get = page,    .usage = "use GET"},
  {.path = "/health",     .get = health,  .usage = "use GET"},
  {.path = "/ready",      .get = ready,   .usage = "use GET"},
  {.path = "/v1/models",  .needs_token = true, .get = models,  .usage = "use GET"},
  {.path = "/metrics",    .needs_token = true, .get = metrics, .usage = "use GET"},
  // WhisperLiveKit's stream (its page's and its clients').
  {.path = "/asr", .dialect = Dialect::kWlk, .stream = make_wlk_protocol,
   .usage = "open a WebSocket"},
  // OpenAI's file transcription.
  {.path = "/v1/audio/transcriptions", .needs_token = true, .upload = openai_transcription,
   .usage = "use POST with multipart/form-data"},
  // Deepgram's prerecorded and live API.
  {.path = "/v1/listen", .dialect = Dialect::kDeepgram, .needs_token = true, .upload = deepgram_listen,
   .stream = make_deepgram_protocol, .usage = "use POST with the audio as the body, or a WebSocket upgrade,"},
  // Deepgram Flux: turn-based streams for voice agents.
  {.path = "/v2/listen", .dialect = Dialect::kDeepgram, .needs_token = true, .stream = make_flux_protocol,
   .usage = "open a WebSocket"},
  // OpenAI's Realtime transcription session (?intent=transcription).
  {.path = "/v1/realtime", .needs_token = true, .stream = make_realtime_protocol,
   .usage = "open a WebSocket (?intent=transcription)"},
};
// clang-format on

}  // namespace

std::span<const Route> routes() { return kRoutes; }

const Route* find_route(std::string_view path) {
  const auto it = std::find_if(std::begin(kRoutes), std::end(kRoutes), [&](const Route& r) { return r.path == path; });
  return it == std::end(kRoutes) ? nullptr : &*it;
}

HttpResponse dialect_error(Dialect dialect, int status, const std::string& message) {
  struct Codes {
    int status;
    const char* deepgram;
    const char* openai;
  };
  static constexpr Codes kCodes[] = {{401, "INVALID_AUTH", "authentication_error"},
                                     {405, "Method Not Allowed", "invalid_request_error"},
                                     {429, "TOO_MANY_REQUESTS", "rate_limit_error"},
                                     {503, "SERVICE_UNAVAILABLE", "server_error"}};
  Codes codes{status, "Bad Request", status >= 500 ? "server_error" : "invalid_request_error"};
  for (const Codes& c : kCodes)
    if (c.status == status) codes = c;
  switch (dialect) {
    case Dialect::kDeepgram: return json_response(status, deepgram::rest_error(codes.deepgram, message, ""));
    case Dialect::kWlk: return json_response(status, protocol::wlk::error_message(message));
    case Dialect::kOpenAi: break;
  }
  return openai_error(status, message, codes.openai);
}

std::string request_token(Dialect dialect, const HttpRequest& request) {
  // Deepgram's clients send "Authorization: Token <key>" (or the token query parameter).
  if (dialect == Dialect::kDeepgram)
    return deepgram_support::token(protocol::parse_target(request.target).query, request.header("authorization"), "");
  return Core::bearer_token(request.header("authorization"));
}

}  // namespace earshot::server
