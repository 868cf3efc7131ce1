// The diarization stage on a scripted activity source: the assignment rule
// (largest overlap, nearest within 0.5 s, else unknown), words never held back,
// speakers named once the frames pass a word, provisional words guessed, the
// bounded queue of a live stream, the registry entry (its options and per-stream
// choice), and a live session whose log gives every word its speaker.
#include <gtest/gtest.h>

#include <memory>

#include "../model/error_of.h"
#include "../session/fakes.h"
#include "../support/wait.h"
#include "protocol/transcript.h"
#include "scripted_activity.h"
#include "session/stream_session.h"
#include "stages/diarization/registration.h"

namespace earshot::testing {
namespace {

namespace dz = stages::diarization;

dz::ActivityFrame frame(double start, double end, int speaker, float p = 0.9f) {
  dz::ActivityFrame f;
  f.start = start;
  f.end = end;
  f.prob[speaker] = p;
  return f;
}

Word word(const std::string& text, double start, double end) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  return w;
}

std::vector<float> audio(double seconds) { return std::vector<float>(static_cast<size_t>(seconds * 16000), 0.1f); }

// A stage that records the audio the session hands it.
class AudioRecorder : public stages::Stage {
 public:
  explicit AudioRecorder(std::vector<std::pair<double, size_t>>* heard) : heard_(heard) {}
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override { emit(event); }
  void audio(std::span<const float> samples, double start) override { heard_->push_back({start, samples.size()}); }

 private:
  std::vector<std::pair<double, size_t>>* heard_;
};

TEST(StageAudio, EverySampleTheSessionTakesWithItsStreamTime) {
  std::vector<std::pair<double, size_t>> heard;
  std::vector<std::unique_ptr<stages::Stage>> chain;
  chain.push_back(std::make_unique<AudioRecorder>(&heard));
  session::StreamOptions options;
  options.max_pending_seconds = 1.0;  // a session this far behind a real-time client skips the oldest audio
  double now = 0;
  session::StreamSession session(
      std::make_unique<FakeProcessor>(), std::make_unique<FakeVad>(), options, [&now] { return now; },
      std::move(chain));
  const std::vector<float> three = audio(3.0);
  for (int second = 0; second < 3; ++second, now += 1.0)  // a second a second: 2 s are skipped before the first step
    session.push_audio(std::span<const float>(three).subspan(static_cast<size_t>(second) * 16000, 16000));
  while (session.has_work()) session.step();
  session.push_audio(std::vector<float>(8000, 0.0f));  // silence too: the stage hears pauses
  while (session.has_work()) session.step();
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_DOUBLE_EQ(heard[0].first, 2.0);
  EXPECT_EQ(heard[0].second, 16000u);
  EXPECT_DOUBLE_EQ(heard[1].first, 3.0);
  EXPECT_EQ(heard[1].second, 8000u);
}

TEST(SpeakerOf, LargestOverlapThenNearestWithinHalfASecondElseUnknown) {
  const std::deque<dz::ActivityFrame> frames = {frame(0, 1, 0), frame(1, 1.5, 1), frame(1.5, 2, 0), frame(3, 4, 2)};
  const dz::SpeakerRule rule;
  EXPECT_EQ(dz::speaker_of(0.2, 0.8, frames, rule), 1);
  // [0.9, 1.6]: speaker 2 (0-based 1) 0.5 s, speaker 1 0.1 + 0.1 s.
  EXPECT_EQ(dz::speaker_of(0.9, 1.6, frames, rule), 2);
  // In the gap 2..3: the nearest activity within 0.5 s.
  EXPECT_EQ(dz::speaker_of(2.1, 2.3, frames, rule), 1);
  EXPECT_EQ(dz::speaker_of(2.6, 2.8, frames, rule), 3);
  // Nothing within 0.5 s: unknown, never invented.
  EXPECT_EQ(dz::speaker_of(5.0, 5.5, frames, rule), -1);
  EXPECT_EQ(dz::speaker_of(0.5, 0.5, frames, rule), 1);  // a zero-length word inside activity
  // Below the threshold is silence; speakers beyond --max-speakers are not heard.
  EXPECT_EQ(dz::speaker_of(0, 1, {frame(0, 1, 0, 0.3f)}, rule), -1);
  dz::SpeakerRule two = rule;
  two.max_speakers = 2;
  EXPECT_EQ(dz::speaker_of(3.2, 3.8, frames, two), -1);
}

// A synchronous (file) stage: what it emits per event.
struct Recorder {
  std::vector<events::Event> events;
  std::function<void(events::Event)> emit() {
    return [this](events::Event e) { events.push_back(std::move(e)); };
  }
};

std::vector<int> assigned(const std::vector<events::Event>& log) {
  std::vector<int> speakers;
  for (const Word& w : protocol::committed_words(log)) speakers.push_back(w.speaker);
  return speakers;
}

TEST(DiarizationStage, WordsPassAtOnceAndSpeakersFollowTheFrames) {
  // Speaker 0 talks 0..2 s, speaker 1 from 2 s on; frames come a second at a time.
  dz::DiarizationStage stage(std::make_unique<ScriptedActivity>(std::vector<Turn>{{0, 2, 0}, {2, 10, 1}}),
                             dz::DiarizationOptions{}, nullptr, nullptr);
  Recorder r;
  stage.audio(audio(1.0), 0.0);
  stage.consume(events::WordsCommitted{{word(" a", 0.0, 0.4), word(" b", 0.4, 0.9)}}, r.emit());
  // The words pass at once, pending; frames up to 1.0 s decide " a" (0.4 + 0.5 <= 1.0), not " b".
  ASSERT_EQ(r.events.size(), 2u);
  const auto& committed = std::get<events::WordsCommitted>(r.events[0]);
  EXPECT_TRUE(committed.speakers_pending);
  EXPECT_EQ(committed.words.size(), 2u);
  const auto& first = std::get<events::SpeakersAssigned>(r.events[1]);
  EXPECT_EQ(first.first_word, 0u);
  EXPECT_EQ(first.speakers, std::vector<int>{1});
  // A provisional tail gets the speaker the frames so far suggest.
  stage.audio(audio(2.0), 1.0);
  stage.consume(events::ProvisionalChanged{{word(" c", 2.2, 2.6)}}, r.emit());
  const auto& tail = std::get<events::ProvisionalChanged>(r.events[2]);
  EXPECT_EQ(tail.words[0].speaker, 2);
  ASSERT_EQ(r.events.size(), 4u);  // " b" is decided now (frames reach 3.0 s)
  EXPECT_EQ(std::get<events::SpeakersAssigned>(r.events[3]).first_word, 1u);
  // The end of the stream names the rest (the source's last frames), then ends.
  stage.consume(events::WordsCommitted{{word(" c", 2.2, 2.6), word(" d", 2.6, 3.1)}}, r.emit());
  stage.audio(audio(0.3), 3.0);
  stage.consume(events::EndOfStream{}, r.emit());
  EXPECT_TRUE(std::holds_alternative<events::EndOfStream>(r.events.back()));
  EXPECT_EQ(assigned(r.events), (std::vector<int>{1, 1, 2, 2}));
}

TEST(DiarizationStage, SkippedAudioKeepsTheStreamClock) {
  // The session skipped 5..9 s: the source hears 0..5 then 9..11 s, its clock runs 0..7.
  dz::DiarizationStage stage(std::make_unique<ScriptedActivity>(std::vector<Turn>{{0, 5, 0}, {5, 7, 1}}),
                             dz::DiarizationOptions{}, nullptr, nullptr);
  Recorder r;
  stage.audio(audio(5.0), 0.0);
  stage.audio(audio(2.0), 9.0);
  stage.consume(events::WordsCommitted{{word(" x", 4.0, 4.5), word(" y", 9.5, 10.0)}}, r.emit());
  stage.consume(events::EndOfStream{}, r.emit());
  EXPECT_EQ(assigned(r.events), (std::vector<int>{1, 2}));
}

TEST(DiarizationStage, NoActivityNearAWordLeavesItUnknown) {
  dz::DiarizationStage stage(std::make_unique<ScriptedActivity>(std::vector<Turn>{{0, 1, 0}}), dz::DiarizationOptions{},
                             nullptr, nullptr);
  Recorder r;
  stage.audio(audio(4.0), 0.0);
  stage.consume(events::WordsCommitted{{word(" a", 0.2, 0.6), word(" far", 2.5, 3.0)}}, r.emit());
  stage.consume(events::EndOfStream{}, r.emit());
  EXPECT_EQ(assigned(r.events), (std::vector<int>{1, -1}));
}

TEST(DiarizationStage, LiveStageNeverHoldsWordsAndBoundsItsQueue) {
  Gate model_free;
  Counter pushes;
  auto pool = std::make_shared<stages::WorkerPool>(1);
  auto counters = std::make_shared<dz::DiarizationCounters>();
  dz::DiarizationOptions options;
  options.max_queue_seconds = 1.0;
  auto stage = std::make_unique<dz::DiarizationStage>(
      std::make_unique<ScriptedActivity>(std::vector<Turn>{{0, 100, 0}}, 1.0,
                                         [&] {
                                           pushes.add();
                                           ASSERT_TRUE(model_free.wait()) << "the test never freed the model";
                                         }),
      options, pool, counters);
  std::mutex mutex;
  std::vector<events::Event> posted;
  stage->attach([&](std::vector<events::Event> events) {
    std::lock_guard lock(mutex);
    posted.insert(posted.end(), events.begin(), events.end());
  });
  // The model is stuck on the first chunk; four more seconds arrive.
  stage->audio(audio(0.5), 0.0);
  ASSERT_TRUE(pushes.wait_for_at_least(1));
  for (int i = 1; i <= 8; ++i) stage->audio(audio(0.5), 0.5 * i);
  // Words pass at once all the same.
  Recorder r;
  stage->consume(events::WordsCommitted{{word(" a", 0.1, 0.4)}}, r.emit());
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_TRUE(std::get<events::WordsCommitted>(r.events[0]).speakers_pending);
  // At most a second waits; the rest was dropped and counted.
  EXPECT_LE(counters->queued_samples.load(), 16000);
  EXPECT_EQ(counters->dropped_samples.load(), 6 * 8000);
  stage->consume(events::EndOfStream{}, r.emit());
  EXPECT_EQ(r.events.size(), 1u);  // EndOfStream waits for the last speakers
  model_free.open();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mutex);
    return !posted.empty() && std::holds_alternative<events::EndOfStream>(posted.back());
  }));
  std::vector<events::Event> log = r.events;
  log.insert(log.end(), posted.begin(), posted.end());
  EXPECT_EQ(assigned(log), std::vector<int>{1});
  EXPECT_EQ(counters->queued_samples.load(), 0);
}

// The registry entry over a scripted model.
dz::ModelLoader scripted_loader(std::vector<Turn> turns, dz::ModelRequest* loaded = nullptr) {
  return [turns, loaded](const dz::ModelRequest& request) -> dz::SourceFactory {
    if (loaded) *loaded = request;
    return [turns] { return std::make_unique<ScriptedActivity>(turns); };
  };
}

stages::StageChain chain_of(const std::vector<std::string>& argv, stages::Command command,
                            const std::vector<stages::StageDefinition>& registry) {
  Args args("test", "");
  stages::StageChain::declare(args, command, registry);
  args.parse(argv);
  return stages::StageChain::load(args, {.command = command, .threads = 3}, registry);
}

TEST(DiarizationRegistration, OptionsValidationAndPerStreamChoice) {
  dz::ModelRequest loaded;
  const std::vector<stages::StageDefinition> registry = {dz::stage_definition(scripted_loader({{0, 9, 0}}, &loaded))};
  Args serve("serve", "");
  stages::StageChain::declare(serve, stages::Command::kServe, registry);
  EXPECT_NE(serve.help().find("--diarization-model"), std::string::npos);
  EXPECT_NE(serve.help().find("--max-speakers"), std::string::npos);
  EXPECT_NE(serve.help().find("--diarization-workers"), std::string::npos);
  Args transcribe("transcribe", "");
  stages::StageChain::declare(transcribe, stages::Command::kTranscribe, registry);
  EXPECT_EQ(transcribe.help().find("--diarization-workers"), std::string::npos);
  Args bench("bench", "");
  stages::StageChain::declare(bench, stages::Command::kBench, registry);
  // bench diarizes its streams and scores them (bench/diarization.h); with --capacity
  // its sessions run the stage live on serve's pool, of --diarization-workers threads.
  EXPECT_NE(bench.help().find("--diarization-model"), std::string::npos);
  EXPECT_NE(bench.help().find("--diarization-chunk-ms"), std::string::npos);
  EXPECT_NE(bench.help().find("--diarization-workers"), std::string::npos);
  EXPECT_NE(std::string(error_of([&] {
                          chain_of({"--diarization-workers", "2"}, stages::Command::kBench, registry);
                        }).what())
                .find("--diarization-workers needs --diarization-model"),
            std::string::npos);

  // Off without a model; options that need one say so; bad values name the option.
  EXPECT_TRUE(chain_of({}, stages::Command::kServe, registry).empty());
  EXPECT_TRUE(chain_of({}, stages::Command::kTranscribe, registry).empty());
  EXPECT_TRUE(chain_of({}, stages::Command::kBench, registry).empty());
  EXPECT_NE(std::string(error_of([&] {
                          chain_of({"--diarization-chunk-ms", "800"}, stages::Command::kTranscribe, registry);
                        }).what())
                .find("--diarization-chunk-ms needs --diarization-model"),
            std::string::npos);
  EXPECT_NE(std::string(error_of([&] {
                          chain_of({"--diarization-model", "m.gguf", "--diarization-chunk-ms", "-1"},
                                   stages::Command::kServe, registry);
                        }).what())
                .find("--diarization-chunk-ms must be 0..60000"),
            std::string::npos);
  EXPECT_NE(std::string(error_of([&] {
                          chain_of({"--max-speakers", "2"}, stages::Command::kServe, registry);
                        }).what())
                .find("--max-speakers needs --diarization-model"),
            std::string::npos);
  const Error bad = error_of([&] {
    chain_of({"--diarization-model", "m.gguf", "--max-speakers", "5"}, stages::Command::kServe, registry);
  });
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.what()).find("--max-speakers must be 1..4"), std::string::npos);
  EXPECT_TRUE(loaded.model.empty());  // nothing loaded before every option was valid

  const stages::StageChain chain =
      chain_of({"--diarization-model", "m.gguf", "--max-speakers", "2", "--diarization-chunk-ms", "1600"},
               stages::Command::kServe, registry);
  EXPECT_EQ(loaded.model, "m.gguf");  // what the loader is asked for
  EXPECT_EQ(loaded.max_speakers, 2);
  EXPECT_EQ(loaded.chunk_ms, 1600);
  EXPECT_EQ(loaded.threads, 3);
  EXPECT_EQ(chain.names(), std::vector<std::string>{"diarization"});
  // Every stream but one whose protocol declines (Deepgram's diarize=false).
  EXPECT_EQ(chain.open({"en", {}, true}).size(), 1u);
  EXPECT_EQ(chain.open({"en", {{"diarize", "true"}}, true}).size(), 1u);
  EXPECT_TRUE(chain.open({"en", {{"diarize", "false"}}, true}).empty());
  bool has_queue_gauge = false;
  for (const stages::Metric& m : chain.metrics()) has_queue_gauge |= m.name == "earshot_diarization_queued_seconds";
  EXPECT_TRUE(has_queue_gauge);
  // bench loads it too (its files' streams: no live pool).
  EXPECT_EQ(chain_of({"--diarization-model", "m.gguf"}, stages::Command::kBench, registry).names(),
            std::vector<std::string>{"diarization"});
}

TEST(DiarizationRegistration, ALiveSessionNamesEverySpeaker) {
  // The fake ASR commits a word per 0.5 s; speaker 0 talks 0..2 s, speaker 1 2..4 s.
  const std::vector<stages::StageDefinition> registry = {dz::stage_definition(scripted_loader({{0, 2, 0}, {2, 4, 1}}))};
  const stages::StageChain chain = chain_of({"--diarization-model", "m"}, stages::Command::kServe, registry);
  session::StreamSession session(
      std::make_unique<FakeProcessor>(), nullptr, session::StreamOptions{}, [] { return 0.0; },
      chain.open({"en", {}, true}));
  for (int i = 0; i < 8; ++i) {
    session.push_audio(std::vector<float>(8000, 0.1f));
    while (session.has_work()) session.step();
  }
  session.end_of_stream();
  while (session.has_work()) session.step();
  ASSERT_TRUE(eventually([&] { return session.done(); })) << "the stream never ended";
  const std::vector<events::Event> log = session.events_since(0).events;
  EXPECT_EQ(assigned(log), (std::vector<int>{1, 1, 1, 1, 2, 2, 2, 2}));
  // Committed words are in the log before their speakers, each named once.
  size_t words = 0, named = 0;
  for (const events::Event& e : log) {
    if (const auto* c = std::get_if<events::WordsCommitted>(&e)) {
      EXPECT_TRUE(c->speakers_pending);
      words += c->words.size();
    } else if (const auto* s = std::get_if<events::SpeakersAssigned>(&e)) {
      EXPECT_EQ(s->first_word, named);
      named += s->speakers.size();
      EXPECT_LE(named, words);
    }
  }
  EXPECT_EQ(named, 8u);
}

}  // namespace
}  // namespace earshot::testing
