// The policy registry (policy/registry.h): which policies each model interface
// offers and in what order, how an unknown name is refused, that each entry
// opens its own policy over the interface with the stream's settings, and that
// an engine can validate the settings of what it offers at load.
#include "policy/registry.h"

#include <gtest/gtest.h>

#include <typeinfo>

#include "common/error.h"
#include "fake_decoder.h"
#include "policy/alignatt/alignatt_processor.h"
#include "policy/commit/revising_processor.h"
#include "policy/localagreement/local_agreement_processor.h"
#include "scripted_prompted_decoder.h"
#include "test_helpers.h"

namespace earshot::policy {
namespace {

using Names = std::vector<std::string>;

TEST(PolicyRegistry, EachModelInterfaceOffersItsPoliciesTheDefaultFirst) {
  EXPECT_EQ(policy_names<AsrDecoder>(), (Names{"alignatt", "localagreement"}));
  EXPECT_EQ(policy_names<PromptedAsrDecoder>(), (Names{"alignatt", "rolling"}));
  EXPECT_EQ(policy_names<OfflineTransducer>(), (Names{"rolling", "native"}));
  EXPECT_EQ(policy_names<StreamingTransducer>(), (Names{"native"}));
  for (const Policy<AsrDecoder>& p : policies_for<AsrDecoder>()) EXPECT_STRNE(p.summary, "");
}

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

std::unique_ptr<AsrDecoder> fake_decoder() {
  return std::make_unique<testing::FakeDecoder>(testing::english_tokenizer(),
                                                testing::FakeDecoder::from_passes({{}}, 50256));
}

TEST(PolicyRegistry, AnUnknownNameIsRefusedNamingThePoliciesThereAre) {
  EXPECT_EQ(refusal([] { open_policy("rolling", fake_decoder(), Settings{}, StreamContext{}); }),
            "unknown --policy 'rolling' (use alignatt or localagreement)");
  EXPECT_EQ(refusal([] { throw_unknown_policy("x", {"a", "b", "c"}); }), "unknown --policy 'x' (use a, b or c)");
}

TEST(PolicyRegistry, EachNameOpensItsOwnPolicy) {
  const std::unique_ptr<OnlineProcessor> alignatt = open_policy("alignatt", fake_decoder(), Settings{}, {});
  const std::unique_ptr<OnlineProcessor> agreement = open_policy("localagreement", fake_decoder(), Settings{}, {});
  EXPECT_NE(dynamic_cast<AlignAttProcessor*>(alignatt.get()), nullptr);
  EXPECT_NE(dynamic_cast<LocalAgreementProcessor*>(agreement.get()), nullptr);
}

// A prompted decoder that records each prefill's request and ends at once.
struct Recording : scripted::ScriptedPromptedDecoder {
  int encode(std::span<const float> pcm) override { return static_cast<int>(pcm.size() / 1280); }
  int32_t prefill(const PromptedRequest& request) override {
    requests.push_back(request);
    frames.assign(1, 0);
    return scripted::kEnd;
  }
  int32_t step(int32_t) override { return scripted::kEnd; }
};

TEST(PolicyRegistry, AStreamsKeytermsFollowTheConfiguredContextOfAPromptedPolicy) {
  for (const std::string name : {"alignatt", "rolling"}) {
    SCOPED_TRACE(name);
    auto decoder = std::make_unique<Recording>();
    Recording* seen = decoder.get();
    Settings settings;
    settings.prompted_alignatt.context = "Meeting notes.";
    StreamContext stream;
    stream.language = "en";
    stream.keyterms.terms = {{"Kubernetes", 1.0}};
    std::unique_ptr<OnlineProcessor> p = open_policy<PromptedAsrDecoder>(name, std::move(decoder), settings, stream);
    if (name == "alignatt") {
      EXPECT_NE(dynamic_cast<PromptedAlignAttProcessor*>(p.get()), nullptr);
    } else {
      EXPECT_NE(dynamic_cast<commit::RevisingProcessor*>(p.get()), nullptr);
    }
    const std::vector<float> audio(3 * 16000, 0.1f);
    p->insert_audio(audio, 3.0);
    p->process(true);
    ASSERT_FALSE(seen->requests.empty());
    const std::string& context = seen->requests.front().context;
    EXPECT_EQ(context, name == "alignatt" ? "Meeting notes.\nKubernetes" : "Kubernetes");
    EXPECT_EQ(seen->requests.front().language, "en");
  }
}

TEST(PolicyRegistry, AnEngineValidatesOnlyTheSettingsOfWhatItOffers) {
  Settings settings;
  settings.alignatt.beams = 0;
  EXPECT_NE(refusal([&] { validate_policies<AsrDecoder>(settings); }), "");
  EXPECT_NO_THROW(validate_policies<StreamingTransducer>(settings));
  EXPECT_NO_THROW(validate_policies<PromptedAsrDecoder>(settings));
  settings = {};
  settings.prompted_rolling.unfixed_tokens = -1;
  EXPECT_NE(refusal([&] { validate_policies<PromptedAsrDecoder>(settings); }), "");
  EXPECT_NO_THROW(validate_policies<AsrDecoder>(settings));
}

}  // namespace
}  // namespace earshot::policy
