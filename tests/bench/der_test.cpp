// The DER scorer on examples worked out by hand (the arithmetic is in the
// comments), RTTM reading and writing with its errors, and the speaker
// assignment against exhaustive search. der_md_eval_test.cpp checks the same
// scorer against NIST's md-eval.pl on random cases.
#include "bench/der.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"

namespace earshot::bench {
namespace {

SpeakerSegment seg(const std::string& speaker, double start, double end, const std::string& file = "f") {
  return SpeakerSegment{file, "1", start, end - start, speaker};
}

constexpr double kTol = 1e-9;

DerOptions options(double collar, bool score_overlap = true) {
  DerOptions o;
  o.collar = collar;
  o.score_overlap = score_overlap;
  return o;
}

// Reference A [0,10], B [10,20]; hypothesis X [0,12], Y [12,20].
// Joint time: A-X 10, A-Y 0, B-X 2, B-Y 8, so A->X, B->Y (18 s) beats A->Y,
// B->X (2 s). Evaluated region: [0,20] (the reference's extent).
std::vector<SpeakerSegment> turn_ref() { return {seg("A", 0, 10), seg("B", 10, 20)}; }
std::vector<SpeakerSegment> turn_hyp() { return {seg("X", 0, 12), seg("Y", 12, 20)}; }

TEST(Der, LateTurnChangeIsSpeakerErrorWithoutCollar) {
  // [10,12]: reference B, hypothesis X (mapped to A): 2 s of speaker error.
  // Scored speaker time 20 s; DER 2 / 20 = 10 %.
  const DerScore s = score_der(turn_ref(), turn_hyp());
  EXPECT_NEAR(s.evaluated_time, 20, kTol);
  EXPECT_NEAR(s.scored_time, 20, kTol);
  EXPECT_NEAR(s.scored_speech, 20, kTol);
  EXPECT_NEAR(s.scored_speaker, 20, kTol);
  EXPECT_NEAR(s.missed_speaker, 0, kTol);
  EXPECT_NEAR(s.falarm_speaker, 0, kTol);
  EXPECT_NEAR(s.speaker_error, 2, kTol);
  EXPECT_NEAR(s.der_percent(), 10, kTol);
  EXPECT_NEAR(s.speaker_error_percent(), 10, kTol);
  const std::vector<std::pair<std::string, std::string>> mapping = {{"A", "X"}, {"B", "Y"}};
  EXPECT_EQ(s.mapping.at("f 1"), mapping);
}

TEST(Der, CollarCutsQuarterSecondEachSideOfEveryReferenceBoundary) {
  // Boundaries 0, 10 (end of A and start of B) and 20; collars [-0.25,0.25],
  // [9.75,10.25], [19.75,20.25]. Scored: [0.25,9.75] + [10.25,19.75] = 19 s.
  // Error: [10.25,12] = 1.75 s. DER 1.75 / 19 = 9.2105 %.
  const DerScore s = score_der(turn_ref(), turn_hyp(), options(0.25));
  EXPECT_NEAR(s.evaluated_time, 20, kTol);
  EXPECT_NEAR(s.scored_time, 19, kTol);
  EXPECT_NEAR(s.scored_speaker, 19, kTol);
  EXPECT_NEAR(s.speaker_error, 1.75, kTol);
  EXPECT_NEAR(s.der_percent(), 100 * 1.75 / 19, 1e-9);
}

// Reference A [0,4], B [2,6] (overlap [2,4]); hypothesis X [0,3], Y [3,8],
// Z [1,2]. Evaluated: [0,6] (Y's [6,8] lies outside the reference's extent).
// Joint time: A-X 3, A-Y 1, A-Z 1, B-X 1, B-Y 3: A->X, B->Y (6 s), Z unmapped.
std::vector<SpeakerSegment> overlap_ref() { return {seg("A", 0, 4), seg("B", 2, 6)}; }
std::vector<SpeakerSegment> overlap_hyp() { return {seg("X", 0, 3), seg("Y", 3, 8), seg("Z", 1, 2)}; }

TEST(Der, OverlapCountsEveryReferenceSpeaker) {
  // stretch  ref  hyp   speaker time  missed  falarm  error
  // [0,1]    A    X     1             0       0       0
  // [1,2]    A    X Z   1             0       1       0 (min(1,2) - 1 mapped)
  // [2,3]    A B  X     2             1       0       0 (A->X present)
  // [3,4]    A B  Y     2             1       0       0 (B->Y present)
  // [4,6]    B    Y     2             0       0       0
  // totals              8             2       1       0  -> DER 3 / 8 = 37.5 %
  const DerScore s = score_der(overlap_ref(), overlap_hyp());
  EXPECT_NEAR(s.evaluated_time, 6, kTol);
  EXPECT_NEAR(s.scored_time, 6, kTol);
  EXPECT_NEAR(s.scored_speech, 6, kTol);
  EXPECT_NEAR(s.missed_speech, 0, kTol);
  EXPECT_NEAR(s.falarm_speech, 0, kTol);
  EXPECT_NEAR(s.scored_speaker, 8, kTol);
  EXPECT_NEAR(s.missed_speaker, 2, kTol);
  EXPECT_NEAR(s.falarm_speaker, 1, kTol);
  EXPECT_NEAR(s.speaker_error, 0, kTol);
  EXPECT_NEAR(s.missed_percent(), 25, kTol);
  EXPECT_NEAR(s.falarm_percent(), 12.5, kTol);
  EXPECT_NEAR(s.der_percent(), 37.5, kTol);
}

TEST(Der, OverlapWithCollar) {
  // Boundaries 0, 2, 4, 6 -> collars [-.25,.25], [1.75,2.25], [3.75,4.25],
  // [5.75,6.25]. Scored: [.25,1.75] [2.25,3.75] [4.25,5.75] = 4.5 s.
  // [.25,1]: A/X .75 | [1,1.75]: A/X Z .75, falarm .75 | [2.25,3]: AB/X 1.5,
  // missed .75 | [3,3.75]: AB/Y 1.5, missed .75 | [4.25,5.75]: B/Y 1.5.
  // Speaker time 6, missed 1.5, falarm .75 -> DER 2.25 / 6 = 37.5 %.
  const DerScore s = score_der(overlap_ref(), overlap_hyp(), options(0.25));
  EXPECT_NEAR(s.scored_time, 4.5, kTol);
  EXPECT_NEAR(s.scored_speaker, 6, kTol);
  EXPECT_NEAR(s.missed_speaker, 1.5, kTol);
  EXPECT_NEAR(s.falarm_speaker, 0.75, kTol);
  EXPECT_NEAR(s.speaker_error, 0, kTol);
  EXPECT_NEAR(s.der_percent(), 37.5, kTol);
}

TEST(Der, SingleSpeakerRegionsOnlyLeaveOutReferenceOverlap) {
  // score_overlap = false (md-eval -1) drops [2,4]; left: [0,1] A/X 1,
  // [1,2] A/X Z 1 (falarm 1), [4,6] B/Y 2: speaker time 4, DER 1 / 4 = 25 %.
  const DerScore s = score_der(overlap_ref(), overlap_hyp(), options(0, false));
  EXPECT_NEAR(s.evaluated_time, 6, kTol);
  EXPECT_NEAR(s.scored_time, 4, kTol);
  EXPECT_NEAR(s.scored_speaker, 4, kTol);
  EXPECT_NEAR(s.missed_speaker, 0, kTol);
  EXPECT_NEAR(s.falarm_speaker, 1, kTol);
  EXPECT_NEAR(s.der_percent(), 25, kTol);
}

TEST(Der, MissFalseAlarmAndConfusionInOneFile) {
  // Reference A [0,2], A [5,7]; hypothesis X [0,1], X [3,4], Y [5,7].
  // Joint: A-X 1, A-Y 2 -> A->Y; X unmapped. Evaluated [0,7].
  // [0,1] A/X: error 1 | [1,2] A/-: missed 1 (missed speech 1) | [2,3] -/- |
  // [3,4] -/X: falarm 1 (falarm speech 1) | [4,5] -/- | [5,7] A/Y: right.
  // Speaker time 4, errors 1 + 1 + 1 -> DER 75 %.
  const DerScore s = score_der({seg("A", 0, 2), seg("A", 5, 7)}, {seg("X", 0, 1), seg("X", 3, 4), seg("Y", 5, 7)});
  EXPECT_NEAR(s.scored_time, 7, kTol);
  EXPECT_NEAR(s.scored_speech, 4, kTol);
  EXPECT_NEAR(s.missed_speech, 1, kTol);
  EXPECT_NEAR(s.falarm_speech, 1, kTol);
  EXPECT_NEAR(s.scored_speaker, 4, kTol);
  EXPECT_NEAR(s.missed_speaker, 1, kTol);
  EXPECT_NEAR(s.falarm_speaker, 1, kTol);
  EXPECT_NEAR(s.speaker_error, 1, kTol);
  EXPECT_NEAR(s.der_percent(), 75, kTol);
  const std::vector<std::pair<std::string, std::string>> mapping = {{"A", "Y"}};
  EXPECT_EQ(s.mapping.at("f 1"), mapping);
}

TEST(Der, FilesAreScoredSeparatelyAndSummed) {
  // File "a": the turn example (error 2 of 20). File "b": reference C [1,3],
  // no hypothesis: missed 2. Hypothesis file "c" has no reference: unscored.
  // In "b" the hypothesis speaker X of file "a" is another speaker entirely.
  std::vector<SpeakerSegment> ref = turn_ref(), hyp = turn_hyp();
  for (auto& s : ref) s.file = "a";
  for (auto& s : hyp) s.file = "a";
  ref.push_back(seg("C", 1, 3, "b"));
  hyp.push_back(seg("X", 0, 5, "c"));
  const DerScore s = score_der(ref, hyp);
  EXPECT_NEAR(s.scored_speaker, 22, kTol);
  EXPECT_NEAR(s.speaker_error, 2, kTol);
  EXPECT_NEAR(s.missed_speaker, 2, kTol);
  EXPECT_NEAR(s.der_percent(), 100.0 * 4 / 22, 1e-9);
  EXPECT_EQ(s.unscored_hypothesis_files, std::vector<std::string>{"c"});
  EXPECT_TRUE(s.mapping.at("b 1").empty());
}

TEST(Der, UemLimitsTheEvaluatedRegion) {
  // The turn example evaluated over [5,15] only: error [10,12] = 2 of 10 s.
  DerOptions o;
  o.uem["f"] = {{5, 15}};
  const DerScore s = score_der(turn_ref(), turn_hyp(), o);
  EXPECT_NEAR(s.evaluated_time, 10, kTol);
  EXPECT_NEAR(s.scored_speaker, 10, kTol);
  EXPECT_NEAR(s.speaker_error, 2, kTol);
}

TEST(Der, OneSpeakersOverlappingHypothesisSegmentsCountOnce) {
  // X [0,6] and X [4,10] are X over [0,10]: no false alarm against A [0,10].
  const DerScore s = score_der({seg("A", 0, 10)}, {seg("X", 0, 6), seg("X", 4, 10)});
  EXPECT_NEAR(s.scored_speaker, 10, kTol);
  EXPECT_NEAR(s.der_percent(), 0, kTol);
}

TEST(Der, AbuttingReferenceSegmentsKeepTheirCollars) {
  // A [0,5] and A [5,10] are not merged (as md-eval): the boundary at 5 gets a
  // collar too. Scored: [.25,4.75] + [5.25,9.75] = 9 s, all right.
  const DerScore s = score_der({seg("A", 0, 5), seg("A", 5, 10)}, {seg("X", 0, 10)}, options(0.25));
  EXPECT_NEAR(s.scored_time, 9, kTol);
  EXPECT_NEAR(s.der_percent(), 0, kTol);
}

TEST(Der, NoReferenceSpeechHasNoPercentages) {
  const DerScore s = score_der({}, {seg("X", 0, 1)});
  EXPECT_EQ(s.scored_speaker, 0);
  EXPECT_TRUE(std::isnan(s.der_percent()));
  EXPECT_EQ(s.unscored_hypothesis_files, std::vector<std::string>{"f"});
}

TEST(Der, RejectsBadOptionsAndSegments) {
  EXPECT_THROW(score_der(turn_ref(), turn_hyp(), options(-0.1)), Error);
  EXPECT_THROW(score_der({seg("A", 0, -1)}, {}), Error);
  DerOptions o;
  o.uem["f"] = {{3, 2}};
  EXPECT_THROW(score_der(turn_ref(), turn_hyp(), o), Error);
}

// --- RTTM ---------------------------------------------------------------

TEST(Rttm, ParsesSpeakerRecordsSkippingCommentsAndSpeakerInfo) {
  const std::string text =
      "# a comment\n"
      "\n"
      ";; another\n"
      "SPKR-INFO meeting 1 <NA> <NA> <NA> unknown spk1 <NA> <NA>\n"
      "SPEAKER meeting 1 0.50 2.25 <NA> <NA> spk1 <NA> <NA>\n"
      "speaker meeting 1 3 1 <NA> <NA> spk2 <NA>\n";  // 9 fields, lower-case type: md-eval takes both
  const auto segs = parse_rttm(text, "x.rttm");
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0], (SpeakerSegment{"meeting", "1", 0.5, 2.25, "spk1"}));
  EXPECT_EQ(segs[1], (SpeakerSegment{"meeting", "1", 3, 1, "spk2"}));
}

TEST(Rttm, WritesAndReadsBack) {
  const std::vector<SpeakerSegment> segs = {{"f", "1", 0.125, 3.5, "A"}, {"g", "2", 10, 0.000001, "B"}};
  EXPECT_EQ(protocol::format_rttm(segs),
            "SPEAKER f 1 0.125000 3.500000 <NA> <NA> A <NA> <NA>\n"
            "SPEAKER g 2 10.000000 0.000001 <NA> <NA> B <NA> <NA>\n");
  const auto path = std::filesystem::temp_directory_path() / ("earshot-der-" + std::to_string(::getpid()) + ".rttm");
  write_rttm(path, segs);
  EXPECT_EQ(read_rttm(path), segs);
  std::filesystem::remove(path);
  EXPECT_THROW(protocol::format_rttm({{"f", "1", 0, 1, "two words"}}), Error);
}

std::string error_of(const std::string& text) {
  try {
    parse_rttm(text, "in.rttm");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "(no error)";
}

TEST(Rttm, BadInputNamesFileAndLine) {
  EXPECT_EQ(error_of("\nSPEAKER f 1 0 1 <NA> <NA> A\n").rfind("in.rttm:2: a SPEAKER record has 9 or 10 fields", 0), 0u)
      << error_of("\nSPEAKER f 1 0 1 <NA> <NA> A\n");
  EXPECT_NE(error_of("SPEAKER f 1 zero 1 <NA> <NA> A <NA> <NA>").find("in.rttm:1: start 'zero' is not a number"),
            std::string::npos);
  EXPECT_NE(error_of("SPEAKER f 1 0 -1 <NA> <NA> A <NA> <NA>").find("in.rttm:1: duration -1 is negative"),
            std::string::npos);
  EXPECT_NE(error_of("LEXEME f 1 0 1 hello lex A <NA> <NA>").find("in.rttm:1: record type 'LEXEME' is not supported"),
            std::string::npos);
  const std::string overlap = error_of(
      "SPEAKER f 1 0 5 <NA> <NA> A <NA> <NA>\n"
      "SPEAKER f 1 5 1 <NA> <NA> B <NA> <NA>\n"
      "SPEAKER f 1 4 2 <NA> <NA> A <NA> <NA>\n");
  EXPECT_NE(overlap.find("in.rttm:3: speaker A's segment [4.000000, 6.000000] overlaps their segment on line 1"),
            std::string::npos)
      << overlap;
  // Touching segments of one speaker are fine.
  EXPECT_EQ(parse_rttm("SPEAKER f 1 0 5 <NA> <NA> A <NA> <NA>\nSPEAKER f 1 5 1 <NA> <NA> A <NA> <NA>\n", "x").size(),
            2u);
}

TEST(Uem, ParsesRangesPerFileAndNamesBadLines) {
  const auto uem = parse_uem("# eval\nf 1 5 15\nf 1 0.5 2\ng 1 0 3\n", "x.uem");
  ASSERT_EQ(uem.size(), 2u);
  ASSERT_EQ(uem.at("f").size(), 2u);
  EXPECT_EQ(uem.at("f")[0].start, 0.5);  // sorted
  EXPECT_EQ(uem.at("f")[1].end, 15);
  auto error = [](const std::string& text) {
    try {
      parse_uem(text, "x.uem");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error("f 1 5\n").find("x.uem:1: a UEM record has 4 fields"), std::string::npos);
  EXPECT_NE(error("f 1 5 4\n").find("x.uem:1: the range ends (4) before it starts"), std::string::npos);
  EXPECT_NE(error("f 1 0 4\nf 1 3 6\n").find("x.uem:2: file f's range overlaps the one on line 1"), std::string::npos);
}

TEST(Rttm, MissingFileIsAnIoError) {
  try {
    read_rttm("/nonexistent/earshot.rttm");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/earshot.rttm"), std::string::npos);
  }
}

// --- the assignment ---------------------------------------------------------

TEST(MaxWeightAssignment, BeatsGreedy) {
  // Greedy takes 3 then 0 (total 3); the best is 2 + 2 = 4.
  EXPECT_EQ(max_weight_assignment({{3, 2}, {2, 0}}), (std::vector<int>{1, 0}));
  EXPECT_EQ(max_weight_assignment({{1, 5, 0}, {0, 4, 3}}), (std::vector<int>{1, 2}));
  EXPECT_EQ(max_weight_assignment({{1, 0}, {5, 4}, {0, 3}}), (std::vector<int>{-1, 0, 1}));
  EXPECT_TRUE(max_weight_assignment({}).empty());
}

TEST(MaxWeightAssignment, EqualsExhaustiveSearchOnRandomMatrices) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> w(0, 10);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t rows = 1 + rng() % 6, cols = 1 + rng() % 6;
    std::vector<std::vector<double>> weight(rows, std::vector<double>(cols));
    for (auto& row : weight)
      for (auto& x : row) x = (rng() % 4 == 0) ? 0.0 : w(rng);
    // Exhaustive: every injection of the smaller side into the larger.
    const size_t n = std::max(rows, cols);
    std::vector<int> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    double best = -1;
    do {
      double total = 0;
      for (size_t r = 0; r < rows; ++r)
        if (static_cast<size_t>(perm[r]) < cols) total += weight[r][static_cast<size_t>(perm[r])];
      best = std::max(best, total);
    } while (std::next_permutation(perm.begin(), perm.end()));
    const std::vector<int> got = max_weight_assignment(weight);
    double total = 0;
    std::vector<int> used;
    for (size_t r = 0; r < rows; ++r) {
      if (got[r] < 0) continue;
      used.push_back(got[r]);
      total += weight[r][static_cast<size_t>(got[r])];
    }
    std::sort(used.begin(), used.end());
    EXPECT_TRUE(std::adjacent_find(used.begin(), used.end()) == used.end()) << "a column used twice";
    EXPECT_NEAR(total, best, 1e-9) << "trial " << trial;
  }
}

}  // namespace
}  // namespace earshot::bench
