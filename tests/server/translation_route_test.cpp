// /asr with translation: the server's stages hook given a translation stage over
// the scripted fake LLM (tests/stages/fake_llm.h); a real WebSocket client sees
// `translation` on lines and `buffer_translation`, as WhisperLiveKit sends them.
#include <gtest/gtest.h>

#include "../stages/fake_llm.h"
#include "stages/translation/registration.h"
#include "stages/translation/translation_stage.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;
namespace tr = stages::translation;

class AsrTranslation : public ServerFixture {
 protected:
  void SetUp() override {
    model_ = std::make_shared<FakeModel>(word_for_word(2));
    tr::CalibrationRegistry registry;
    registry.add({"hy-mt2-1.8b", "en", "de", {{9, 5}, {13, 1}}, {}});
    tr::TranslationOptions options;
    options.commit.mode = tr::CommitMode::kArgmax;
    options.redraft_source_tokens = 1;
    service_ = std::make_shared<tr::TranslationService>(model_, registry, 1, options);
    server::ServerConfig config;
    config.pcm_input = true;
    config.stages = {"translation"};
    server::ServerHooks hooks = fake_hooks();
    // The stage as the registry loads it (no default target: only where a client asks).
    auto loaded = std::make_shared<tr::LoadedTranslation>(tr::TranslationSetup{service_, "", nullptr});
    hooks.make_stages = [loaded](const stages::StreamRequest& request) {
      std::vector<std::unique_ptr<stages::Stage>> chain;
      if (auto stage = loaded->open(request)) chain.push_back(std::move(stage));
      return chain;
    };
    start(config, hooks);
  }
  std::shared_ptr<FakeModel> model_;
  std::shared_ptr<tr::TranslationService> service_;
};

TEST_F(AsrTranslation, LinesCarryTheTranslationAndTheDraftIsTheBuffer) {
  WsClient client(port_, "/asr?language=en&target_language=de");
  ASSERT_TRUE(client.read());  // config
  // The first phrase and its pause; the stream goes on until its translation shows.
  client.send_pcm(to_s16(concat({tone(1.0, 0.1f), silence(6.0)})), 3200);
  std::vector<json> messages;
  bool seen_early = false;
  while (!seen_early) {
    std::optional<json> m = client.read();
    ASSERT_TRUE(m) << "closed before the first translation";
    messages.push_back(*m);
    const json& lines = (*m)["lines"];
    seen_early = !lines.empty() && lines[0].contains("translation");
  }
  client.send_pcm(to_s16(tone(1.0, 0.3f)), 3200);
  client.send_end();
  for (json& m : client.read_until_stop()) messages.push_back(std::move(m));
  ASSERT_GE(messages.size(), 2u);
  const json& final_update = messages[messages.size() - 2];
  ASSERT_EQ(final_update["lines"].size(), 3u);
  EXPECT_EQ(final_update["lines"][0]["translation"], "W100 W100");
  EXPECT_FALSE(final_update["lines"][1].contains("translation"));  // the silence line: none
  EXPECT_EQ(final_update["lines"][2]["translation"], "W286 W300");
  EXPECT_EQ(final_update["buffer_translation"], "");
  // Growing, never shrinking (the fake's finals equal what it committed).
  std::map<size_t, std::string> last;
  for (size_t i = 0; i + 2 < messages.size(); ++i) {
    const json& lines = messages[i]["lines"];
    for (size_t l = 0; l < lines.size(); ++l) {
      if (!lines[l].contains("translation")) continue;
      const std::string t = lines[l]["translation"];
      EXPECT_TRUE(t.starts_with(last[l])) << last[l] << " -> " << t;
      last[l] = t;
    }
  }
  client.close();
  EXPECT_TRUE(wait_idle());
}

TEST_F(AsrTranslation, NoTargetLanguageNoTranslation) {
  WsClient client(port_, "/asr?language=en");
  ASSERT_TRUE(client.read());
  client.send_pcm(to_s16(two_phrases()), 3200);
  client.send_end();
  std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  for (const json& m : messages) {
    for (const json& line : m.value("lines", json::array())) EXPECT_FALSE(line.contains("translation"));
    if (m.contains("buffer_translation")) {
      EXPECT_EQ(m["buffer_translation"], "");
    }
  }
  EXPECT_EQ(model_->decode_calls, 0);
  client.close();
  EXPECT_TRUE(wait_idle());
}

// Which streams the loaded translation serves: on serve only those whose protocol
// has target_language (WhisperLiveKit's; empty = --target-language), never
// Deepgram's or the file routes'; on transcribe every file.
TEST_F(AsrTranslation, OnServeOnlyStreamsWhoseProtocolAsksAreTranslated) {
  const tr::LoadedTranslation serve(tr::TranslationSetup{service_, "de", nullptr});
  EXPECT_EQ(serve.open({"en", {}, true}), nullptr);
  EXPECT_EQ(serve.open({"en", {}, false}), nullptr);
  EXPECT_NE(serve.open({"en", {{"target_language", ""}}, true}), nullptr);
  EXPECT_NE(serve.open({"en", {{"target_language", "de"}}, false}), nullptr);
  const tr::LoadedTranslation no_default(tr::TranslationSetup{service_, "", nullptr});
  EXPECT_EQ(no_default.open({"en", {{"target_language", ""}}, true}), nullptr);
  const tr::LoadedTranslation transcribe(tr::TranslationSetup{service_, "de", nullptr}, stages::Command::kTranscribe);
  EXPECT_NE(transcribe.open({"en", {{"target_language", "de"}}, false}), nullptr);
}

}  // namespace
}  // namespace earshot::testing
