// Deepgram's /v1/listen as the server reads a client: the request target and its
// options (parse_listen_options with every repeated keyterm/keywords; a bad value
// becomes an Error message or a REST error body naming the option), then text
// messages, one per line (KeepAlive,
// Finalize, CloseStream; anything else becomes an Error message), each also read as
// Flux's Configure (apply_flux_configure: a bad one becomes a ConfigureFailure).
// Errors must be short and free of control characters (fuzz_input.h).
// Input: the target, '\n', the messages. Any exception other than
// earshot::Error, any sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/error.h"
#include "fuzz_input.h"
#include "protocol/deepgram/flux.h"
#include "protocol/deepgram/messages.h"
#include "protocol/deepgram/options.h"
#include "protocol/target.h"

namespace deepgram = earshot::deepgram;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [head, body] = earshot::fuzz::split_head(data, size);
  const auto target = earshot::protocol::parse_target(head);
  try {
    const deepgram::ListenOptions options = deepgram::parse_listen_options(target.query, target.pairs);
    earshot::fuzz::check(options.channels >= 1 && options.channels <= 64, "1 to 64 channels");
    earshot::fuzz::check(options.channels == 1 || !options.encoding.empty(), "channels only with raw audio");
    earshot::fuzz::check(!options.multichannel || options.channels >= 2, "multichannel needs channels");
    earshot::fuzz::check(options.encoding.empty() || options.sample_rate >= 8000, "raw audio has its rate");
    earshot::fuzz::check(options.keyterms.terms.size() <= earshot::Keyterms::kMaxTerms, "keyterms within the limit");
    if (options.utterance_end_ms)
      earshot::fuzz::check(
          *options.utterance_end_ms >= 1000 && *options.utterance_end_ms <= 5000 && options.interim_results,
          "utterance_end_ms is 1000-5000 and needs interim_results");
  } catch (const earshot::Error& e) {
    earshot::fuzz::check_client_message(e.what());
    deepgram::error_message(e.what()).dump();                          // live: an Error message
    deepgram::rest_error("Bad Request", e.what(), "00000000").dump();  // prerecorded: a 400
  }
  while (!body.empty()) {
    const size_t newline = body.find('\n');
    const std::string_view text = body.substr(0, newline);
    body = newline == std::string_view::npos ? std::string_view() : body.substr(newline + 1);
    try {
      deepgram::parse_client_message(text);
    } catch (const earshot::Error& e) {
      earshot::fuzz::check_client_message(e.what());  // a 1 MB "type" was echoed whole, twice
      deepgram::error_message(e.what()).dump();
    }
    try {
      bool keyterms_changed = false;
      const deepgram::FluxOptions next =
          deepgram::apply_flux_configure(deepgram::FluxOptions{}, text, &keyterms_changed);
      earshot::fuzz::check(
          !next.eager_eot_threshold || !next.eot_threshold || *next.eager_eot_threshold <= *next.eot_threshold,
          "an eager threshold at most the end threshold");
    } catch (const earshot::Error& e) {
      earshot::fuzz::check_client_message(e.what());
      deepgram::FluxProjection(deepgram::StreamInfo{}).configure_failure(e.what()).dump();
    }
  }
  return 0;
}
