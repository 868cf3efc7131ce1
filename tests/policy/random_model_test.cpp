// End to end on a generated random-weight Whisper model (small dimensions):
// the policies over the real engine must be deterministic, append-only, ordered
// in time, independent of how the audio is chunked for the same pass schedule,
// and identical when many sessions share the model across threads.
//
// Which chunkings must agree: AlignAtt and LocalAgreement decide from the
// audio present at each pass, so two feeds agree when their passes see the same
// audio. Feeding 0.1 s chunks with a pass every 1 s equals feeding 1 s chunks
// with a pass after each, as long as the buffer never exceeds audio_max_len
// (30 s; trimming drops whole chunks, so beyond it chunk size matters).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "../engine/engine_test_util.h"
#include "audio/audio.h"
#include "cli/transcribe.h"
#include "common/error.h"

namespace earshot::cli {
namespace {

const std::string kShared = EARSHOT_SHARED_DIR;

// The random model behind the engine, loaded once per beam width.
std::shared_ptr<const engine::Engine> random_engine(int beams) {
  static std::map<int, std::shared_ptr<const engine::Engine>> engines;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  auto& e = engines[beams];
  if (!e) {
    engine::ModelSpec spec;
    spec.runtime.threads = 1;
    spec.policies.alignatt.beams = beams;
    e = engine::testing::load_random_engine(whisper::testing::pipeline_spec(/*seed=*/7), "policy-random", spec);
  }
  return e;
}

// The first 4 s of a file: long enough for several passes, short enough to run in seconds.
std::vector<float> clip(const std::string& file) {
  std::vector<float> pcm = audio::load_file(kShared + file);
  pcm.resize(std::min<size_t>(pcm.size(), 4 * 16000));
  return pcm;
}
const std::vector<float>& jfk() {
  static const std::vector<float> pcm = clip("/data/jfk.wav");
  return pcm;
}

struct RunOptions {
  TranscribeOptions feed;
  std::string policy;
  int beams = 1;
};

RunOptions options(const std::string& policy) {
  RunOptions o;
  o.policy = policy;
  o.feed.chunk_seconds = 1.0;
  return o;
}

std::unique_ptr<OnlineProcessor> open_stream(const RunOptions& o) {
  engine::StreamRequest request;
  request.policy = o.policy;
  request.language = "en";
  return random_engine(o.beams)->open_stream(request);
}

Word word(const char* text, double start, double end) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  return w;
}

Transcript run(const std::vector<float>& pcm, const RunOptions& o) {
  auto p = open_stream(o);
  return transcribe(*p, pcm, o.feed);
}

void expect_same(const std::vector<Word>& a, const std::vector<Word>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].text, b[i].text) << i;
    EXPECT_EQ(a[i].start, b[i].start) << i;
    EXPECT_EQ(a[i].end, b[i].end) << i;
  }
}

void expect_ordered_within(const Transcript& t, double duration) {
  std::vector<Word> appended;
  for (const Emission& e : t.emissions) appended.insert(appended.end(), e.committed.begin(), e.committed.end());
  expect_same(appended, t.words);  // the transcript is exactly the emissions, appended
  double last_end = 0;
  for (const Word& w : t.words) {
    EXPECT_GE(w.start, last_end) << w.text;
    EXPECT_GE(w.end, w.start) << w.text;
    EXPECT_LE(w.end, duration + 1e-9) << w.text;
    last_end = w.end;
  }
}

class RandomModel : public ::testing::TestWithParam<std::string> {};

TEST_P(RandomModel, DeterministicOrderedAndAppendOnly) {
  const Transcript a = run(jfk(), options(GetParam()));
  const Transcript b = run(jfk(), options(GetParam()));
  ASSERT_FALSE(a.words.empty()) << "the random model should say something";
  expect_same(a.words, b.words);
  expect_ordered_within(a, jfk().size() / 16000.0);
  EXPECT_EQ(a.emissions.size(), 5u);  // 4 one-second chunks + finish
}

TEST_P(RandomModel, SamePassScheduleGivesTheSameResultForAnyChunkSize) {
  const Transcript coarse = run(jfk(), options(GetParam()));
  // 0.1 s chunks, a pass after every tenth one: the passes see the same audio.
  auto p = open_stream(options(GetParam()));
  std::vector<Word> fine;
  const size_t chunk = 1600;
  for (size_t at = 0, i = 1; at < jfk().size(); at += chunk, ++i) {
    const size_t n = std::min(chunk, jfk().size() - at);
    p->insert_audio(std::span<const float>(jfk().data() + at, n), (at + n) / 16000.0);
    if (i % 10 == 0 || at + n == jfk().size()) {
      auto r = p->process().committed;
      fine.insert(fine.end(), r.begin(), r.end());
    }
  }
  auto r = p->finish().committed;
  fine.insert(fine.end(), r.begin(), r.end());
  expect_same(fine, coarse.words);
}

TEST_P(RandomModel, ParallelSessionsOnOneModelMatchSequentialRuns) {
  const std::vector<float> other = clip("/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav");
  const std::vector<const std::vector<float>*> inputs = {&jfk(), &other, &other};
  std::vector<Transcript> alone;
  for (const auto* pcm : inputs) alone.push_back(run(*pcm, options(GetParam())));
  std::vector<Transcript> together(inputs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inputs.size(); ++i) {
    threads.emplace_back([&, i] { together[i] = run(*inputs[i], options(GetParam())); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < inputs.size(); ++i) expect_same(together[i].words, alone[i].words);
}

INSTANTIATE_TEST_SUITE_P(Policies, RandomModel, ::testing::Values("alignatt", "localagreement"));

TEST(RandomModelBeams, BeamSearchIsDeterministic) {
  RunOptions o = options("alignatt");
  o.beams = 3;
  const Transcript a = run(jfk(), o);
  const Transcript b = run(jfk(), o);
  ASSERT_FALSE(a.words.empty());
  expect_same(a.words, b.words);
  expect_ordered_within(a, jfk().size() / 16000.0);
}

TEST(Formats, SrtVttJsonTxt) {
  Transcript t;
  t.language = "en";
  t.words = {word(" Hello", 0.5, 1.0), word(" world.", 1.0, 1.25), word(" Again", 61.0, 61.5)};
  EXPECT_EQ(format_transcript(t, "txt", "a.wav"), "Hello world. Again\n");
  EXPECT_EQ(format_transcript(t, "srt", "a.wav"),
            "1\n00:00:00,500 --> 00:00:01,250\nHello world.\n\n2\n00:01:01,000 --> 00:01:01,500\nAgain\n\n");
  EXPECT_EQ(format_transcript(t, "vtt", "a.wav"),
            "WEBVTT\n\n00:00:00.500 --> 00:00:01.250\nHello world.\n\n00:01:01.000 --> 00:01:01.500\nAgain\n\n");
  EXPECT_EQ(format_transcript(t, "json", "a\"b.wav"),
            "{\"file\":\"a\\\"b.wav\",\"language\":\"en\",\"text\":\"Hello world. Again\",\"words\":[{\"text\":\" "
            "Hello\",\"start\":0.500,\"end\":1.000},{\"text\":\" world.\",\"start\":1.000,\"end\":1.250},{\"text\":\" "
            "Again\",\"start\":61.000,\"end\":61.500}]}\n");
  Emission e;
  e.emission_time = 1.5;
  e.audio_time = 2;
  e.committed = {word(" Hi", 0.25, 0.5)};
  e.provisional = {word(" there", 0.5, 0.6)};
  EXPECT_EQ(emission_json(e),
            "{\"emission_time\":1.500,\"audio_time\":2.000,\"committed\":[{\"text\":\" "
            "Hi\",\"start\":0.250,\"end\":0.500}],\"provisional\":\"there\"}");
  EXPECT_THROW(format_transcript(t, "doc", "a.wav"), Error);
}

}  // namespace
}  // namespace earshot::cli
