// The server's routes: one record per path (routes.cpp), read by the HTTP admission,
// the plain-HTTP handlers, the file uploads and the WebSocket upgrade alike. A new
// protocol is its adapter plus one line in the table.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "server/core.h"

namespace earshot::server {

class StreamProtocol;

// Whose words a route's errors are in, and how its client sends the API token.
enum class Dialect {
  kOpenAi,    // {"error":{"message","type"}}, "Authorization: Bearer <token>"
  kDeepgram,  // {"err_code","err_msg","request_id"}, "Authorization: Token <token>" or ?token=
  kWlk,       // WhisperLiveKit's {"type":"error","error":...}; its token is the adapter's
};

struct Route {
  std::string_view path;
  Dialect dialect = Dialect::kOpenAi;
  bool needs_token = false;  // --api-token guards it (HTTP; a stream checks in its adapter)
  // Plain HTTP answered on the I/O thread (GET/HEAD); nullptr: none.
  HttpResponse (*get)(Core& core, const HttpRequest& request) = nullptr;
  // A whole file by POST: takes a session slot before the body is read, runs off the
  // I/O threads; nullptr: none.
  HttpResponse (*upload)(Core& core, const HttpRequest& request) = nullptr;
  // A WebSocket stream; nullptr: none.
  std::unique_ptr<StreamProtocol> (*stream)(Core& core) = nullptr;
  // What a request with another method is told (405).
  std::string_view usage;
};

// Every route, and the one at `path` (nullptr: none).
std::span<const Route> routes();
const Route* find_route(std::string_view path);

// A refusal in the route's dialect: the error code or type follows the status (401
// authentication, 405 method, 429 busy, 503 draining; otherwise a bad request).
HttpResponse dialect_error(Dialect dialect, int status, const std::string& message);
// The API token a request carries, read as the route's clients send it.
std::string request_token(Dialect dialect, const HttpRequest& request);

// The upload handlers (transcribe.cpp, listen.cpp).
HttpResponse openai_transcription(Core& core, const HttpRequest& request);  // POST /v1/audio/transcriptions
HttpResponse deepgram_listen(Core& core, const HttpRequest& request);       // POST /v1/listen

}  // namespace earshot::server
