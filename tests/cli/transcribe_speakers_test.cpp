// `earshot transcribe` with a diarization stage (the registry's chain, as the
// command opens it for a file): the CLI hands every chunk's audio to the stages,
// the transcript's words get the speakers SpeakersAssigned names, and txt, json,
// srt and vtt show them.
#include <gtest/gtest.h>

#include "../session/fakes.h"
#include "../stages/scripted_activity.h"
#include "cli/transcribe.h"
#include "stages/diarization/registration.h"

namespace earshot::cli {
namespace {

namespace dz = stages::diarization;
using earshot::testing::FakeProcessor;
using earshot::testing::ScriptedActivity;
using earshot::testing::Turn;

Transcript run() {
  const std::vector<stages::StageDefinition> registry = {
      dz::stage_definition([](const std::string&, int) -> dz::SourceFactory {
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
}

}  // namespace
}  // namespace earshot::cli
