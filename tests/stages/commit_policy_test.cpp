#include "stages/translation/commit_policy.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace earshot::stages::translation {
namespace {

TokenAttention row_of(std::vector<float> values, int n_heads = 2) {
  TokenAttention a;
  a.n_heads = n_heads;
  a.n_source = static_cast<int>(values.size());
  for (int h = 0; h < n_heads; ++h) a.values.insert(a.values.end(), values.begin(), values.end());
  return a;
}

// Attention peaked on one source token.
TokenAttention on(int column, int n_source = 10) {
  std::vector<float> v(static_cast<size_t>(n_source), 0.02f);
  v[static_cast<size_t>(column)] = 0.8f;
  return row_of(v);
}

// An attention sink on column 0 shared by every token, and a 5-column bump
// around `center` (zero elsewhere above a common floor): the raw argmax is
// always the sink; z-normalised over the tokens, the bump stands out.
TokenAttention sink_and_bump(int center, int n_source = 24) {
  std::vector<float> v(static_cast<size_t>(n_source), 0.005f);
  v[0] = 0.5f;
  const float bump[5] = {0.02f, 0.05f, 0.1f, 0.05f, 0.02f};
  for (int k = -2; k <= 2; ++k) v[static_cast<size_t>(center + k)] += bump[k + 2];
  return row_of(v);
}

TEST(CommitPolicy, ArgmaxAcceptsUntilTheFirstTokenBeyondTheFrontier) {
  CommitOptions o;
  o.mode = CommitMode::kArgmax;
  const std::vector<TokenAttention> draft = {on(0), on(1), on(4), on(0)};
  EXPECT_EQ(accepted_prefix(draft, 0, 2, o), 2);  // the 4th token (on 0) is not reached
  EXPECT_EQ(accepted_prefix(draft, 0, 5, o), 4);
  EXPECT_EQ(accepted_prefix(draft, 0, 1, o), 1);
  EXPECT_EQ(accepted_prefix(draft, 3, 5, o), 4);  // starts after what is already committed
  EXPECT_EQ(accepted_prefix(draft, 0, 0, o), 0);  // nothing accessible, nothing committed
}

TEST(CommitPolicy, MassNeedsHalfTheSourceAttentionOnAccessibleTokens) {
  CommitOptions o;
  o.mode = CommitMode::kMass;
  // Accessible = first 2 of 4 columns.
  const std::vector<TokenAttention> draft = {row_of({0.3f, 0.3f, 0.2f, 0.2f}), row_of({0.2f, 0.2f, 0.3f, 0.3f}),
                                             row_of({0.5f, 0.4f, 0.05f, 0.05f})};
  EXPECT_EQ(accepted_prefix(draft, 0, 2, o), 1);  // 0.6, then 0.4 stops
  o.mass_threshold = 0.39;                        // 0.4 exactly is a rounding away from either side
  EXPECT_EQ(accepted_prefix(draft, 0, 2, o), 3);
}

TEST(CommitPolicy, PaperModeSeesThroughAnAttentionSinkThatFoolsArgmax) {
  const std::vector<TokenAttention> draft = {sink_and_bump(3), sink_and_bump(8), sink_and_bump(13), sink_and_bump(20)};
  CommitOptions argmax;
  argmax.mode = CommitMode::kArgmax;
  EXPECT_EQ(accepted_prefix(draft, 0, 12, argmax), 4);  // every raw argmax is the sink
  CommitOptions paper;                                  // the default
  EXPECT_EQ(paper.mode, CommitMode::kPaper);
  // Filtered z-scores put token 1 at column 6, token 2 at 11, token 3 at 18
  // (each plateau's first column): 18 >= 12 + 1 stops.
  EXPECT_EQ(accepted_prefix(draft, 0, 12, paper), 3);
  const std::vector<int> at = attended_positions(draft, paper);
  ASSERT_EQ(at.size(), 4u);
  EXPECT_EQ(at[0], 0);  // the first token has nothing to normalise against: its raw row
  EXPECT_EQ(at[1], 6);
  EXPECT_EQ(at[2], 11);
  EXPECT_EQ(at[3], 18);
  // The margin b of argmax < frontier + b: token 2 (column 11) needs frontier >= 11.
  EXPECT_EQ(accepted_prefix(draft, 0, 10, paper), 2);
  EXPECT_EQ(accepted_prefix(draft, 0, 11, paper), 3);
  paper.paper_margin = 0;
  EXPECT_EQ(accepted_prefix(draft, 0, 11, paper), 2);
}

TEST(CommitPolicy, PaperModeIsPrefixOnline) {
  // A token's decision never depends on the tokens after it.
  const std::vector<TokenAttention> longer = {sink_and_bump(3), sink_and_bump(8), sink_and_bump(20)};
  const std::vector<TokenAttention> shorter = {sink_and_bump(3), sink_and_bump(8)};
  CommitOptions paper;
  EXPECT_EQ(attended_positions(longer, paper)[1], attended_positions(shorter, paper)[1]);
  EXPECT_EQ(accepted_prefix(shorter, 0, 12, paper), 2);
  EXPECT_EQ(accepted_prefix(longer, 0, 12, paper), 2);
}

TEST(CommitPolicy, ModesByName) {
  EXPECT_EQ(parse_commit_mode("paper"), CommitMode::kPaper);
  EXPECT_EQ(parse_commit_mode("argmax"), CommitMode::kArgmax);
  EXPECT_EQ(parse_commit_mode("mass"), CommitMode::kMass);
  EXPECT_EQ(to_string(CommitMode::kMass), "mass");
  EXPECT_THROW(parse_commit_mode("greedy"), Error);
}

}  // namespace
}  // namespace earshot::stages::translation
