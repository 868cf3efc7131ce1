#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "../session/fakes.h"
#include "../support/wait.h"
#include "fake_llm.h"
#include "session/stream_session.h"
#include "stages/translation/record.h"

namespace earshot::stages::translation {
namespace {

using earshot::testing::FakeModel;
using earshot::testing::smooth_word_for_word;

const std::string kData = std::string(EARSHOT_SOURCE_DIR) + "/tests/stages/data/";

CalibrationRegistry registry() {
  CalibrationRegistry r;
  r.add({"hy-mt2-1.8b", "en", "de", {{9, 5}, {13, 1}}, {}});
  return r;
}

TranslationOptions options(CommitMode mode) {
  TranslationOptions o;
  o.target_language = "de";
  o.commit.mode = mode;
  return o;
}

std::string lines_of(const std::vector<RecordedEvent>& events) {
  std::string out;
  for (const RecordedEvent& e : events) out += to_json_line(e) + "\n";
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TranslationReplay, EventsRoundTripThroughJsonLines) {
  const std::vector<RecordedEvent> input = read_recording(kData + "replay_fixture.jsonl");
  ASSERT_EQ(input.size(), 39u);
  for (const RecordedEvent& e : input) EXPECT_EQ(to_json_line(from_json_line(to_json_line(e))), to_json_line(e));
  EXPECT_THROW(from_json_line(R"({"t": 0, "type": "bogus"})"), Error);
  EXPECT_THROW(from_json_line("not json"), Error);
}

// The fixture replays to the same output in every mode, run after run and
// process after process (the golden files were written by an earlier process;
// EARSHOT_UPDATE_GOLDEN=1 rewrites them after a deliberate change).
TEST(TranslationReplay, TheFixtureReplaysExactly) {
  const std::vector<RecordedEvent> input = read_recording(kData + "replay_fixture.jsonl");
  auto model = std::make_shared<FakeModel>(smooth_word_for_word(2));
  for (CommitMode mode : {CommitMode::kPaper, CommitMode::kArgmax, CommitMode::kMass}) {
    SCOPED_TRACE(std::string(to_string(mode)));
    ReplayResult a = replay(model, registry(), input, "en", options(mode));
    ReplayResult b = replay(model, registry(), input, "en", options(mode));
    EXPECT_EQ(lines_of(a.output), lines_of(b.output));
    EXPECT_EQ(replay_report_json(a), replay_report_json(b));
    EXPECT_EQ(a.finals, 3);
    EXPECT_GE(a.draft_coverage, 0.0);
    EXPECT_LE(a.draft_coverage, 1.0);
    const std::string golden = kData + "replay_fixture." + std::string(to_string(mode)) + ".out.jsonl";
    const std::string got = lines_of(a.output) + replay_report_json(a) + "\n";
    if (std::getenv("EARSHOT_UPDATE_GOLDEN")) std::ofstream(golden) << got;
    EXPECT_EQ(got, read_text(golden)) << "golden " << golden;
  }
}

TEST(TranslationReplay, ModesDifferOnTheSameInput) {
  const std::vector<RecordedEvent> input = read_recording(kData + "replay_fixture.jsonl");
  auto model = std::make_shared<FakeModel>(smooth_word_for_word(2));
  ReplayResult paper = replay(model, registry(), input, "en", options(CommitMode::kPaper));
  ReplayResult argmax = replay(model, registry(), input, "en", options(CommitMode::kArgmax));
  // Finals do not depend on the commit mode.
  std::vector<std::string> f1, f2;
  for (const auto& e : paper.output)
    if (const auto* f = std::get_if<events::SegmentTranslated>(&e.event)) f1.push_back(f->translation);
  for (const auto& e : argmax.output)
    if (const auto* f = std::get_if<events::SegmentTranslated>(&e.event)) f2.push_back(f->translation);
  EXPECT_EQ(f1, f2);
  ASSERT_EQ(f1.size(), 3u);
  EXPECT_EQ(f1[0], "THE WEATHER IS NICE TODAY AND WE WILL GO FOR A WALK IN THE PARK.");
  EXPECT_NE(lines_of(paper.output), lines_of(argmax.output));
  EXPECT_GT(argmax.draft_coverage, 0.5);  // word for word: drafts show nearly everything early
}

// A live run recorded through the service's observer replays to the live finals.
TEST(TranslationReplay, ALiveRecordingReplaysToTheLiveFinals) {
  auto model = std::make_shared<FakeModel>(smooth_word_for_word(2));
  TranslationService service(model, registry(), 1, options(CommitMode::kArgmax));
  const std::string path = ::testing::TempDir() + "/live.jsonl";
  auto recorder = std::make_shared<InputRecorder>(path);
  service.set_input_observer([recorder](const events::Event& e) { recorder->record(e); });
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(service.make_stage("en", options(CommitMode::kArgmax)));
  session::StreamSession session(std::make_unique<earshot::testing::FakeProcessor>(), nullptr, {}, {},
                                 std::move(chain));
  for (int i = 0; i < 20; ++i) {
    session.push_audio(std::vector<float>(8000, 0.01f * static_cast<float>(i % 7 + 1)));
    while (session.has_work()) session.step();
  }
  session.end_of_stream();
  while (session.has_work()) session.step();
  ASSERT_TRUE(earshot::testing::eventually([&] { return session.done(); })) << "the session never finished";
  std::vector<std::string> live;
  for (const auto& e : session.events_since(0).events)
    if (const auto* f = std::get_if<events::SegmentTranslated>(&e)) live.push_back(f->translation);
  ASSERT_FALSE(live.empty());
  recorder.reset();
  ReplayResult r = replay(model, registry(), read_recording(path), "en", options(CommitMode::kArgmax));
  std::vector<std::string> replayed;
  for (const auto& e : r.output)
    if (const auto* f = std::get_if<events::SegmentTranslated>(&e.event)) replayed.push_back(f->translation);
  EXPECT_EQ(replayed, live);
}

}  // namespace
}  // namespace earshot::stages::translation
