// The transducer family's decoding options through the engine boundary: a
// stream's keyterms become boosted phrases (a phrase with a large bonus fills
// the words; none changes nothing; a phrase the vocabulary cannot spell is named
// in a warning), and --transducer-beams decodes with a beam in every policy.
#include <gtest/gtest.h>

#include "../model/model_test_util.h"
#include "audio/wav.h"
#include "engine/families.h"
#include "engine/transducer/options.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/random_model.h"
#include "model/transducer/decoder.h"

namespace earshot::engine {
namespace {

using whisper::testing::TempDir;

// jfk.wav's first 4 s: enough for several windows and chunks, quick on a random model.
std::vector<float> jfk() {
  std::vector<float> pcm = audio::load_wav_file(whisper::testing::shared_dir() / "data" / "jfk.wav");
  pcm.resize(std::min<size_t>(pcm.size(), 4 * 16000));
  return pcm;
}

ModelSpec model_spec(const TempDir& dir, bool streaming) {
  fastconformer::RandomModelOptions options;
  options.seed = 3;
  options.streaming = streaming;
  const auto path = dir / (streaming ? "nemotron-small.gguf" : "m.bin");
  if (streaming)
    fastconformer::write_gguf(path, fastconformer::random_model(options));
  else
    fastconformer::write_legacy(path, fastconformer::random_model(options));
  ModelSpec spec;
  spec.path = path;
  spec.runtime.threads = 1;
  return spec;
}

std::string transcribe(const Engine& engine, const std::string& policy, const Keyterms& keyterms,
                       std::vector<std::string>* warnings = nullptr) {
  StreamRequest request;
  request.policy = policy;
  request.keyterms = keyterms;
  request.on_warning = [warnings](const std::string& w) {
    if (warnings) warnings->push_back(w);
  };
  auto processor = engine.open_stream(request);
  const std::vector<float> pcm = jfk();
  std::string text;
  for (size_t at = 0; at < pcm.size(); at += 8000) {
    const size_t n = std::min<size_t>(8000, pcm.size() - at);
    processor->insert_audio(std::span<const float>(pcm.data() + at, n), static_cast<double>(at + n) / 16000);
    for (const Word& w : processor->process().committed) text += w.text;
  }
  for (const Word& w : processor->finish().committed) text += w.text;
  return text;
}

// A word-start piece of the model whose text the plain transcript does not contain.
std::string absent_word(const ModelSpec& spec, const std::string& plain) {
  const auto model = fastconformer::Model::load(spec.path);
  for (const std::string& piece : model->pieces()) {
    if (!transducer::piece_starts_word(piece)) continue;
    const std::string word = transducer::piece_text(piece, true);
    if (word.size() >= 2 && plain.find(word) == std::string::npos &&
        std::all_of(word.begin(), word.end(), [](unsigned char c) { return std::isalpha(c); }))
      return word;
  }
  return "";
}

size_t count(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

TEST(TransducerKeyterms, ABoostedPhraseReachesEveryPolicysDecoding) {
  TempDir dir("transducer-keyterms");
  for (bool streaming : {false, true}) {
    ModelSpec spec = model_spec(dir, streaming);
    spec.policies.keyterm_bonus = 40;  // far above any gap: the phrase everywhere
    const auto engine = load(spec);
    const std::vector<std::string> policies =
        streaming ? std::vector<std::string>{"native"} : std::vector<std::string>{"native", "rolling"};
    for (const std::string& policy : policies) {
      SCOPED_TRACE(policy + (streaming ? " streaming" : " offline"));
      const std::string plain = transcribe(*engine, policy, {});
      ASSERT_FALSE(plain.empty());
      const std::string word = absent_word(spec, plain);
      ASSERT_FALSE(word.empty());
      Keyterms keyterms;
      keyterms.add(word);
      const std::string boosted = transcribe(*engine, policy, keyterms);
      EXPECT_GE(count(boosted, word), 3u) << boosted;
      // No keyterms: exactly the model's own words.
      EXPECT_EQ(transcribe(*engine, policy, Keyterms{}), plain);
    }
  }
}

TEST(TransducerKeyterms, APhraseNoPiecesSpellIsNamedAndChangesNothing) {
  TempDir dir("transducer-keyterms");
  const ModelSpec spec = model_spec(dir, false);
  const auto engine = load(spec);
  Keyterms keyterms;
  keyterms.add("\xE2\x98\x83\xE2\x98\x83");  // two snowmen: no piece of an English vocabulary
  std::vector<std::string> warnings;
  EXPECT_EQ(transcribe(*engine, "native", keyterms, &warnings), transcribe(*engine, "native", {}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("not boosted"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("\xE2\x98\x83"), std::string::npos) << warnings[0];
}

TEST(TransducerKeyterms, TheBeamOptionDecodesEveryPolicyWithABeam) {
  TempDir dir("transducer-keyterms");
  for (bool streaming : {false, true}) {
    ModelSpec spec = model_spec(dir, streaming);
    const std::string greedy = transcribe(*load(spec), "native", {});
    spec.options<TransducerOptions>().beams = 1;
    EXPECT_EQ(transcribe(*load(spec), "native", {}), greedy);  // 1 is greedy
    spec.options<TransducerOptions>().beams = 4;
    const auto engine = load(spec);
    const std::string beam = transcribe(*engine, "native", {});
    EXPECT_FALSE(beam.empty());
    if (!streaming) {
      EXPECT_FALSE(transcribe(*engine, "rolling", {}).empty());
    }
  }
  // A beam option with a model of another family is refused.
  ModelSpec other;
  other.path = "whisper.bin";
  other.options<TransducerOptions>().beams = 2;
  std::string refusal;
  for (const Family& family : families())
    if (family.name == "transducer") refusal = family.foreign_request(other, "a Whisper model");
  EXPECT_NE(refusal.find("--transducer-beams 2"), std::string::npos) << refusal;
}

}  // namespace
}  // namespace earshot::engine
