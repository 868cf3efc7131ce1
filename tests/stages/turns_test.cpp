// Turn detection: the text's shape, the rule on scripted event streams (the start,
// the end at the confidence threshold or the timeout, an eager end that resumes
// or ends with the same words, flushes, the end of the stream), the per-stream
// parameters, the stage's ordering of its events, and a live session's turns.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "../session/fakes.h"
#include "common/error.h"
#include "session/stream_session.h"
#include "stages/turns/registration.h"
#include "stages/turns/turn_stage.h"

namespace earshot::stages::turns {
namespace {

Word word(const std::string& text, double start, double end) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  return w;
}

std::string seconds(double t) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", t);
  return text;
}

// The turn events among `log`, one line each.
std::string turns_of(const std::vector<events::Event>& log) {
  std::string out;
  for (const events::Event& e : log) {
    if (const auto* t = std::get_if<events::TurnStarted>(&e))
      out += "start " + std::to_string(t->turn) + " " + seconds(t->at) + "\n";
    if (const auto* t = std::get_if<events::TurnEndLikely>(&e))
      out += "likely " + std::to_string(t->turn) + " " + seconds(t->at) + " " + t->evidence.reason + "\n";
    if (const auto* t = std::get_if<events::TurnResumed>(&e))
      out += "resumed " + std::to_string(t->turn) + " " + seconds(t->at) + "\n";
    if (const auto* t = std::get_if<events::TurnEnded>(&e))
      out += "end " + std::to_string(t->turn) + " " + seconds(t->at) + " " + t->evidence.reason + "\n";
  }
  return out;
}

// Drives a detector with events and clock ticks, collecting what it emits.
struct Script {
  explicit Script(TurnSettings settings = {}, TurnScorer* scorer = nullptr) : detector(settings, scorer) {}
  Script& event(events::Event e) {
    detector.on_event(e, [&](events::Event out) { log.push_back(std::move(out)); });
    return *this;
  }
  Script& tick(double heard) {
    detector.advance(heard, [&](events::Event out) { log.push_back(std::move(out)); });
    return *this;
  }
  std::string turns() const { return turns_of(log); }
  const events::TurnEnded* last_end() const {
    for (auto it = log.rbegin(); it != log.rend(); ++it)
      if (const auto* t = std::get_if<events::TurnEnded>(&*it)) return t;
    return nullptr;
  }
  TurnDetector detector;
  std::vector<events::Event> log;
};

TEST(TurnText, SentenceEndsContinuationsAndNeither) {
  auto shape = [](const std::string& last) { return text_shape({word(" hello", 0, 1), word(last, 1, 2)}); };
  EXPECT_TRUE(shape(" there.").sentence_end);
  EXPECT_TRUE(shape(" there?\"").sentence_end);
  EXPECT_TRUE(shape(" there!)").sentence_end);
  EXPECT_TRUE(shape("\xE5\xA5\xBD\xE3\x80\x82").sentence_end);  // 好。
  EXPECT_FALSE(shape(" there...").sentence_end);
  EXPECT_FALSE(shape(" there...").trailing_continuation);
  EXPECT_TRUE(shape(" and").trailing_continuation);
  EXPECT_TRUE(shape(" Um").trailing_continuation);
  EXPECT_TRUE(shape(" there,").trailing_continuation);
  EXPECT_FALSE(shape(" there").sentence_end);
  EXPECT_FALSE(shape(" there").trailing_continuation);
  EXPECT_FALSE(text_shape({}).sentence_end);
  EXPECT_DOUBLE_EQ(text_prior({true, false}, true), 0.9);
  EXPECT_DOUBLE_EQ(text_prior({false, true}, true), 0.2);
  EXPECT_DOUBLE_EQ(text_prior({false, false}, true), 0.65);
  EXPECT_DOUBLE_EQ(text_prior({false, false}, false), 0.5);
}

TEST(TurnRule, ASentenceEndEndsTheTurnAsSoonAsTheVadDecides) {
  Script s;
  s.event(events::SpeechStarted{0.3})
      .event(events::WordsCommitted{{word(" Hello", 0.3, 0.6), word(" there.", 0.6, 1.0)}})
      .event(events::SpeechEnded{1.03})
      .event(events::ProvisionalChanged{{}})
      .tick(1.15);
  EXPECT_EQ(s.turns(), "start 0 0.30\nend 0 1.03 silence\n");
  const events::TurnEnded* end = s.last_end();
  ASSERT_NE(end, nullptr);
  EXPECT_NEAR(end->evidence.silence_seconds, 0.12, 1e-9);
  EXPECT_TRUE(end->evidence.all_committed);
  EXPECT_TRUE(end->evidence.sentence_end);
  EXPECT_DOUBLE_EQ(end->evidence.semantic, -1);
  EXPECT_GE(end->confidence, 0.7);
}

TEST(TurnRule, AWordThatContinuesWaitsForMoreSilence) {
  TurnSettings settings;  // threshold 0.7: 1 - 0.8 exp(-s / 0.5) >= 0.7 at s = 0.49 s
  Script s(settings);
  s.event(events::SpeechStarted{0})
      .event(events::WordsCommitted{{word(" and", 0.1, 0.4)}})
      .event(events::SpeechEnded{0.5});
  s.tick(0.7).tick(0.9);
  EXPECT_EQ(s.turns(), "start 0 0.00\n");
  s.tick(1.0);
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 0.50 silence\n");
  EXPECT_TRUE(s.last_end()->evidence.trailing_continuation);
}

TEST(TurnRule, SpeechBackBeforeTheEndKeepsOneTurn) {
  Script s;
  s.event(events::SpeechStarted{0})
      .event(events::WordsCommitted{{word(" and", 0.1, 0.4)}})
      .event(events::SpeechEnded{0.5});
  s.tick(0.7).event(events::SpeechStarted{0.8}).tick(2.0);  // in speech: no end
  s.event(events::WordsCommitted{{word(" then.", 0.8, 1.2)}}).event(events::SpeechEnded{1.3}).tick(1.45);
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 1.30 silence\n");
  s.event(events::SpeechStarted{3.0}).event(events::WordsCommitted{{word(" Next.", 3.0, 3.4)}});
  s.event(events::SpeechEnded{3.5}).tick(3.7);
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 1.30 silence\nstart 1 3.00\nend 1 3.50 silence\n");
}

TEST(TurnRule, NoEndWhileWordsAreProvisional) {
  Script s;
  s.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" Done.", 0.1, 0.4)}});
  s.event(events::ProvisionalChanged{{word(" x", 0.4, 0.5)}}).event(events::SpeechEnded{0.5}).tick(1.5);
  EXPECT_EQ(s.turns(), "start 0 0.00\n");
  s.event(events::ProvisionalChanged{{}}).tick(1.6);
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 0.50 silence\n");
}

TEST(TurnRule, APauseCarriedInOneStepEndsTheTurnOnTheAudioClock) {
  // A session behind its stream steps over a speech end, the silence and the next start
  // at once; its clock tick comes after them all. The pause still ends the turn.
  for (const bool acoustic : {false, true}) {
    TurnSettings settings;
    if (acoustic) settings.silence_seconds = 0.35;
    Script s(settings);
    s.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" Done", 0.1, 0.9)}});
    s.event(events::ProvisionalChanged{{}}).event(events::SpeechEnded{1.0}).event(events::SpeechStarted{3.0});
    s.event(events::WordsCommitted{{word(" Next", 3.1, 3.5)}}).tick(3.6);
    EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 1.00 silence\nstart 1 3.00\n") << "acoustic " << acoustic;
    const events::TurnEnded* end = s.last_end();
    ASSERT_NE(end, nullptr);
    EXPECT_NEAR(end->evidence.silence_seconds, 2.0, 1e-9);
  }
  // A pause too short for the rule keeps one turn, as when ticked through it.
  Script s;
  s.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" and", 0.1, 0.4)}});
  s.event(events::SpeechEnded{0.5}).event(events::SpeechStarted{0.8}).tick(2.0);
  EXPECT_EQ(s.turns(), "start 0 0.00\n");
  // Audio the session skipped (it fell too far behind) is no pause.
  Script skipped;
  skipped.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" Done.", 0.1, 0.4)}});
  skipped.event(events::SpeechEnded{0.5}).event(events::AudioSkipped{0.5, 4.0}).event(events::SpeechStarted{4.0});
  skipped.tick(4.2);
  EXPECT_EQ(skipped.turns(), "start 0 0.00\n");
}

TEST(TurnRule, TheTimeoutEndsATurnTheThresholdNeverWould) {
  TurnSettings settings;
  settings.eot_threshold = 1.0;  // only forced ends
  settings.timeout_seconds = 2.0;
  Script s(settings);
  s.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" Done.", 0.1, 0.4)}});
  s.event(events::SpeechEnded{0.5}).tick(2.4);
  EXPECT_EQ(s.turns(), "start 0 0.00\n");
  s.tick(2.5);
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 0.50 timeout\n");
}

TEST(TurnRule, EagerEndThenResumedOrEndedWithTheSameWords) {
  TurnSettings settings;
  settings.eager_eot_threshold = 0.3;
  settings.eot_threshold = 0.95;
  Script s(settings);
  s.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" I", 0.1, 0.3), word(" want", 0.3, 0.5)}});
  s.event(events::SpeechEnded{0.6}).tick(0.7);
  EXPECT_EQ(s.turns(), "start 0 0.00\nlikely 0 0.60 silence\n");
  // Speech comes back: resumed; new words, then a second eager end and the end.
  s.event(events::SpeechStarted{0.9}).event(events::WordsCommitted{{word(" tea.", 0.9, 1.2)}});
  s.event(events::SpeechEnded{1.3}).tick(1.35);
  s.tick(3.0);
  EXPECT_EQ(s.turns(),
            "start 0 0.00\nlikely 0 0.60 silence\nresumed 0 0.90\nlikely 0 1.30 silence\nend 0 1.30 silence\n");
  // A word committed late after the eager end resumes the turn too (its text changed).
  Script late(settings);
  late.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" I", 0.1, 0.3)}});
  late.event(events::SpeechEnded{0.6}).tick(0.7).event(events::WordsCommitted{{word(" do", 0.4, 0.6)}});
  EXPECT_EQ(late.turns(), "start 0 0.00\nlikely 0 0.60 silence\nresumed 0 0.40\n");
}

TEST(TurnRule, AnEagerEndNeedsWords) {
  TurnSettings settings;
  settings.eager_eot_threshold = 0.3;
  settings.eot_threshold = 0.99;
  Script s(settings);
  s.event(events::SpeechStarted{0}).event(events::SpeechEnded{0.3}).tick(1.0);
  EXPECT_EQ(s.turns(), "start 0 0.00\n");
}

TEST(TurnRule, TheSilenceRuleIgnoresTheText) {
  TurnSettings settings;
  settings.silence_seconds = 0.5;
  Script s(settings);
  s.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" Done.", 0.1, 0.4)}});
  s.event(events::SpeechEnded{0.5}).tick(0.9);
  EXPECT_EQ(s.turns(), "start 0 0.00\n");
  s.tick(1.0);
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 0.50 silence\n");
  EXPECT_DOUBLE_EQ(s.last_end()->confidence, 1.0);
}

TEST(TurnRule, AFlushEndsTheTurnAndLaterWordsOpenTheNext) {
  Script s;
  s.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" and", 0.1, 0.4)}});
  s.tick(0.5).event(events::Finalized{0.5});
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 0.50 finalize\n");
  // Still in speech: the next words open turn 1 where they start.
  s.event(events::ProvisionalChanged{{word(" more", 0.6, 0.8)}});
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 0.50 finalize\nstart 1 0.60\n");
  s.event(events::EndOfStream{});
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 0.50 finalize\nstart 1 0.60\nend 1 0.50 end_of_stream\n");
}

TEST(TurnRule, WithoutAVadOnlyFlushesAndTheEndEndTurns) {
  Script s;
  s.event(events::WordsCommitted{{word(" Done.", 0.1, 0.4)}}).tick(9.0);
  EXPECT_EQ(s.turns(), "start 0 0.10\n");
  s.event(events::EndOfStream{});
  EXPECT_EQ(s.turns(), "start 0 0.10\nend 0 0.40 end_of_stream\n");
}

TEST(TurnRule, AFailedStreamEndsNoTurn) {
  Script s;
  s.event(events::SpeechStarted{0}).event(events::StreamError{"x"}).event(events::EndOfStream{});
  EXPECT_EQ(s.turns(), "start 0 0.00\n");
}

class FixedScorer : public TurnScorer {
 public:
  explicit FixedScorer(double p) : p_(p) {}
  double end_of_turn_probability(const std::string& text) override {
    texts.push_back(text);
    return p_;
  }
  std::vector<std::string> texts;

 private:
  double p_;
};

TEST(TurnRule, ASemanticScoreReplacesTheTextShapeOncePerText) {
  FixedScorer unsure(0.05);
  Script s(TurnSettings{}, &unsure);
  s.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" Done.", 0.1, 0.4)}});
  s.event(events::SpeechEnded{0.5}).tick(0.6).tick(0.7).tick(0.8);
  EXPECT_EQ(s.turns(), "start 0 0.00\n") << "a sentence end the model doubts";
  EXPECT_EQ(unsure.texts, std::vector<std::string>{" Done."}) << "scored once per text";
  s.tick(1.2);  // 1 - 0.95 exp(-0.7 / 0.5) = 0.77
  EXPECT_EQ(s.turns(), "start 0 0.00\nend 0 0.50 semantic\n");
  EXPECT_DOUBLE_EQ(s.last_end()->evidence.semantic, 0.05);

  FixedScorer sure(0.95);
  Script t(TurnSettings{}, &sure);
  t.event(events::SpeechStarted{0}).event(events::WordsCommitted{{word(" and", 0.1, 0.4)}});
  t.event(events::SpeechEnded{0.5}).tick(0.52);
  EXPECT_EQ(t.turns(), "start 0 0.00\nend 0 0.50 semantic\n") << "a continuation the model trusts";
}

TEST(TurnParams, PerStreamSettingsOverTheDefaults) {
  TurnSettings d;
  std::optional<TurnSettings> s =
      settings_for({{"eot_threshold", "0.8"}, {"eager_eot_threshold", "0.4"}, {"eot_timeout_ms", "3000"}}, d);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->eot_threshold, 0.8);
  EXPECT_DOUBLE_EQ(*s->eager_eot_threshold, 0.4);
  EXPECT_DOUBLE_EQ(s->timeout_seconds, 3.0);
  EXPECT_FALSE(s->silence_seconds);
  s = settings_for({{"turn_silence_ms", "500"}}, d);
  EXPECT_DOUBLE_EQ(*s->silence_seconds, 0.5);
  s = settings_for({{"turn_eagerness", "high"}}, d);
  EXPECT_DOUBLE_EQ(s->eot_threshold, 0.55);
  EXPECT_DOUBLE_EQ(s->timeout_seconds, 2.0);
  s = settings_for({{"turn_eagerness", "low"}}, d);
  EXPECT_DOUBLE_EQ(s->timeout_seconds, 8.0);
  EXPECT_FALSE(settings_for({{"turns", "false"}}, d));
  EXPECT_TRUE(settings_for({}, d));
  auto message = [&](std::map<std::string, std::string> p) {
    try {
      settings_for(p, d);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({{"eot_threshold", "0.2"}}).find("'eot_threshold'"), std::string::npos);
  EXPECT_NE(message({{"eot_threshold", "x"}}).find("'eot_threshold'"), std::string::npos);
  EXPECT_NE(message({{"eot_timeout_ms", "100"}}).find("'eot_timeout_ms'"), std::string::npos);
  EXPECT_NE(message({{"eager_eot_threshold", "0.8"}, {"eot_threshold", "0.6"}}).find("above"), std::string::npos);
  EXPECT_NE(message({{"turn_eagerness", "max"}}).find("'turn_eagerness'"), std::string::npos);
  EXPECT_NE(message({{"turns", "maybe"}}).find("'turns'"), std::string::npos);
}

// A session on the fakes with a turn stage of `settings`, and two phrases 1 s apart.
std::unique_ptr<session::StreamSession> session_with_turns(TurnSettings settings = {}) {
  std::vector<std::unique_ptr<Stage>> chain;
  chain.push_back(std::make_unique<TurnStage>(settings));
  return std::make_unique<session::StreamSession>(
      std::make_unique<testing::FakeProcessor>(), std::make_unique<testing::FakeVad>(), session::StreamOptions{},
      [] { return 0.0; }, std::move(chain));
}
std::vector<float> two_phrases() {
  using namespace earshot::testing;
  return concat({tone(0.7, 0.1f), silence(1.0), tone(0.6, 0.2f), silence(0.5)});
}

TEST(TurnStage, OrdersItsEventsAroundTheOnesThatCausedThem) {
  TurnStage stage(TurnSettings{});
  std::vector<events::Event> out;
  auto emit = [&](events::Event e) { out.push_back(std::move(e)); };
  stage.consume(events::SpeechStarted{0}, emit);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<events::SpeechStarted>(out[0]));
  EXPECT_TRUE(std::holds_alternative<events::TurnStarted>(out[1]));
  stage.consume(events::WordsCommitted{{word(" Hi.", 0, 0.3)}}, emit);
  stage.consume(events::EndOfStream{}, emit);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_TRUE(std::holds_alternative<events::WordsCommitted>(out[2]));
  EXPECT_TRUE(std::holds_alternative<events::TurnEnded>(out[3]));
  EXPECT_TRUE(std::holds_alternative<events::EndOfStream>(out[4]));
}

TEST(TurnStage, ALiveSessionsTurnsEndWhenTheVadDecides) {
  const auto session = session_with_turns();
  session::StreamSession& s = *session;
  // Two turns 1 s apart, fed in 0.1 s steps as a real-time client's audio arrives.
  const std::vector<float> audio = two_phrases();
  for (size_t at = 0; at < audio.size(); at += 1600) {
    s.push_audio(std::span<const float>(audio).subspan(at, std::min<size_t>(1600, audio.size() - at)));
    while (s.has_work()) s.step();
  }
  s.end_of_stream();
  while (s.has_work()) s.step();
  const std::vector<events::Event> log = s.events_since(0).events;
  // The fake model's words have no punctuation (prior 0.65): the first tick after the
  // VAD's end (3 silent windows, at 0.2 s of silence here) ends the turn.
  EXPECT_EQ(turns_of(log), "start 0 0.00\nend 0 0.70 silence\nstart 1 1.70\nend 1 2.30 silence\n");
  // Every word of a turn precedes its end in the log.
  size_t last_word = 0, first_end = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    if (std::holds_alternative<events::WordsCommitted>(log[i]) && first_end == 0) last_word = i;
    if (std::holds_alternative<events::TurnEnded>(log[i]) && first_end == 0) first_end = i;
  }
  EXPECT_LT(last_word, first_end);
}

TEST(TurnStage, ASessionBehindItsStreamEndsTheSameTurns) {
  // The audio of ALiveSessionsTurnsEndWhenTheVadDecides arrives before the session
  // steps at all (it fell behind): its turns are the same, decided on the audio clock.
  const auto session = session_with_turns();
  session::StreamSession& s = *session;
  s.push_audio(two_phrases());
  s.end_of_stream();
  while (s.has_work()) s.step();
  EXPECT_EQ(turns_of(s.events_since(0).events), "start 0 0.00\nend 0 0.70 silence\nstart 1 1.70\nend 1 2.30 silence\n");
}

TEST(TurnStage, SettingsChangeMidStreamInAudioOrder) {
  // check_settings reads a stream's whole set over the server's defaults, without applying it.
  TurnSettings defaults;
  defaults.timeout_seconds = 4;
  TurnSettings only_timeouts = defaults;
  only_timeouts.eot_threshold = 1.0;
  TurnStage stage(only_timeouts, nullptr, defaults);
  const std::map<std::string, std::string> effective =
      stage.check_settings({{"turns", "true"}, {"eot_threshold", "0.7"}, {"eager_eot_threshold", "0.5"}});
  EXPECT_EQ(effective, (std::map<std::string, std::string>{
                           {"eot_threshold", "0.7"}, {"eager_eot_threshold", "0.5"}, {"eot_timeout_ms", "4000"}}));
  EXPECT_THROW(stage.check_settings({{"eot_threshold", "0.2"}}), Error);
  EXPECT_THROW(stage.check_settings({{"eager_eot_threshold", "0.9"}}), Error) << "above the default 0.7";

  // A pause that does not end the turn under the first settings ends it once new ones arrive.
  std::vector<events::Event> out;
  auto emit = [&](events::Event e) { out.push_back(std::move(e)); };
  stage.consume(events::SpeechStarted{0}, emit);
  stage.consume(events::WordsCommitted{{word(" Done.", 0.1, 0.4)}}, emit);
  stage.consume(events::SpeechEnded{0.5}, emit);
  stage.advance(1.5, emit);
  EXPECT_EQ(turns_of(out), "start 0 0.00\n");
  stage.consume(events::SettingsChanged{1.5, {{"eot_threshold", "0.7"}}}, emit);
  EXPECT_TRUE(std::holds_alternative<events::SettingsChanged>(out.back())) << "passed on";
  stage.advance(1.6, emit);
  EXPECT_EQ(turns_of(out), "start 0 0.00\nend 0 0.50 silence\n");
}

TEST(TurnStage, ASessionPlacesNewSettingsAtTheAudioReceivedBeforeThem) {
  using namespace earshot::testing;
  TurnSettings only_timeouts;
  only_timeouts.eot_threshold = 1.0;
  const auto session = session_with_turns(only_timeouts);
  session::StreamSession& s = *session;
  // Everything arrives before the session steps: the change still lands between the two phrases.
  s.push_audio(concat({tone(0.7, 0.1f), silence(1.0)}));
  EXPECT_THROW(s.change_settings({{"eot_threshold", "7"}}), Error);
  const std::map<std::string, std::string> effective = s.change_settings({{"eot_threshold", "0.7"}});
  EXPECT_EQ(effective.at("eot_threshold"), "0.7");
  s.push_audio(concat({tone(0.6, 0.2f), silence(0.5)}));
  s.end_of_stream();
  while (s.has_work()) s.step();
  const std::vector<events::Event> log = s.events_since(0).events;
  size_t changed = 0, second_start = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    if (const auto* c = std::get_if<events::SettingsChanged>(&log[i])) {
      changed = i;
      EXPECT_NEAR(c->at, 1.7, 1e-9);
    }
    if (const auto* t = std::get_if<events::TurnStarted>(&log[i]); t && t->turn == 1) second_start = i;
  }
  ASSERT_GT(changed, 0u);
  EXPECT_LT(changed, second_start);
  // The first pause ends turn 0 only under the new threshold (with 1.0 it would go on).
  EXPECT_EQ(turns_of(log), "start 0 0.00\nend 0 0.70 silence\nstart 1 1.70\nend 1 2.30 silence\n");
}

TEST(TurnRegistry, OptionsAndStreamsThatTurnItOff) {
  const StageDefinition def = stage_definition();
  EXPECT_EQ(def.name, "turns");
  Args args("serve", "");
  def.declare(args, Command::kServe);
  args.parse({"--eot-threshold", "0.8", "--eager-eot-threshold", "0.5"});
  std::unique_ptr<StageSettings> settings = def.configure(args, {});
  ASSERT_TRUE(settings);
  std::shared_ptr<const LoadedStage> loaded = settings->load();
  const auto* turns = dynamic_cast<const LoadedTurns*>(loaded.get());
  ASSERT_NE(turns, nullptr);
  EXPECT_DOUBLE_EQ(turns->defaults().eot_threshold, 0.8);
  EXPECT_TRUE(loaded->open({"en", {}, true}));
  EXPECT_FALSE(loaded->open({"en", {{"turns", "false"}}, true}));
  EXPECT_THROW(loaded->open({"en", {{"eot_threshold", "2"}}, true}), Error);

  Args off("serve", "");
  def.declare(off, Command::kServe);
  off.parse({"--turn-detection", "off"});
  EXPECT_FALSE(def.configure(off, {}));
  Args bad("serve", "");
  def.declare(bad, Command::kServe);
  bad.parse({"--turn-detection", "off", "--eot-threshold", "0.8"});
  EXPECT_THROW(def.configure(bad, {}), Error);
  Args range("serve", "");
  def.declare(range, Command::kServe);
  range.parse({"--eot-timeout-ms", "10"});
  EXPECT_THROW(def.configure(range, {}), Error);
  Args prompt("serve", "");
  def.declare(prompt, Command::kServe);
  prompt.parse({"--turn-model-prompt", "no placeholder"});
  EXPECT_THROW(def.configure(prompt, {}), Error);
}

}  // namespace
}  // namespace earshot::stages::turns
