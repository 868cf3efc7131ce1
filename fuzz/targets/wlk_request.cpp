// WhisperLiveKit's /asr as the server reads a client: the request target (path,
// query: language, target_language, mode, token), the refusal message a bad
// query gets, the config message, then the client's binary messages as
// --pcm-input reads them (s16le in frames of any size; the input's first body
// bytes choose the frame sizes). Input: the target, '\n', the frames.
// Any exception other than earshot::Error, any sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "fuzz_input.h"
#include "protocol/target.h"
#include "protocol/wlk/protocol.h"
#include "server/pcm_decoder.h"

namespace wlk = earshot::protocol::wlk;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [head, body] = earshot::fuzz::split_head(data, size);
  const auto target = earshot::protocol::parse_target(head);
  try {
    const wlk::StreamParams params = wlk::parse_stream_params(target.query, target.path.size() % 2 ? "en" : "");
    earshot::fuzz::check(!params.language.empty(), "a stream always has a language (or auto)");
    wlk::config_message(true, params.diff_mode).dump();
  } catch (const earshot::Error& e) {
    wlk::error_message(e.what()).dump();  // what WlkProtocol::refusal sends
  }
  earshot::server::PcmDecoder decoder;
  size_t samples = 0;
  const auto frames = earshot::fuzz::pieces(reinterpret_cast<const uint8_t*>(body.data()), body.size(), 1);
  size_t bytes = 0;
  for (const auto& frame : frames) {
    samples += decoder.push(frame).size();
    bytes += frame.size();
  }
  decoder.finish();
  earshot::fuzz::check(samples == bytes / 2, "one sample per two bytes, however the frames cut them");
  return 0;
}
