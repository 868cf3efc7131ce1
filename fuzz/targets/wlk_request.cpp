// WhisperLiveKit's /asr as the server reads a client: the request target (path,
// query: language, target_language, mode, token), the refusal message a bad
// query gets, the config message, then the client's binary messages as
// --pcm-input reads them (s16le in frames of any size; the input's first body
// bytes choose the frame sizes), and the same frames as Deepgram's linear16 at a
// rate the input chooses under a per-message output limit. Refusals must be short
// and free of control characters (a NUL in a query value cut them). Input: the
// target, '\n', the frames.
// Any exception other than earshot::Error, any sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "audio/raw_decoder.h"
#include "common/error.h"
#include "common/utf8.h"
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
    earshot::fuzz::check_client_message(e.what());
    earshot::fuzz::check(earshot::is_valid_utf8(e.what()), "the refusal is UTF-8 as made");
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

  // The same frames as Deepgram's linear16 at a rate the input chooses, each push
  // limited as the server limits a message: a push returns at most the limit, or
  // refuses before converting anything.
  // (Setting up a resampler costs ~8x the rest of an input: 16 kHz passes through
  // but for one body length in eight.)
  const int rate = body.size() % 8 == 0 ? 8000 + int(body.size() % 40001) : 16000;
  earshot::audio::RawDecoder linear16(earshot::audio::RawEncoding::kLinear16, rate);
  constexpr size_t kLimit = 600;
  for (const auto& frame : frames) {
    linear16.set_output_limit(kLimit);
    try {
      earshot::fuzz::check(linear16.push(frame).size() <= kLimit, "a linear16 push makes at most its limit");
    } catch (const earshot::audio::OutputLimitExceeded& e) {
      earshot::fuzz::check(e.limit() == kLimit && frame.size() / 2 * 16000 / size_t(rate) + 1 > kLimit / 2,
                           "only a frame that decodes to about the limit or more is refused");
      break;
    }
  }
  return 0;
}
