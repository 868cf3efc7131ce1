// earshot-der: scores a diarization (hypothesis RTTM) against its reference
// RTTM and prints md-eval's components: scored time, missed and false-alarm
// speech, scored speaker time, missed, false-alarm and confused speaker time,
// each in seconds and as a percentage of scored speaker time, and the DER.
#include <cmath>
#include <cstdio>
#include <string>

#include "bench/der.h"
#include "common/error.h"
#include "tools/common/tool_args.h"

using earshot::Error;
using earshot::ErrorCode;

namespace {
const char* kUsage =
    "usage: earshot-der --ref REF.rttm --hyp HYP.rttm [--collar 0] [--overlap score|skip] [--uem FILE.uem]\n"
    "  --collar S   no-score zone of +-S seconds around every reference boundary (md-eval -c; default 0,\n"
    "               NIST's RT evaluations use 0.25)\n"
    "  --overlap    score: every overlapping reference speaker counts (default); skip: only stretches\n"
    "               with at most one reference speaker (md-eval -1)\n"
    "  --uem        evaluated ranges per file; default: each file's reference extent\n";

std::string percent(double p) {
  if (std::isnan(p)) return "     n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%7.2f%%", p);
  return buf;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    std::string ref, hyp, uem, overlap = "score";
    earshot::bench::DerOptions options;
    earshot::tools::parse_options(argc, argv, kUsage,
                                  {{"--ref", [&](const std::string& v) { ref = v; }},
                                   {"--hyp", [&](const std::string& v) { hyp = v; }},
                                   {"--uem", [&](const std::string& v) { uem = v; }},
                                   {"--overlap", [&](const std::string& v) { overlap = v; }},
                                   {"--collar", [&](const std::string& v) {
                                      size_t used = 0;
                                      try {
                                        options.collar = std::stod(v, &used);
                                      } catch (const std::exception&) {
                                        used = 0;
                                      }
                                      if (used != v.size() || !(options.collar >= 0))
                                        throw Error(ErrorCode::kInvalidArgument,
                                                    "--collar " + v + ": a number of seconds >= 0");
                                    }}});
    if (ref.empty() || hyp.empty()) throw Error(ErrorCode::kInvalidArgument, kUsage);
    if (overlap != "score" && overlap != "skip")
      throw Error(ErrorCode::kInvalidArgument, "--overlap " + overlap + ": score or skip");
    options.score_overlap = overlap == "score";
    if (!uem.empty()) options.uem = earshot::bench::read_uem(uem);
    const auto s = earshot::bench::score_der(earshot::bench::read_rttm(ref), earshot::bench::read_rttm(hyp), options);
    for (const auto& file : s.unscored_hypothesis_files)
      std::fprintf(stderr, "earshot-der: warning: hypothesis file %s is not in the reference; not scored\n",
                   file.c_str());
    std::printf("collar %.3f s, overlap %s\n", options.collar, options.score_overlap ? "scored" : "skipped");
    std::printf("scored time            %10.2f s\n", s.scored_time);
    std::printf("scored speech          %10.2f s\n", s.scored_speech);
    std::printf("missed speech          %10.2f s\n", s.missed_speech);
    std::printf("false alarm speech     %10.2f s\n", s.falarm_speech);
    std::printf("scored speaker time    %10.2f s\n", s.scored_speaker);
    std::printf("missed speaker time    %10.2f s %s\n", s.missed_speaker, percent(s.missed_percent()).c_str());
    std::printf("false alarm speaker    %10.2f s %s\n", s.falarm_speaker, percent(s.falarm_percent()).c_str());
    std::printf("speaker error          %10.2f s %s\n", s.speaker_error, percent(s.speaker_error_percent()).c_str());
    std::printf("DER                                 %s\n", percent(s.der_percent()).c_str());
    for (const auto& [file, pairs] : s.mapping)
      for (const auto& [r, h] : pairs) std::printf("mapping %s: %s -> %s\n", file.c_str(), r.c_str(), h.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-der: %s\n", e.what());
    return 1;
  }
}
