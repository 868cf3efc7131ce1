// OpenAI's Realtime API as a transcription session speaks it
// (/v1/realtime?intent=transcription), as pure code: the session's settings and
// both shapes clients send them in (the current `session.update` with a
// transcription session, and the beta `transcription_session.update`), the
// client's events, base64 audio, and the server's session and error events.
// Shapes follow OpenAI's API reference and the official `openai` npm package's
// types (RealtimeTranscriptionSessionCreateRequest, TranscriptionSessionUpdate,
// RealtimeErrorEvent). projection.h turns a session's events into the rest.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/keyterms.h"

namespace earshot::openai_realtime {

// A client error in OpenAI's terms: the error event's code and param (the
// offending field's path). The session goes on; the message says what to send.
class RealtimeError : public Error {
 public:
  RealtimeError(std::string code, std::string message, std::string param = "")
      : Error(ErrorCode::kInvalidArgument, message), code_(std::move(code)), param_(std::move(param)) {}
  const std::string& code() const { return code_; }
  const std::string& param() const { return param_; }

 private:
  std::string code_;
  std::string param_;
};

// audio/pcm (16-bit little-endian at 24 kHz, the beta's pcm16), audio/pcmu and
// audio/pcma (G.711 µ-law and A-law at 8 kHz, the beta's g711_ulaw and g711_alaw).
enum class AudioFormat { kPcm16, kPcmu, kPcma };
int sample_rate_of(AudioFormat format);

enum class TurnType { kNone, kServerVad, kSemanticVad };
struct TurnDetection {
  TurnType type = TurnType::kServerVad;
  double threshold = 0.5;          // server_vad: voice activity needed (0..1)
  int prefix_padding_ms = 300;     // server_vad: audio before speech reported with it
  int silence_duration_ms = 500;   // server_vad: silence that ends speech
  std::string eagerness = "auto";  // semantic_vad: low, medium, high, auto (= medium)
  // Echoed as given; a transcription session creates no responses.
  std::optional<bool> create_response, interrupt_response;
  std::optional<int> idle_timeout_ms;
};

struct SessionConfig {
  std::string id;  // "sess_..."
  AudioFormat format = AudioFormat::kPcm16;
  std::string model;                  // echoed (the server's model answers whatever is named)
  std::string language;               // a code; "" = the server's default
  std::string prompt;                 // the session's vocabulary as text (common/keyterms.h)
  std::vector<std::string> keywords;  // literal terms (LiveKit's gpt-transcribe hints): keyterms too
  TurnDetection turn;
  bool logprobs = false;                     // include: item.input_audio_transcription.logprobs
  nlohmann::json noise_reduction = nullptr;  // echoed; earshot filters nothing
  std::string delay;                         // echoed (gpt-realtime-whisper's); earshot's policy decides

  Keyterms keyterms() const;  // the prompt and the keywords
};

enum class Dialect { kCurrent, kBeta };

// Applies an update's session object to `config`: only the fields present change
// (turn_detection null turns detection off). Unknown fields are ignored, as the
// official client may send more than a transcription session uses. Once audio
// has started, the audio format can no longer change. Throws RealtimeError naming
// the field (param "session.audio.input.format.type"...) for a bad value; the
// config is then unchanged.
void apply_update(SessionConfig& config, const nlohmann::json& session, Dialect dialect, bool audio_started);
// The session as session.created / session.updated (current) or
// transcription_session.updated (beta) carry it.
nlohmann::json session_json(const SessionConfig& config, Dialect dialect);

struct ClientEvent {
  enum class Kind { kSessionUpdate, kTranscriptionSessionUpdate, kAppend, kCommit, kClear, kUnknown };
  Kind kind = Kind::kUnknown;
  std::string type;
  std::string event_id;    // the client's, echoed in an error about this event ("" when none)
  nlohmann::json session;  // the updates' session object
  std::string audio;       // append: base64
};
// Throws RealtimeError (invalid_json, missing_type...) for text that is not an event.
ClientEvent parse_client_event(std::string_view text);

// Standard base64 (RFC 4648, padding optional). Throws RealtimeError naming
// `param` for anything else.
std::vector<uint8_t> decode_base64(std::string_view text, const std::string& param);

// Event ids ("event_<prefix><n>") and item ids ("item_<prefix><n>") of one connection.
class Ids {
 public:
  explicit Ids(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string event() { return "event_" + prefix_ + std::to_string(++events_); }
  std::string item() { return "item_" + prefix_ + std::to_string(++items_); }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  uint64_t events_ = 0, items_ = 0;
};

// {"type":"error","event_id":...,"error":{"type","code","message","param","event_id"}}.
// type: "invalid_request_error" (the client's) or "server_error"; "" code/param are null.
nlohmann::json error_event(Ids& ids, const std::string& type, const std::string& code, const std::string& message,
                           const std::string& param = "", const std::string& client_event_id = "");

}  // namespace earshot::openai_realtime
