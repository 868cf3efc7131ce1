// `earshot bench --diarization-model`: after each system's ASR run, every
// stream through a fresh synchronous diarization stage (bench/diarization.h),
// its speaker turns scored against the clip's AUDIO.rttm truth (DER) and its
// words with their speakers against the clip's AUDIO.stm (cpWER), the stage's
// wall and CPU time measured apart from the ASR's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/diarization.h"
#include "bench/runner.h"
#include "common/command_line.h"
#include "stages/registry.h"

namespace earshot::cli {

struct DiarizationBench {
  const stages::LoadedStage* stage = nullptr;  // the chain's diarization (owned by the chain)
  std::string language;
  std::string detail;                                                  // the model and its settings, for the report
  std::vector<std::optional<bench::SpeakerTruth>> truths;              // per utterance
  std::vector<std::optional<bench::WordTruth>> word_truths;            // per utterance
  bench::NormalizerKind normalizer = bench::NormalizerKind::kEnglish;  // --normalizer, for cpWER
};

// The chain's diarization stage with the dataset's truths, or none when the
// command line leaves it off. Throws Error naming a truth file that is unusable.
std::optional<DiarizationBench> diarization_bench(const stages::StageChain& chain, const Args& args,
                                                  const std::vector<bench::Utterance>& utterances,
                                                  const std::string& language, int threads);

// Diarizes every stream of `run` that did not fail (`audio[file]` its audio).
bench::DiarizationSummary run_diarization(const bench::SystemRun& run, const std::vector<std::vector<float>>& audio,
                                          const std::vector<bench::Utterance>& utterances,
                                          const DiarizationBench& diarization, const std::string& name);

}  // namespace earshot::cli
