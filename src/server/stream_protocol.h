// The seam between a WebSocket transport and a wire protocol. The transport
// (server.cpp: Beast, TLS, message limits, the token check, session slots, idle
// timeout, shutdown, the write queue) calls an adapter for everything the
// protocol decides: what the client's messages mean, which session to open,
// what to send from the session's state, and when to close. Adapters:
// WhisperLiveKit at /asr (wlk_adapter.h), Deepgram at /v1/listen (deepgram_adapter.h),
// Deepgram Flux at /v2/listen (flux_adapter.h), OpenAI's Realtime transcription at
// /v1/realtime (realtime_adapter.h); the route table (routes.cpp) names them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"
#include "protocol/target.h"

namespace earshot::server {

class Core;
using protocol::Target;

// RFC 6455's close codes the adapters share: a policy violation (bad input, a
// wrong token: what Deepgram and OpenAI close with), the server's own failure.
inline constexpr uint16_t kClosePolicyViolation = 1008;
inline constexpr uint16_t kCloseInternalError = 1011;

// What the transport should do next: send these text messages, then maybe close.
struct Outgoing {
  std::vector<std::string> messages;
  std::optional<std::pair<uint16_t, std::string>> close;  // code, reason
  bool finished_now = false;                              // the stream's last result just went out

  void send(std::string text) { messages.push_back(std::move(text)); }
  // A close reason is at most 123 bytes of valid UTF-8 (RFC 6455 5.5.1, 5.5): error texts may
  // quote the client's bytes, so they are repaired and cut at a character boundary here.
  void close_with(uint16_t code, std::string_view reason) { close.emplace(code, valid_utf8_prefix(reason, 120)); }
  // A stream that ended with `error`: 1008 when the client's audio was at fault
  // ("invalid audio: ..."), 1011 for the server's own failure.
  void close_for_error(const std::string& error) {
    close_with(error.rfind("invalid audio", 0) == 0 ? kClosePolicyViolation : kCloseInternalError, error);
  }
  // The stream's own end: a normal close (1000), or close_for_error's when it ended with `error`.
  void close_at_end(const std::string& error) {
    if (error.empty()) {
      close_with(1000, "");
    } else {
      close_for_error(error);
    }
  }
  // The shutdown's grace time ran out before the stream ended: going away (1001).
  void close_for_shutdown() { close_with(1001, "server shutting down: grace time over (--shutdown-grace-s)"); }
};

// The upgrade request as an adapter sees it.
struct UpgradeRequest {
  Target target;
  std::string authorization;        // Authorization header
  std::string websocket_protocols;  // Sec-WebSocket-Protocol header
};

class StreamProtocol {
 public:
  virtual ~StreamProtocol() = default;

  // The API token the client presented ("" when none).
  virtual std::string token(const UpgradeRequest& request) const = 0;
  // What to answer a wrong or missing token.
  virtual Outgoing unauthorized() = 0;
  // The client's options, checked before a slot is taken: a refusal when bad.
  virtual std::optional<Outgoing> prepare(const UpgradeRequest& request) = 0;
  // A refusal in this protocol's words (server full, shutting down).
  virtual Outgoing refusal(const std::string& message, uint16_t code) = 0;
  // Holding a slot: opens the session; a close in the result means it could not.
  virtual Outgoing start() = 0;

  virtual Outgoing on_text(std::string_view text) = 0;
  virtual Outgoing on_binary(std::span<const uint8_t> bytes) = 0;
  // No more audio will come (idle timeout, server shutdown). Idempotent.
  virtual void end_stream() = 0;
  virtual bool ended() const = 0;
  // Backpressure: false while the session holds as much audio from a client
  // sending faster than real time as it may; the transport stops reading until
  // it is true again (on a later tick).
  virtual bool accepting_audio() const { return true; }
  // The server gives up on the stream (shutdown grace over): no model pass starts
  // after this; model_running() tells when the one running has finished, so that
  // force_finish() includes its words.
  virtual void halt() {}
  virtual bool model_running() const { return false; }
  // After start(): `wake` is to be called (from any thread, never blocking) whenever
  // the session may have something new to send or can take audio again; the
  // transport then calls on_tick() on its own thread.
  virtual void watch(std::function<void()> wake) { (void)wake; }
  // What the session produced since the last call: called when woken, and at least
  // every update interval (idle and lag figures).
  virtual Outgoing on_tick() = 0;
  // The server stops before the session is done: everything so far (the provisional
  // text included) as the final result, the protocol's end message, and a close.
  virtual Outgoing force_finish() {
    Outgoing out;
    out.close_with(1001, "server shutting down");
    return out;
  }
  // The last result was sent (the stream is over for the client).
  virtual bool finished() const = 0;
  // The connection is gone: the session is failed if still running and released. Idempotent.
  virtual void on_close() = 0;
};

// Adapters for the WebSocket routes; nullptr for a path with none.
std::unique_ptr<StreamProtocol> make_stream_protocol(const std::string& path, Core& core);

}  // namespace earshot::server
