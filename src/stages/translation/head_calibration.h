// Finding a translation model's alignment heads from parallel sentence pairs
// (`earshot calibrate-translation`): each (source, reference translation) pair
// is teacher-forced through the same prompt the engine drafts with, every
// (layer, head)'s attention over the source span is captured, and a head scores
// by how often the source token it attends to most (raw argmax, as the commit
// modes read it) lies where the pair's alignment says that target token's
// source is. Ranked best first, the top heads become a calibration entry
// (calibration.h) that --translation-calibration reads.
//
// The alignment: a pair may carry a word alignment (Pharaoh "i-j" links over
// whitespace-separated words, as fast_align and awesome-align write them); a
// pair without one uses the monotonic diagonal, target token k of n_t aligned
// to source token floor((k + 0.5) * n_s / n_t), hit within `tolerance` tokens.
// The diagonal suits close language pairs; pass alignments for reordering ones.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "model/llm/llm_backend.h"
#include "stages/translation/calibration.h"

namespace earshot::stages::translation {

struct CalibrationPair {
  std::string source;
  std::string target;  // the reference translation
  // (source word, target word) links; empty: the diagonal.
  std::vector<std::pair<int, int>> alignment;
};

// JSON lines: {"source": ..., "target" (or "reference", "translation"): ...,
// "alignment" (optional): "0-0 1-2 ..." or [[0, 0], [1, 2], ...]}; empty lines
// and lines starting with '#' are skipped. Throws Error(kInvalidArgument) naming
// the file and line, kIo when it cannot be read.
std::vector<CalibrationPair> read_calibration_pairs(const std::filesystem::path& path);
// "0-0 1-2" -> {{0, 0}, {1, 2}}; throws Error(kInvalidArgument) on anything else.
std::vector<std::pair<int, int>> parse_pharaoh(const std::string& text);

struct HeadCalibrationOptions {
  std::string source_language;
  std::string target_language;
  int tolerance = 1;  // diagonal: |argmax - aligned| <= tolerance tokens is a hit
  int context_tokens = 4096;
  int threads = 0;
};

struct HeadScore {
  llm::AttentionHead head;
  double score = 0;          // hits / scored target tokens
  double mean_distance = 0;  // |argmax - nearest aligned source token| / source tokens, averaged
};

struct HeadCalibration {
  std::vector<HeadScore> ranked;  // every head of the model, best first
  int pairs_used = 0;
  long target_tokens = 0;             // scored target tokens, all pairs
  std::vector<std::string> problems;  // one line per skipped pair
};

// Ranks every (layer, head) of `model`: score descending, then mean distance
// ascending, then (layer, head). Pairs that do not fit the context or whose
// alignment cannot be mapped onto tokens are skipped and listed in `problems`.
// Throws Error(kInvalidArgument) when no pair is usable.
HeadCalibration calibrate_heads(const llm::LlmModel& model, const std::vector<CalibrationPair>& pairs,
                                const HeadCalibrationOptions& options);

// The registry entry of the `top` best heads (model id normalised as the registry keys it).
CalibrationEntry calibration_entry(const HeadCalibration& calibration, const std::string& model_id,
                                   const std::string& source, const std::string& target, int top);

}  // namespace earshot::stages::translation
