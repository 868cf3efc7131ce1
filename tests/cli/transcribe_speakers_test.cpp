// `earshot transcribe` with a diarization stage (the registry's chain, as the
// command opens it for a file): the CLI hands every chunk's audio to the stages,
// the transcript's words get the speakers SpeakersAssigned names, and txt, json,
// srt and vtt show them.
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <fstream>

#include "../session/fakes.h"
#include "../stages/scripted_activity.h"
#include "audio/wav.h"
#include "cli/transcribe.h"
#include "model/sortformer/random_model.h"
#include "model/sortformer/stream.h"
#include "stages/diarization/assign.h"
#include "stages/diarization/registration.h"
#include "stages/diarization/sortformer/sortformer_source.h"

namespace earshot::cli {
namespace {

namespace dz = stages::diarization;
using earshot::testing::FakeProcessor;
using earshot::testing::ScriptedActivity;
using earshot::testing::Turn;

Transcript run() {
  const std::vector<stages::StageDefinition> registry = {
      dz::stage_definition([](const dz::ModelRequest&) -> dz::SourceFactory {
        return [] { return std::make_unique<ScriptedActivity>(std::vector<Turn>{{0, 1.5, 0}, {1.5, 9, 1}}); };
      })};
  Args args("transcribe", "");
  stages::StageChain::declare(args, stages::Command::kTranscribe, registry);
  args.parse({"--diarization-model", "scripted"});
  const stages::StageChain chain = stages::StageChain::load(args, {.command = stages::Command::kTranscribe}, registry);
  const std::vector<std::unique_ptr<stages::Stage>> owned = chain.open({"en", {}, false});
  std::vector<stages::Stage*> stages;
  for (const auto& s : owned) stages.push_back(s.get());
  FakeProcessor processor;
  const std::vector<float> pcm(16000 * 3, 0.1f);
  return transcribe(processor, pcm, TranscribeOptions{}, {}, stages, false);
}

TEST(TranscribeSpeakers, EveryFormatShowsWhoSpoke) {
  const Transcript t = run();
  ASSERT_EQ(t.words.size(), 6u);
  for (size_t i = 0; i < t.words.size(); ++i) EXPECT_EQ(t.words[i].speaker, i < 3 ? 1 : 2) << i;
  EXPECT_EQ(format_transcript(t, "txt", "a.wav"), "[S1] w100 w100 w100\n[S2] w100 w100 w100\n");
  EXPECT_NE(format_transcript(t, "json", "a.wav").find("\"speaker\":2"), std::string::npos);
  EXPECT_EQ(format_transcript(t, "vtt", "a.wav"),
            "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\n<v Speaker 1>w100 w100 w100\n\n"
            "00:00:01.500 --> 00:00:03.000\n<v Speaker 2>w100 w100 w100\n\n");
  EXPECT_NE(format_transcript(t, "srt", "a.wav").find("[S2] w100 w100 w100"), std::string::npos);
  // Speaker turns as NIST RTTM (what earshot-der and md-eval.pl score), named by the file's stem.
  EXPECT_EQ(format_transcript(t, "rttm", "/talks/my talk.wav"),
            "SPEAKER my_talk 1 0.000 1.500 <NA> <NA> S1 <NA> <NA>\n"
            "SPEAKER my_talk 1 1.500 1.500 <NA> <NA> S2 <NA> <NA>\n");
}

// The registry's own diarization line with a generated Sortformer (small
// dimensions, random weights): every committed word gets the speaker the rule
// finds in the frames sortformer::Stream gives for the same audio and settings
// on its own, and the words are those of the run without diarization.
TEST(TranscribeSpeakers, TheRegistryLineDiarizesWithASortformerModel) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "earshot_transcribe_speakers";
  std::filesystem::create_directories(dir);
  const std::filesystem::path model_path = dir / "sortformer.gguf";
  sortformer::write_random_model(model_path, {.real = false, .seed = 5});
  const std::vector<float> pcm = audio::load_wav_file(std::filesystem::path(EARSHOT_SHARED_DIR) / "data/jfk.wav");

  Args args("transcribe", "");
  stages::StageChain::declare(args, stages::Command::kTranscribe);
  args.parse({"--diarization-model", model_path.string(), "--diarization-chunk-ms", "640", "--max-speakers", "3"});
  const stages::StageChain chain =
      stages::StageChain::load(args, {.command = stages::Command::kTranscribe, .threads = 1});
  ASSERT_EQ(chain.names(), std::vector<std::string>{"diarization"});
  const std::vector<std::unique_ptr<stages::Stage>> owned = chain.open({"en", {}, false});
  std::vector<stages::Stage*> chained;
  for (const auto& s : owned) chained.push_back(s.get());
  FakeProcessor diarized_asr, plain_asr;
  const Transcript t = transcribe(diarized_asr, pcm, TranscribeOptions{}, {}, chained, false);
  const Transcript plain = transcribe(plain_asr, pcm, TranscribeOptions{}, {}, {}, false);

  // The same model and settings on their own.
  const std::shared_ptr<const sortformer::Model> model = sortformer::Model::load(model_path);
  dz::ModelRequest request{.model = model_path.string(), .threads = 1, .chunk_ms = 640, .max_speakers = 3};
  const sortformer::StreamOptions options = dz::sortformer_stream_options(request);
  EXPECT_EQ(options.chunk_frames, 8);
  EXPECT_EQ(options.max_speakers, 3);
  sortformer::Stream stream(*model, options);
  stream.push(pcm);
  stream.finish();
  std::deque<dz::ActivityFrame> frames;
  for (const sortformer::FrameActivity& f : stream.take_frames()) {
    dz::ActivityFrame a{f.start, f.end, {}};
    for (int k = 0; k < dz::kMaxSpeakers; ++k) a.prob[k] = f.prob[k];
    frames.push_back(a);
  }
  ASSERT_GT(frames.size(), 130u);  // 11 s in 80 ms frames
  dz::SpeakerRule rule;
  rule.max_speakers = 3;

  ASSERT_EQ(t.words.size(), plain.words.size());
  ASSERT_GE(t.words.size(), 20u);
  int known = 0;
  for (size_t i = 0; i < t.words.size(); ++i) {
    EXPECT_EQ(t.words[i].text, plain.words[i].text) << i;
    const int expected = dz::speaker_of(t.words[i].start, t.words[i].end, frames, rule);
    EXPECT_EQ(t.words[i].speaker, expected) << "word " << i << " at " << t.words[i].start;
    known += expected > 0;
  }
  EXPECT_GT(known, 0) << "the random model never crosses the activity threshold: nothing was checked";
}

TEST(TranscribeSpeakers, TheSortformerLoaderNamesWhatIsWrong) {
  const auto message = [](const dz::ModelRequest& request) {
    try {
      dz::sortformer_loader()(request);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({.model = "/nonexistent/sf.gguf"}).find("--diarization-model: no file at /nonexistent/sf.gguf"),
            std::string::npos);
  const std::string unknown = message({.model = "sortformer-xl"});
  EXPECT_NE(unknown.find("unknown diarization model 'sortformer-xl'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("transcribe.cpp/diar_streaming_sortformer_4spk-v2.1-q8_0"), std::string::npos) << unknown;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "earshot_transcribe_speakers";
  std::filesystem::create_directories(dir);
  const std::filesystem::path not_a_model = dir / "not-a-model.gguf";
  { std::ofstream(not_a_model) << "<html>not found</html>"; }
  const std::string bad = message({.model = not_a_model.string()});
  EXPECT_EQ(bad.rfind("--diarization-model: ", 0), 0u) << bad;
  EXPECT_NE(bad.find(not_a_model.string()), std::string::npos) << bad;
  // More speakers than the model tells apart: the Stream's check (the only one), with the option and the file.
  const std::filesystem::path two = dir / "sortformer-2spk.gguf";
  sortformer::write_random_model(two, {.real = false, .seed = 5, .speakers = 2});
  EXPECT_EQ(message({.model = two.string(), .threads = 1, .max_speakers = 3}),
            "--max-speakers 3: " + two.string() + " tells at most 2 speakers apart");
  EXPECT_EQ(message({.model = two.string(), .threads = 1, .max_speakers = 2}), "no error");
}

}  // namespace
}  // namespace earshot::cli
