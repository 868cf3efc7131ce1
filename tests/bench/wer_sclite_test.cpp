// Our WER/CER alignment counts must equal those of Debian's sctk `sclite` on
// the same token sequences (case-sensitive, UTF-8), including insertions at
// both ends, empty sides, unicode words and character (CER) mode.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../support/command.h"
#include "bench/normalizer.h"
#include "bench/wer.h"

namespace earshot::bench {
namespace {
namespace fs = std::filesystem;

struct Pair {
  std::string reference, hypothesis;
};

std::string find_sclite() {
  if (const char* env = std::getenv("EARSHOT_SCLITE")) return env;
  for (const char* p : {"/usr/bin/sclite", "/usr/lib/sctk/bin/sclite"})
    if (fs::exists(p)) return p;
  return "";
}

std::string join(const std::vector<std::string>& tokens) {
  std::string out;
  for (const auto& t : tokens) out += (out.empty() ? "" : " ") + t;
  return out;
}

// Runs sclite over all pairs and returns its per-utterance counts.
std::vector<ErrorCounts> sclite_counts(const std::vector<Pair>& pairs, bool characters) {
  const std::string sclite = find_sclite();
  if (sclite.empty())
    ADD_FAILURE() << "sclite not found (looked at $EARSHOT_SCLITE, /usr/bin/sclite, /usr/lib/sctk/bin/sclite): "
                     "install Debian's sctk package (scripts/bootstrap.sh does)";
  if (sclite.empty()) return {};
  const fs::path dir =
      fs::temp_directory_path() / ("earshot-sclite-" + std::to_string(::getpid()) + (characters ? "-c" : "-w"));
  fs::create_directories(dir);
  {
    std::ofstream ref(dir / "ref.trn"), hyp(dir / "hyp.trn");
    for (size_t i = 0; i < pairs.size(); ++i) {
      ref << pairs[i].reference << " (spk_u" << i << ")\n";
      hyp << pairs[i].hypothesis << " (spk_u" << i << ")\n";
    }
  }
  const std::string command = sclite + " -r " + (dir / "ref.trn").string() + " trn -h " + (dir / "hyp.trn").string() +
                              " trn -i spu_id -e utf-8 -s " + (characters ? "-c " : "") + "-o pra stdout";
  const earshot::testing::CommandResult run = earshot::testing::run_command(command);
  fs::remove_all(dir);
  EXPECT_EQ(run.status, 0) << run.output;
  const std::string& output = run.output;
  std::map<int, ErrorCounts> by_id;
  std::istringstream lines(output);
  std::string line;
  int current = -1;
  while (std::getline(lines, line)) {
    if (line.rfind("id: (spk_u", 0) == 0) current = std::stoi(line.substr(10));
    if (line.rfind("Scores: (#C #S #D #I)", 0) == 0 && current >= 0) {
      std::istringstream nums(line.substr(21));
      ErrorCounts c;
      nums >> c.correct >> c.substitutions >> c.deletions >> c.insertions;
      by_id[current] = c;
    }
  }
  std::vector<ErrorCounts> out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_TRUE(by_id.count(static_cast<int>(i))) << "sclite printed no score for utterance " << i << "\n" << output;
    out.push_back(by_id[static_cast<int>(i)]);
  }
  return out;
}

void expect_same(const std::vector<Pair>& pairs, bool characters) {
  const std::vector<ErrorCounts> theirs = sclite_counts(pairs, characters);
  ASSERT_EQ(theirs.size(), pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto split = characters ? split_characters : split_words;
    const ErrorCounts ours = align_tokens(split(pairs[i].reference), split(pairs[i].hypothesis));
    SCOPED_TRACE("ref='" + pairs[i].reference + "' hyp='" + pairs[i].hypothesis + "'");
    EXPECT_EQ(ours.correct, theirs[i].correct);
    EXPECT_EQ(ours.substitutions, theirs[i].substitutions);
    EXPECT_EQ(ours.deletions, theirs[i].deletions);
    EXPECT_EQ(ours.insertions, theirs[i].insertions);
    EXPECT_EQ(ours.reference, theirs[i].correct + theirs[i].substitutions + theirs[i].deletions);
  }
}

const std::vector<Pair> kFixtures = {
    {"the cat sat on the mat", "the cat sat on the mat"},
    {"the cat sat on the mat", "uh the cat sat on mat today"},  // insertions at both ends, a deletion
    {"hello world", "hello"},
    {"hello world", "well hello world again and again"},
    {"a b c", ""},
    {"", "q r"},
    {"mister john dashwood had then leisure", "mr john dashwood had the leisure"},
    {"naïve café über", "naive café uber x"},
    {"今天 天气 很好", "今天 天汽 很好 吗"},
    {"привет мир как дела", "привет как мир дела"},
    {"one two three four five", "five four three two one"},
    {"x x x x", "x x"},
    {"a b a b a b", "b a b a"},
    {"the quick brown fox jumps", "quick the brown fox jump over"},
};

TEST(WerVsSclite, WordCountsMatchOnFixtures) { expect_same(kFixtures, false); }

TEST(WerVsSclite, CharacterCountsMatchOnFixtures) {
  std::vector<Pair> chars = kFixtures;
  chars.push_back({"今天天气很好", "今天天很好吗"});
  chars.push_back({"東京に行きました", "京都に行きます"});
  expect_same(chars, true);
}

// Random sequences over a tiny vocabulary produce many equal-cost alignments:
// the counts must still agree (same costs and tie preference as sclite).
TEST(WerVsSclite, WordCountsMatchOnRandomTieHeavyPairs) {
  std::mt19937 rng(7);
  const std::vector<std::string> vocab = {"a", "b", "c", "é"};
  std::vector<Pair> pairs;
  for (int i = 0; i < 300; ++i) {
    std::vector<std::string> r(rng() % 8), h(rng() % 8);
    for (auto& w : r) w = vocab[rng() % vocab.size()];
    for (auto& w : h) w = vocab[rng() % vocab.size()];
    pairs.push_back({join(r), join(h)});
  }
  expect_same(pairs, false);
}

TEST(Wer, RatesAndTotals) {
  const TextScore s = score_text("The cat sat on the mat.", "Uh, the cat sat on mat today!", NormalizerKind::kEnglish);
  EXPECT_EQ(s.reference_normalized, "the cat sat on the mat");
  EXPECT_EQ(s.hypothesis_normalized, "the cat sat on mat today");  // "uh" is a filler
  EXPECT_EQ(s.words.reference, 6);
  EXPECT_EQ(s.words.deletions, 1);
  EXPECT_EQ(s.words.insertions, 1);
  EXPECT_EQ(s.words.substitutions, 0);
  EXPECT_DOUBLE_EQ(s.words.rate(), 2.0 / 6.0);
  ErrorCounts total = s.words;
  total += s.words;
  EXPECT_EQ(total.errors(), 4);
  EXPECT_DOUBLE_EQ(total.rate(), 4.0 / 12.0);
  EXPECT_DOUBLE_EQ(align_tokens({}, {}).rate(), 0.0);
  EXPECT_DOUBLE_EQ(align_tokens({}, {"x", "y"}).rate(), 2.0);
}

}  // namespace
}  // namespace earshot::bench
