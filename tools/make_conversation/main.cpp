// earshot-make-conversation: a two-speaker conversation WAV (16 kHz mono) of
// real speech from the tests' shared data, and its RTTM truth
// (tools/make_conversation/conversation.h says how it is made).
#include <cstdio>
#include <string>

#include "bench/der.h"
#include "common/error.h"
#include "tools/common/tool_args.h"
#include "tools/make_conversation/conversation.h"

using earshot::Error;
using earshot::ErrorCode;

namespace {
const char* kUsage =
    "usage: earshot-make-conversation --data SHARED/data --wav OUT.wav --rttm OUT.rttm [--file-id conversation]\n";
}

int main(int argc, char** argv) {
  try {
    std::string data, wav, rttm, file_id = "conversation";
    earshot::tools::parse_options(argc, argv, kUsage,
                                  {{"--data", [&](const std::string& v) { data = v; }},
                                   {"--wav", [&](const std::string& v) { wav = v; }},
                                   {"--rttm", [&](const std::string& v) { rttm = v; }},
                                   {"--file-id", [&](const std::string& v) { file_id = v; }}});
    if (data.empty() || wav.empty() || rttm.empty()) throw Error(ErrorCode::kInvalidArgument, kUsage);
    const earshot::tools::Conversation c = earshot::tools::make_conversation(data, file_id);
    earshot::tools::write_wav_16k(wav, c.samples);
    earshot::bench::write_rttm(rttm, c.truth);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-make-conversation: %s\n", e.what());
    return 1;
  }
}
