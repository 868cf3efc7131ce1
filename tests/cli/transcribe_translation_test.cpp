// `earshot transcribe --translate-to`: the CLI's transcription loop with a
// synchronous translation stage over the scripted fake LLM; every format and
// the events file carry the translation.
#include <gtest/gtest.h>

#include "../session/fakes.h"
#include "../stages/fake_llm.h"
#include "cli/transcribe.h"
#include "stages/translation/translation_stage.h"

namespace earshot::cli {
namespace {

namespace tr = stages::translation;
using earshot::testing::FakeModel;
using earshot::testing::FakeProcessor;
using earshot::testing::word_for_word;

Transcript run(bool translate) {
  auto model = std::make_shared<FakeModel>(word_for_word(2));
  tr::CalibrationRegistry registry;
  registry.add({"hy-mt2-1.8b", "en", "de", {{9, 5}}, {}});
  tr::TranslationOptions o;
  o.target_language = "de";
  o.commit.mode = tr::CommitMode::kArgmax;
  tr::TranslationService service(model, registry, 1, o);
  std::unique_ptr<stages::Stage> stage = service.make_synchronous_stage("en", o);
  FakeProcessor processor;
  std::vector<float> pcm(16000 * 3, 0.1f);
  TranscribeOptions options;
  return transcribe(processor, pcm, options, {}, translate ? stage.get() : nullptr);
}

TEST(TranscribeTranslation, EveryFormatCarriesTheTranslation) {
  const Transcript t = run(true);
  ASSERT_TRUE(t.translated);
  ASSERT_EQ(t.translations.size(), 1u);
  EXPECT_EQ(t.translations[0].source, "w100 w100 w100 w100 w100 w100");
  EXPECT_EQ(t.translations[0].translation, "W100 W100 W100 W100 W100 W100");
  EXPECT_EQ(format_transcript(t, "txt", "a.wav"), "w100 w100 w100 w100 w100 w100\nW100 W100 W100 W100 W100 W100\n");
  const std::string json = format_transcript(t, "json", "a.wav");
  EXPECT_NE(json.find(R"("translation":"W100 W100 W100 W100 W100 W100")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("translation_segments":[{"start":0.000,"end":3.000,"source":)"), std::string::npos) << json;
  EXPECT_NE(format_transcript(t, "srt", "a.wav").find("w100 w100 w100 w100 w100 w100\nW100 W100 W100"),
            std::string::npos);
  EXPECT_NE(format_transcript(t, "vtt", "a.wav").find("\nW100 W100"), std::string::npos);
  // The events carry what was committed and drafted when.
  std::string committed;
  for (const Emission& e : t.emissions) {
    committed += e.translation_committed;
    EXPECT_NE(emission_json(e).find("\"translation_draft\":"), std::string::npos);
  }
  EXPECT_EQ(committed, "W100 W100 W100 W100 W100 W100");
}

TEST(TranscribeTranslation, WithoutTranslationNothingChanges) {
  const Transcript t = run(false);
  EXPECT_FALSE(t.translated);
  EXPECT_EQ(format_transcript(t, "txt", "a.wav"), "w100 w100 w100 w100 w100 w100\n");
  for (const Emission& e : t.emissions) EXPECT_EQ(emission_json(e).find("translation"), std::string::npos);
}

}  // namespace
}  // namespace earshot::cli
