// Which target tokens of a draft may be committed: each drafted token carries
// the attention rows of the calibrated heads over the source span (the step
// that produced it), and a token is committed while it depends only on the
// accessible source, the tokens before the frontier (AlignAtt4LLM, WhisperLiveKit #426).
// Pure functions, so every mode is tested on scripted matrices.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace earshot::stages::translation {

enum class CommitMode {
  kPaper,   // head-averaged z-scores (per-head prefix-online Welford), median 7, argmax < frontier + 1
  kArgmax,  // the head-averaged row's most-attended source token lies before the frontier
  kMass,    // the head-averaged attention mass on the accessible source >= mass_threshold
};

// "paper" | "argmax" | "mass"; throws Error(kInvalidArgument) otherwise.
CommitMode parse_commit_mode(std::string_view name);
std::string_view to_string(CommitMode mode);

struct CommitOptions {
  CommitMode mode = CommitMode::kPaper;
  double mass_threshold = 0.5;
  int paper_margin = 1;  // b of "argmax < frontier + b"
  int median_width = 7;  // along the source axis (odd)
};

// The attention of one drafted token: [head][source column], source columns
// 0..n_source-1 (the source span of the prompt).
struct TokenAttention {
  int n_heads = 0;
  int n_source = 0;
  std::vector<float> values;  // [head * n_source + column]
  float at(int head, int column) const { return values[static_cast<size_t>(head) * n_source + column]; }
};

// The number of leading tokens of `draft` (from index `from` on; the tokens
// before it are already committed) that the mode accepts with `frontier`
// accessible source tokens: the scan stops at the first token it rejects.
// Returns a count of tokens from index 0 (>= from). Paper mode's normalisation
// runs over every token of the draft from index 0 (the prefix up to each token),
// so a token's decision never depends on the tokens after it.
int accepted_prefix(const std::vector<TokenAttention>& draft, int from, int frontier, const CommitOptions& options);

// The per-token source position each mode attends to (diagnostics, replay
// reports): paper mode's filtered argmax, else the raw head-averaged argmax.
std::vector<int> attended_positions(const std::vector<TokenAttention>& draft, const CommitOptions& options);

}  // namespace earshot::stages::translation
