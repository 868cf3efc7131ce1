// The streaming transducer's reference workload (src/bench/transducer_reference.h):
// spelling the reference in the model's pieces, when each piece is emitted and
// how far a TDT step skips, and a random-weight streaming model steered through
// the engine and the native policy: the spelt reference comes out exactly, each
// word no earlier than its estimated end, with one joint step per frame and piece.
#include "bench/transducer_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "../model/model_test_util.h"
#include "audio/audio.h"
#include "common/error.h"
#include "engine/families.h"
#include "engine/transducer/options.h"
#include "model/fastconformer/model_writer.h"
#include "model/fastconformer/random_model.h"
#include "model/transducer/decoder.h"
#include "vad/vad.h"

namespace earshot::bench {
namespace {

// SentencePiece-style pieces: "▁" starts a word.
class FakePieces : public TokenPieces {
 public:
  explicit FakePieces(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::string text(int token, bool first_in_text) const override {
    return transducer::piece_text(pieces_.at(token), first_in_text);
  }
  bool starts_word(int token) const override { return transducer::piece_starts_word(pieces_.at(token)); }
  std::string language_tag(int token) const override { return transducer::language_tag(pieces_.at(token)); }
  int size() const override { return static_cast<int>(pieces_.size()); }

 private:
  std::vector<std::string> pieces_;
};

const std::string kSp = "\xE2\x96\x81";

// <unk>=0 ▁an=1 d=2 ▁a=3 n=4 ▁=5 s=6 o=7 <en-US>=8
FakePieces vocabulary() { return FakePieces({"<unk>", kSp + "an", "d", kSp + "a", "n", kSp, "s", "o", "<en-US>"}); }

std::vector<int> spelt(const std::string& word, int* stand_ins = nullptr) {
  const FakePieces pieces = vocabulary();
  TransducerReference r({{word, 0, 1}}, std::make_shared<SegmentClock>());
  r.bind(pieces, pieces.size(), {}, 0.08);
  if (stand_ins) *stand_ins = r.stand_ins();
  return r.tokens();
}

TEST(TransducerReference, SpellsAWordInTheFewestPiecesAWordStartFirst) {
  EXPECT_EQ(spelt("and"), (std::vector<int>{1, 2}));    // ▁an d, not ▁a n d
  EXPECT_EQ(spelt("so"), (std::vector<int>{5, 6, 7}));  // ▁ s o: the bare word start, then continuations
  int stand_ins = -1;
  EXPECT_EQ(spelt("And,", &stand_ins), (std::vector<int>{1, 2}));  // folded: lower case, letters only
  EXPECT_EQ(stand_ins, 0);
}

TEST(TransducerReference, CountsTheCharactersNoPieceSpells) {
  int stand_ins = -1;
  const std::vector<int> z = spelt("zaz", &stand_ins);
  EXPECT_EQ(z.size(), 3u);  // a stand-in word start for z, then stand-ins for a and z
  EXPECT_EQ(stand_ins, 3);
  const std::vector<int> x = spelt("dz", &stand_ins);  // ▁ d, then a stand-in for z
  EXPECT_EQ(x.size(), 3u);
  EXPECT_EQ(stand_ins, 1);
}

TEST(TransducerReference, RnntEmitsEachPieceAtTheFrameHoldingItsEndAndBlanksElsewhere) {
  const FakePieces pieces = vocabulary();
  auto clock = std::make_shared<SegmentClock>();
  clock->start = 1.0;  // the segment began 1 s into the stream
  // "and" over 1.0-1.4 s: ▁an ends at 1.2 s (frame 2 of the segment), d at 1.4 s (frame 4).
  TransducerReference r({{"and", 1.0, 1.4}}, clock);
  r.bind(pieces, pieces.size(), {}, 0.08);
  const int blank = pieces.size();
  std::vector<int> chosen;
  for (int frame = 0; frame < 7; ++frame) chosen.push_back(r.choose(frame).token);
  EXPECT_EQ(chosen, (std::vector<int>{blank, blank, 1, blank, 2, blank, blank}));
  EXPECT_EQ(r.emitted(), 2u);
  EXPECT_EQ(r.steps(), 7);
}

TEST(TransducerReference, TdtSkipsToTheNextPieceDueAndStaysForOneDueInTheSameFrame) {
  const FakePieces pieces = vocabulary();
  auto clock = std::make_shared<SegmentClock>();
  // "and" 0-0.4 s: ▁an due at frame 2, d at frame 4; "so" 0.5-0.52 s: ▁ s o all due at frame 6.
  TransducerReference r({{"and", 0.0, 0.4}, {"so", 0.5, 0.52}}, clock);
  const std::vector<int> durations = {0, 1, 2, 3, 4};
  r.bind(pieces, pieces.size(), durations, 0.08);
  const int blank = pieces.size();
  using C = TransducerSteer::Choice;
  auto eq = [](C a, C b) { return a.token == b.token && a.duration_index == b.duration_index; };
  EXPECT_TRUE(eq(r.choose(0), C{blank, 2}));  // blank, skip 2 frames to frame 2
  EXPECT_TRUE(eq(r.choose(2), C{1, 2}));      // ▁an, then 2 frames to d
  EXPECT_TRUE(eq(r.choose(4), C{2, 2}));      // d, then 2 frames to "so"
  EXPECT_TRUE(eq(r.choose(6), C{5, 0}));      // ▁ and s, o in the same frame: duration 0
  EXPECT_TRUE(eq(r.choose(6), C{6, 0}));
  EXPECT_TRUE(eq(r.choose(6), C{7, 4}));       // the last piece: the largest skip
  EXPECT_TRUE(eq(r.choose(10), C{blank, 4}));  // nothing left: blanks skip the most
  // Without a duration 0, a piece due in the same frame waits for the next step's smallest skip.
  TransducerReference s({{"so", 0.5, 0.52}}, clock);
  s.bind(pieces, pieces.size(), {1, 2}, 0.08);
  EXPECT_TRUE(eq(s.choose(6), C{5, 0}));
}

TEST(TransducerReference, SteersAStreamingModelToTheSpeltReferenceNoWordBeforeItsEnd) {
  const std::string dir = std::string(EARSHOT_SHARED_DIR) + "/data/librivox/";
  const std::string id = "sense_and_sensibility_01_austen_64kb-0870";
  const std::vector<float> pcm = audio::load_file(dir + id + ".wav");
  std::ifstream ref_file(dir + id + ".txt");
  const std::string reference((std::istreambuf_iterator<char>(ref_file)), std::istreambuf_iterator<char>());
  const double seconds = static_cast<double>(pcm.size()) / 16000.0;
  const auto vad_model = vad::VadModel::load(std::string(EARSHOT_SHARED_DIR) + "/models/silero-v6.2.0-ggml.bin");
  const std::vector<TimedWord> words = estimate_word_times(reference, speech_segments(vad_model, pcm), seconds);
  ASSERT_GT(words.size(), 10u);

  whisper::testing::TempDir tmp("transducer-reference");
  fastconformer::RandomModelOptions options;
  options.streaming = true;
  options.seed = 3;
  engine::ModelSpec spec;
  spec.path = tmp / "nemotron-small.gguf";
  fastconformer::write_gguf(spec.path, fastconformer::random_model(options));
  spec.runtime.threads = 1;
  spec.options<engine::TransducerOptions>().lookahead_ms = 560;
  const std::shared_ptr<const engine::Engine> engine = engine::load(spec);

  ReferenceStream stream = open_reference_stream(*engine, {}, words);
  ASSERT_NE(stream.transducer, nullptr);
  EXPECT_EQ(stream.decoder, nullptr);
  stream.processor->warmup();
  const TransducerReference& steer = *stream.transducer;
  const std::vector<int>& tokens = steer.tokens();
  ASSERT_GE(tokens.size(), words.size());

  // What the steered model must say: each word's pieces' text.
  const auto model = fastconformer::Model::load(spec.path);
  std::vector<std::string> expected;
  for (int t : tokens) {
    const std::string text = transducer::piece_text(model->pieces().at(t), false);
    if (transducer::piece_starts_word(model->pieces().at(t))) expected.emplace_back();
    ASSERT_FALSE(expected.empty()) << "the first piece does not start a word";
    for (char c : text)
      if (c != ' ') expected.back() += c;
  }
  ASSERT_EQ(expected.size(), words.size());

  std::vector<std::string> committed;
  size_t checked = 0;
  const size_t chunk = 8000;
  for (size_t at = 0;; at += chunk) {
    const bool last = at >= pcm.size();
    ProcessResult r;
    double fed = seconds;
    if (last) {
      r = stream.processor->finish();
    } else {
      const size_t n = std::min(chunk, pcm.size() - at);
      fed = static_cast<double>(at + n) / 16000;
      stream.processor->insert_audio(std::span<const float>(pcm).subspan(at, n), fed);
      r = stream.processor->process(false);
    }
    for (const Word& w : r.committed) {
      std::string text;
      for (char c : w.text)
        if (c != ' ') text += c;
      committed.push_back(text);
      // A word is committed once the next one starts: never before its estimated end was fed.
      if (committed.size() <= words.size()) {
        EXPECT_LE(words[committed.size() - 1].end, fed + 1e-9) << "word " << committed.size() - 1;
        ++checked;
      }
    }
    if (last) break;
  }
  EXPECT_EQ(committed, expected);
  EXPECT_EQ(checked, words.size());
  EXPECT_EQ(steer.emitted(), tokens.size());
  EXPECT_GT(steer.steps(), 0);
  // One joint step per encoder frame (RNN-T: a blank moves one frame) and one per piece.
  const long long frames = static_cast<long long>(std::ceil(seconds / 0.08));
  EXPECT_LE(steer.steps(), frames + static_cast<long long>(tokens.size()) + 14);
  EXPECT_GE(steer.steps(), frames - 14 + static_cast<long long>(tokens.size()));
}

TEST(TransducerReference, AnOfflineTransducerIsRefusedByName) {
  whisper::testing::TempDir tmp("transducer-reference-offline");
  engine::ModelSpec spec;
  spec.path = tmp / "parakeet-small.gguf";
  fastconformer::write_gguf(spec.path, fastconformer::random_model({}));
  spec.runtime.threads = 1;
  const std::shared_ptr<const engine::Engine> engine = engine::load(spec);
  try {
    open_reference_stream(*engine, {}, {{"word", 0, 1}});
    FAIL() << "an offline transducer was steered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("streaming transducer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace earshot::bench
