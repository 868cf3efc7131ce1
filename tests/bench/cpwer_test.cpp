// cpWER (bench/cpwer.h): hand-checked assignments, the exhaustive search over
// every assignment on random cases, STM parsing, and the words of a diarized
// stream against an STM.
#include "bench/cpwer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "common/error.h"

namespace earshot::bench {
namespace {

std::vector<std::string> words(const std::string& text) { return split_words(text); }

void expect_counts(const CpwerScore& s, long reference, long substitutions, long deletions, long insertions) {
  EXPECT_EQ(s.words.reference, reference);
  EXPECT_EQ(s.words.substitutions, substitutions);
  EXPECT_EQ(s.words.deletions, deletions);
  EXPECT_EQ(s.words.insertions, insertions);
}

using Mapping = std::vector<std::pair<std::string, std::string>>;

TEST(Cpwer, PerfectAttributionIsThePlainWer) {
  const std::vector<SpeakerWords> ref = {{"A", words("the cat sat")}, {"B", words("on the mat")}};
  const std::vector<SpeakerWords> hyp = {{"S1", words("the cat sad")}, {"S2", words("on mat")}};
  const CpwerScore s = score_cpwer(ref, hyp);
  // A-S1: sat -> sad; B-S2: "the" deleted.
  expect_counts(s, 6, 1, 1, 0);
  EXPECT_DOUBLE_EQ(s.rate(), 2.0 / 6.0);
  const ErrorCounts plain = align_tokens(words("the cat sat on the mat"), words("the cat sad on mat"));
  EXPECT_EQ(s.words.errors(), plain.errors());
  EXPECT_DOUBLE_EQ(s.rate(), plain.rate());
  EXPECT_EQ(s.mapping, (Mapping{{"A", "S1"}, {"B", "S2"}}));
  EXPECT_EQ(s.reference_speakers, 2);
  EXPECT_EQ(s.hypothesis_speakers, 2);
}

TEST(Cpwer, SwappedSpeakerLabelsScoreTheSame) {
  const std::vector<SpeakerWords> ref = {{"A", words("the cat sat")}, {"B", words("on the mat")}};
  const CpwerScore s = score_cpwer(ref, {{"S2", words("the cat sad")}, {"S1", words("on mat")}});
  expect_counts(s, 6, 1, 1, 0);
  EXPECT_EQ(s.mapping, (Mapping{{"A", "S2"}, {"B", "S1"}}));
}

TEST(Cpwer, OneHypothesisSpeakerForTwoReferenceSpeakers) {
  // A says "hello there", B "hi", A "how are you"; every word given to S1.
  const std::vector<SpeakerWords> ref = {{"A", words("hello there")}, {"B", words("hi")}, {"A", words("how are you")}};
  const CpwerScore s = score_cpwer(ref, {{"S1", words("hello there hi how are you")}});
  // A ("hello there how are you") with S1: "hi" inserted; B unpaired: "hi" deleted.
  expect_counts(s, 6, 0, 1, 1);
  EXPECT_DOUBLE_EQ(s.rate(), 2.0 / 6.0);
  EXPECT_EQ(s.mapping, (Mapping{{"A", "S1"}, {"B", ""}}));

  // S1 with A: d, e inserted and B's two words deleted (4); with B: a, b, c
  // inserted and A's three deleted (6).
  const CpwerScore t = score_cpwer({{"A", words("a b c")}, {"B", words("d e")}}, {{"S1", words("a b c d e")}});
  expect_counts(t, 5, 0, 2, 2);
}

TEST(Cpwer, ExtraHypothesisSpeakersAreInsertions) {
  const CpwerScore s =
      score_cpwer({{"A", words("a b c d")}}, {{"S1", words("a b")}, {"S2", words("c")}, {"S3", words("x y")}});
  // A-S1: c, d deleted; S2's "c" and S3's two words inserted.
  expect_counts(s, 4, 0, 2, 3);
  EXPECT_DOUBLE_EQ(s.rate(), 5.0 / 4.0);
  EXPECT_EQ(s.mapping, (Mapping{{"A", "S1"}, {"", "S2"}, {"", "S3"}}));
  EXPECT_EQ(s.hypothesis_speakers, 3);
}

TEST(Cpwer, EmptyHypothesisDeletesEverything) {
  const CpwerScore s = score_cpwer({{"A", words("a b")}, {"B", words("c")}}, {});
  expect_counts(s, 3, 0, 3, 0);
  EXPECT_DOUBLE_EQ(s.rate(), 1.0);
  EXPECT_EQ(s.mapping, (Mapping{{"A", ""}, {"B", ""}}));
  // An empty reference: every word inserted.
  const CpwerScore e = score_cpwer({}, {{"S1", words("a b")}});
  expect_counts(e, 0, 0, 0, 2);
  EXPECT_EQ(e.mapping, (Mapping{{"", "S1"}}));
}

// The fewest errors over every assignment (speakers padded with empty ones to
// one count, every permutation), for the random cases below.
long exhaustive_errors(const std::vector<SpeakerWords>& ref, const std::vector<SpeakerWords>& hyp) {
  const size_t n = std::max(ref.size(), hyp.size());
  std::vector<std::vector<std::string>> r(n), h(n);
  for (size_t i = 0; i < ref.size(); ++i) r[i] = ref[i].words;
  for (size_t i = 0; i < hyp.size(); ++i) h[i] = hyp[i].words;
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  long best = -1;
  do {
    long errors = 0;
    for (size_t i = 0; i < n; ++i) errors += align_tokens(r[i], h[perm[i]]).errors();
    if (best < 0 || errors < best) best = errors;
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

TEST(Cpwer, TheAssignmentIsTheExhaustiveSearchsBest) {
  std::mt19937 rng(11);
  const auto random_words = [&rng](size_t count) {
    std::vector<std::string> out;
    for (size_t i = 0; i < count; ++i) out.push_back(std::string(1, static_cast<char>('a' + rng() % 6)));
    return out;
  };
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<SpeakerWords> ref, hyp;
    const size_t nr = rng() % 5, nh = rng() % 6;  // up to 5 x 5 after padding: 120 permutations
    for (size_t i = 0; i < nr; ++i) ref.push_back({"R" + std::to_string(i), random_words(rng() % 7)});
    for (size_t i = 0; i < nh; ++i) hyp.push_back({"H" + std::to_string(i), random_words(rng() % 7)});
    const CpwerScore s = score_cpwer(ref, hyp);
    ASSERT_EQ(s.words.errors(), exhaustive_errors(ref, hyp)) << "trial " << trial;
    long reference = 0;
    for (const SpeakerWords& r : ref) reference += static_cast<long>(r.words.size());
    ASSERT_EQ(s.words.reference, reference);
  }
}

TEST(Cpwer, StmIsParsed) {
  const std::vector<StmSegment> s = parse_stm(
      ";; CATEGORY \"0\" \"\" \"\"\n"
      "\n"
      "talk 1 alice 0.0 2.5 <o,f0,female> Hello there\n"
      "talk 1 bob 2.5 3 hi\n"
      "talk 1 inter_segment_gap 3 3.2\n"
      "talk 1 excluded 3.2 4 ignore_time_segment_in_scoring\n"
      "talk 1 IGNORE_TIME_SEGMENT_IN_SCORING 4 5 some words\n",
      "talk.stm");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].file, "talk");
  EXPECT_EQ(s[0].channel, "1");
  EXPECT_EQ(s[0].speaker, "alice");
  EXPECT_DOUBLE_EQ(s[0].begin, 0.0);
  EXPECT_DOUBLE_EQ(s[0].end, 2.5);
  EXPECT_EQ(s[0].transcript, "Hello there");
  EXPECT_EQ(s[1].transcript, "hi");
  EXPECT_EQ(s[2].transcript, "");  // an empty segment stays (no words)
}

TEST(Cpwer, MalformedStmNamesTheFileAndLine) {
  const auto message = [](const std::string& text) -> std::string {
    try {
      parse_stm(text, "talk.stm");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return e.what();
    }
    ADD_FAILURE() << "no error for " << text;
    return "";
  };
  EXPECT_NE(message(";; fine\ntalk 1 alice 0\n").find("talk.stm:2: an STM segment has at least 5 fields"),
            std::string::npos);
  EXPECT_NE(message("talk 1 alice zero 1 hi\n").find("talk.stm:1: begin time 'zero' is not a number"),
            std::string::npos);
  EXPECT_NE(message("talk 1 alice 0 -1 hi\n").find("talk.stm:1: end time -1 is negative"), std::string::npos);
  EXPECT_NE(message("talk 1 alice 2 1 hi\n").find("talk.stm:1: the segment ends (1) before it begins"),
            std::string::npos);
}

Word word(const std::string& text, double start, int speaker) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = start + 0.5;
  w.speaker = speaker;
  return w;
}

TEST(Cpwer, DiarizedWordsAgainstAnStm) {
  // Segments out of order in the file; A's two segments joined in time order.
  const std::vector<StmSegment> ref = parse_stm(
      "talk 1 B 2 3 Fine, thanks.\n"
      "talk 1 A 0 2 Hello, how are you?\n"
      "talk 1 A 3 4 Good.\n",
      "talk.stm");
  const std::vector<Word> hyp = {word(" Hello", 0, 1),  word(" how", 0.5, 1),  word(" are", 1, 1),
                                 word(" you?", 1.5, 1), word(" Fine,", 2, 2),  word(" thank.", 2.5, 2),
                                 word(" Good.", 3, 1),  word(" okay", 3.5, -1)};
  const CpwerScore s = score_cpwer_words(ref, hyp, NormalizerKind::kEnglish);
  // A "hello how are you good" = S1's; B "fine thanks" with S2's "fine thank":
  // one substitution; "(none)" ("okay") unpaired: one insertion.
  expect_counts(s, 7, 1, 0, 1);
  EXPECT_EQ(s.mapping, (Mapping{{"A", "S1"}, {"B", "S2"}, {"", "(none)"}}));
  EXPECT_EQ(s.hypothesis_speakers, 3);
  // The same words without the normaliser: punctuation counts ("Hello," against "Hello").
  EXPECT_GT(score_cpwer_words(ref, hyp, NormalizerKind::kNone).words.errors(), 2);
}

}  // namespace
}  // namespace earshot::bench
