// OpenAI's Realtime transcription session as the server reads a client: text
// events, one per line (parse_client_event), each update applied to one session
// in the shape its type names (apply_update, with and without the audio
// started), the session echoed in both shapes, appends' base64 decoded; every
// error made into an error event. Input: the lines. Any exception other than
// the protocol's RealtimeError, any sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_input.h"
#include "protocol/openai_realtime/session.h"

namespace rt = earshot::openai_realtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  rt::SessionConfig config;
  rt::Ids ids("f");
  bool audio_started = false;
  while (!body.empty()) {
    const size_t newline = body.find('\n');
    const std::string_view text = body.substr(0, newline);
    body = newline == std::string_view::npos ? std::string_view() : body.substr(newline + 1);
    rt::ClientEvent event;
    try {
      event = rt::parse_client_event(text);
      switch (event.kind) {
        case rt::ClientEvent::Kind::kSessionUpdate:
        case rt::ClientEvent::Kind::kTranscriptionSessionUpdate: {
          const rt::SessionConfig before = config;
          const rt::Dialect dialect =
              event.kind == rt::ClientEvent::Kind::kSessionUpdate ? rt::Dialect::kCurrent : rt::Dialect::kBeta;
          try {
            rt::apply_update(config, event.session, dialect, audio_started);
          } catch (const rt::RealtimeError&) {
            earshot::fuzz::check(
                config.format == before.format && config.prompt == before.prompt && config.language == before.language,
                "a refused update changes nothing");
            throw;
          }
          rt::session_json(config, rt::Dialect::kCurrent).dump();
          rt::session_json(config, rt::Dialect::kBeta).dump();
          earshot::fuzz::check(config.keyterms().terms.size() <= earshot::Keyterms::kMaxTerms, "keyterms bounded");
          break;
        }
        case rt::ClientEvent::Kind::kAppend: {
          const auto bytes = rt::decode_base64(event.audio, "audio");
          earshot::fuzz::check(bytes.size() <= event.audio.size(), "base64 shrinks");
          audio_started = audio_started || !bytes.empty();
          break;
        }
        default: break;
      }
    } catch (const rt::RealtimeError& e) {
      rt::error_event(ids, "invalid_request_error", e.code(), e.what(), e.param(), event.event_id).dump();
    }
  }
  return 0;
}
