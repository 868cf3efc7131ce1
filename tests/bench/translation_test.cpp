// bench --translate-to's accounting: a scripted ASR stream through a synchronous
// translation stage over the scripted fake LLM (word for word, upper case):
// delays present for every committed target word and non-negative, their
// arithmetic on the audio clock, chrF of the finals against references, model
// calls by kind per audio minute.
#include "bench/translation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "../stages/fake_llm.h"
#include "bench/dataset.h"
#include "bench/report.h"
#include "fake_processor.h"
#include "stages/translation/translation_stage.h"

namespace earshot::bench {
namespace {

namespace tr = stages::translation;
using testing::ManualClock;
using testing::ScriptedProcessor;
using testing::word;

std::shared_ptr<tr::TranslationService> service(tr::CommitMode mode) {
  auto model = std::make_shared<earshot::testing::FakeModel>(earshot::testing::word_for_word(2));
  tr::CalibrationRegistry registry;
  registry.add({"hy-mt2-1.8b", "en", "xx", {{0, 0}, {0, 1}}, {}});
  tr::TranslationOptions o;
  o.target_language = "xx";
  o.commit.mode = mode;
  o.redraft_source_tokens = 1;
  return std::make_shared<tr::TranslationService>(model, std::move(registry), 1, o);
}

// 0.5 s chunks: "hello" (ends 0.4) commits at call 0 with "world" provisional,
// "world" and "again" later; the stream ends at 2 s.
StreamTrace asr_trace(Pacing pacing, ManualClock& clock) {
  std::map<int, testing::ScriptStep> script;
  script[0] = {{word("hello", 0.0, 0.4)}, {word(" world", 0.4, 0.9)}};
  script[2] = {{word(" world", 0.4, 0.9), word(" again", 1.0, 1.3)}, {}};
  ScriptedProcessor asr(clock, script, 0.05);
  StreamOptions options;
  options.pacing = pacing;
  options.keep_tails = true;
  return run_stream(asr, std::vector<float>(32000, 0.0f), options, clock);
}

struct Rendered {
  std::string table, json;
};

// The bench report of one "alignatt" system carrying this translation summary, as table and as JSON.
Rendered render(const TranslationSummary& summary) {
  BenchReport report;
  report.config.pacing = "as-fast-as-possible";
  SystemResult system;
  system.name = "alignatt";
  system.translation = summary;
  report.systems.push_back(system);
  std::ostringstream table, json;
  write_table(table, report);
  write_json(json, report);
  return {table.str(), json.str()};
}

TEST(BenchTranslation, EveryCommittedWordHasANonNegativeDelayOnTheAudioClock) {
  ManualClock clock;
  const StreamTrace asr = asr_trace(Pacing::kAsFastAsPossible, clock);
  ASSERT_EQ(asr.tails.size(), asr.emissions.size());
  auto svc = service(tr::CommitMode::kArgmax);
  auto stage = svc->make_synchronous_stage("en", svc->defaults());
  const TranslationTrace t = translate_trace(asr, *stage, Pacing::kAsFastAsPossible, clock);

  ASSERT_EQ(t.committed_words, (std::vector<std::string>{"HELLO", "WORLD", "AGAIN"}));
  ASSERT_EQ(t.commit_delays.size(), t.committed_words.size());
  // HELLO commits with "hello" at audio 0.5 (argmax mode holds WORLD, drafted
  // over the tail); WORLD and AGAIN commit with "again" (ends 1.3) at 1.5.
  EXPECT_NEAR(t.commit_delays[0], 0.5 - 0.4, 1e-9);
  EXPECT_NEAR(t.commit_delays[1], 1.5 - 1.3, 1e-9);
  EXPECT_NEAR(t.commit_delays[2], 1.5 - 1.3, 1e-9);
  // The first target text came with the first draft, at 0.5, after "hello" ended at 0.4.
  ASSERT_EQ(t.first_draft_delays.size(), 1u);
  EXPECT_NEAR(t.first_draft_delays[0], 0.1, 1e-9);
  // One segment, closed by the end of the stream (2 s) after "again" ended at 1.3.
  ASSERT_EQ(t.final_lags.size(), 1u);
  EXPECT_NEAR(t.final_lags[0], 2.0 - 1.3, 1e-9);
  EXPECT_EQ(t.translation, "HELLO WORLD AGAIN");

  const TranslationSummary s = summarize_translation("xx", {t, t}, {"HELLO WORLD AGAIN", ""});
  EXPECT_EQ(s.committed_words, 6);
  EXPECT_EQ(s.segments, 2);
  EXPECT_EQ(s.commit_delay.count, 6);
  ASSERT_TRUE(s.chrf.has_value());
  EXPECT_EQ(s.chrf_streams, 1);
  EXPECT_DOUBLE_EQ(*s.chrf, 100.0);
  const TranslationSummary wrong = summarize_translation("xx", {t}, {"HELLO WORLD"});
  EXPECT_NEAR(*wrong.chrf, chrf("HELLO WORLD AGAIN", "HELLO WORLD"), 1e-12);
  EXPECT_LT(*wrong.chrf, 100.0);
  EXPECT_FALSE(summarize_translation("xx", {t}, {""}).chrf.has_value());

  // The report carries the block (table) and every number (JSON).
  const auto [table, json] = render(s);
  EXPECT_NE(table.find("translation alignatt -> xx: 2 segments, 6 committed words, chrF 100.0 (1 streams)"),
            std::string::npos)
      << table;
  EXPECT_NE(json.find("\"translation\":{\"target_language\":\"xx\",\"segments\":2,\"committed_words\":6,"
                      "\"chrf\":100,"),
            std::string::npos)
      << json;
}

TEST(BenchTranslation, RealtimeDelaysAreOnTheWallClockAndNonNegative) {
  ManualClock clock;
  const StreamTrace asr = asr_trace(Pacing::kRealtime, clock);
  auto svc = service(tr::CommitMode::kPaper);
  auto stage = svc->make_synchronous_stage("en", svc->defaults());
  const TranslationTrace t = translate_trace(asr, *stage, Pacing::kRealtime, clock);
  ASSERT_EQ(t.commit_delays.size(), t.committed_words.size());
  ASSERT_FALSE(t.committed_words.empty());
  for (double d : t.commit_delays) EXPECT_GE(d, 0.0);
  for (double d : t.first_draft_delays) EXPECT_GE(d, 0.0);
  ASSERT_EQ(t.final_lags.size(), 1u);
  // Wall clock: the last emission came after the 2 s of audio plus its 0.05 s of compute.
  EXPECT_NEAR(t.final_lags[0], asr.emissions.back().wall - 1.3, 1e-9);
  EXPECT_GE(asr.emissions.back().wall, 2.0);
}

TEST(BenchTranslation, ModelCallsAreCountedPerKindAndPerAudioMinute) {
  ManualClock clock;
  const StreamTrace asr = asr_trace(Pacing::kAsFastAsPossible, clock);
  auto model = std::make_shared<earshot::testing::FakeModel>(earshot::testing::word_for_word(2));
  tr::CalibrationRegistry registry;
  registry.add({"hy-mt2-1.8b", "en", "xx", {{0, 0}, {0, 1}}, {}});
  tr::TranslationOptions o;
  o.target_language = "xx";
  o.redraft_source_tokens = 1;
  auto svc = std::make_shared<tr::TranslationService>(model, std::move(registry), 1, o);
  const CallCounter calls = [&] {
    const tr::TranslationCounts c = svc->counts();
    return std::pair<long, long>{c.draft_calls, c.final_calls};
  };
  auto stage = svc->make_synchronous_stage("en", svc->defaults());
  const TranslationTrace t = translate_trace(asr, *stage, Pacing::kAsFastAsPossible, clock, calls);
  // Every model call sets the attention capture once: with the calibrated heads
  // to draft, without them for a closed segment's final (one per segment).
  EXPECT_EQ(t.draft_calls, model->captures_with_heads.load());
  EXPECT_EQ(t.final_calls, model->captures_without_heads.load());
  EXPECT_EQ(t.final_calls, static_cast<long>(t.final_lags.size()));
  EXPECT_GE(t.draft_calls, 1);
  EXPECT_DOUBLE_EQ(t.audio_seconds, asr.audio_seconds);

  // A second stream on the same service counts only its own calls.
  auto again = svc->make_synchronous_stage("en", svc->defaults());
  const TranslationTrace u = translate_trace(asr, *again, Pacing::kAsFastAsPossible, clock, calls);
  EXPECT_EQ(u.draft_calls, t.draft_calls);
  EXPECT_EQ(u.final_calls, t.final_calls);
  EXPECT_EQ(svc->counts().calls(), 2 * (t.draft_calls + t.final_calls));
  EXPECT_EQ(svc->counts().skipped_drafts, 0);  // synchronous stages skip nothing

  const TranslationSummary s = summarize_translation("xx", {t, u}, {"", ""});
  const double minutes = 2 * asr.audio_seconds / 60.0;
  ASSERT_TRUE(s.calls_per_minute(s.draft_calls).has_value());
  EXPECT_NEAR(*s.calls_per_minute(s.draft_calls), 2.0 * t.draft_calls / minutes, 1e-9);
  EXPECT_NEAR(*s.calls_per_minute(s.final_calls), 2.0 * t.final_calls / minutes, 1e-9);
  EXPECT_FALSE(summarize_translation("xx", {}, {}).calls_per_minute(1).has_value());

  const auto [table, json] = render(s);
  char expected[96];
  std::snprintf(expected, sizeof expected, "MT calls          %.1f per audio minute (drafts %.1f + finals %.1f;",
                (s.draft_calls + s.final_calls) / minutes, s.draft_calls / minutes, s.final_calls / minutes);
  EXPECT_NE(table.find(expected), std::string::npos) << table;
  EXPECT_NE(json.find("\"mt_calls\":{\"drafts\":" + std::to_string(s.draft_calls) +
                      ",\"finals\":" + std::to_string(s.final_calls) + ","),
            std::string::npos)
      << json;
}

TEST(BenchTranslation, ReferenceTranslationsAreTheLanguageFilesNextToTheAudio) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("earshot-bench-refs-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.zh.txt") << "\xE4\xBD\xA0\xE5\xA5\xBD\n";
  std::vector<Utterance> utts(2);
  utts[0].audio_path = (dir / "a.wav").string();
  utts[1].audio_path = (dir / "b.wav").string();
  EXPECT_EQ(load_reference_translations(utts, "zh"), (std::vector<std::string>{"\xE4\xBD\xA0\xE5\xA5\xBD ", ""}));
  EXPECT_EQ(load_reference_translations(utts, "de"), (std::vector<std::string>{"", ""}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace earshot::bench
