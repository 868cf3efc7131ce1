// The transducer streams (model/fastconformer/transducer_streams.h) read NeMo's
// frame count, n / 160 mel frames of n samples, on every length m * 160 + k:
// the offline stream decodes the encoder frames of n / 160 mel frames, the
// streaming stream ends after as many, and libparakeet's count (one mel frame
// more, --nemo-mel-frames libparakeet) is one option away. Audio shorter than a
// hop has no frame and decodes to nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "model/fastconformer/model.h"
#include "model/fastconformer/random_model.h"
#include "model/fastconformer/transducer_streams.h"
#include "model_test_util.h"

namespace earshot::fastconformer {
namespace {

using features::NemoFrameCount;
using whisper::testing::TempDir;

std::vector<float> tones(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(0.3 * std::sin(0.05 * i) + 0.1 * std::sin(0.31 * i + 0.002 * i * (i % 7)));
  return x;
}

// Lengths on both sides of an encoder frame's step, each at k = 0, 1, 80 and 159
// samples past a whole hop: 96 mel frames are 12 encoder frames and 97 are 13
// ((n + 1) / 2 three times), 89 are 12 and 90 are 13 through the causal
// subsampling of a streaming model (n / 2 + 1 three times; 97 are 13, 98 are 14).
std::vector<int> lengths() {
  std::vector<int> n;
  for (int m : {89, 90, 95, 96, 97})
    for (int k : {0, 1, 80, 159}) n.push_back(m * 160 + k);
  return n;
}

// A random-weight cache-aware streaming model, written to `dir` and loaded.
std::shared_ptr<const Model> streaming_model(const TempDir& dir, uint64_t seed) {
  RandomModelOptions o;
  o.seed = seed;
  o.streaming = true;
  write_gguf(dir / "nemotron.gguf", random_model(o));
  return Model::load(dir / "nemotron.gguf");
}

// A pass report that counts the encoder passes into `passes`.
PassReport count_encoder_passes(int& passes) {
  return [&passes](ModelPass pass, std::chrono::nanoseconds) {
    if (pass == ModelPass::kEncoder) ++passes;
  };
}

int mel_frames(int n, NemoFrameCount count) { return n / 160 + (count == NemoFrameCount::kLibparakeet ? 1 : 0); }

// Records the frames the greedy decoder steps through, choosing blank (the next frame) on each.
class FrameRecorder : public TransducerSteer {
 public:
  void bind(const TokenPieces&, int n_vocab, const std::vector<int>& durations, double) override {
    blank_ = n_vocab;
    one_frame_ = 0;
    for (size_t i = 0; i < durations.size(); ++i)
      if (durations[i] == 1) one_frame_ = static_cast<int>(i);
  }
  Choice choose(int frame) override {
    frames.insert(frame);
    return {blank_, one_frame_};
  }
  std::set<int> frames;

 private:
  int blank_ = 0, one_frame_ = 0;
};

TEST(TransducerStreamFrames, OfflineDecodesTheEncoderFramesOfNeMosCount) {
  TempDir dir("transducer-frames");
  RandomModelOptions o;
  o.seed = 3;
  o.probe = 1;  // emits once on every encoder frame: the emissions count the frames
  write_gguf(dir / "probe.gguf", random_model(o));
  const auto model = Model::load(dir / "probe.gguf");
  const Hparams& hp = model->hparams();
  ASSERT_EQ(hp.feature_norm, FeatureNorm::kPerFeature);
  const std::vector<float> audio = tones(98 * 160);
  for (NemoFrameCount count : {NemoFrameCount::kNemo, NemoFrameCount::kLibparakeet}) {
    const auto stream = open_offline_stream(model, 1, runtime::CpuKernels::kGgml, "", count);
    for (int n : lengths()) {
      const std::vector<TokenEmission> e = stream->decode(std::span<const float>(audio.data(), n), false);
      const int frames = hp.encoder_frames(mel_frames(n, count));
      ASSERT_EQ(static_cast<int>(e.size()), frames) << "n " << n;
      EXPECT_EQ(e.back().frame, frames - 1) << "n " << n;
    }
  }
  EXPECT_EQ(hp.encoder_frames(96), 12);
  EXPECT_EQ(hp.encoder_frames(97), 13);
  // Under a hop: no frame (libparakeet's count has one), nothing decoded, no throw.
  const auto stream = open_offline_stream(model, 1, runtime::CpuKernels::kGgml, "");
  for (int n : {1, 80, 159}) EXPECT_TRUE(stream->decode(std::span<const float>(audio.data(), n), false).empty());
  EXPECT_EQ(open_offline_stream(model, 1, runtime::CpuKernels::kGgml, "", NemoFrameCount::kLibparakeet)
                ->decode(std::span<const float>(audio.data(), 159), false)
                .size(),
            1u);
}

TEST(TransducerStreamFrames, StreamingEndsAfterTheEncoderFramesOfNeMosCount) {
  TempDir dir("transducer-frames");
  const auto model = streaming_model(dir, 3);
  const Hparams& hp = model->hparams();
  const std::vector<float> audio = tones(98 * 160);
  EXPECT_EQ(hp.encoder_frames(89), 12);
  EXPECT_EQ(hp.encoder_frames(90), 13);
  for (NemoFrameCount count : {NemoFrameCount::kNemo, NemoFrameCount::kLibparakeet}) {
    for (int n : lengths()) {
      auto recorder = std::make_shared<FrameRecorder>();
      const auto stream =
          open_streaming_stream(model, 1, runtime::CpuKernels::kGgml, hp.att_right, nullptr, "", count, {}, recorder);
      for (int at = 0; at < n; at += 1234)
        stream->push(std::span<const float>(audio.data() + at, std::min(1234, n - at)));
      stream->finish();
      const int frames = hp.encoder_frames(mel_frames(n, count));
      ASSERT_EQ(static_cast<int>(recorder->frames.size()), frames) << "n " << n;
      EXPECT_EQ(*recorder->frames.rbegin(), frames - 1) << "n " << n;
    }
  }
}

// A flush (the segment's last audio and its end) is one encoder pass, with the
// tokens of push() then finish() (two passes).
TEST(TransducerStreamFrames, StreamingFinishWithIsPushThenFinishInOnePass) {
  TempDir dir("transducer-frames");
  const auto model = streaming_model(dir, 4);
  const Hparams& hp = model->hparams();
  const std::vector<float> audio = tones(98 * 160);
  for (int n : lengths()) {
    for (int split : {0, 1234, 4000, 12000}) {
      if (split >= n) continue;
      int passes = 0;
      const auto one = open_streaming_stream(model, 1, runtime::CpuKernels::kGgml, hp.att_right, nullptr, "",
                                             NemoFrameCount::kNemo, count_encoder_passes(passes));
      const auto two =
          open_streaming_stream(model, 1, runtime::CpuKernels::kGgml, hp.att_right, nullptr, "", NemoFrameCount::kNemo);
      const std::span<const float> head(audio.data(), static_cast<size_t>(split));
      const std::span<const float> tail(audio.data() + split, static_cast<size_t>(n - split));
      std::vector<TokenEmission> a = one->push(head), b = two->push(head);
      passes = 0;
      const std::vector<TokenEmission> a_rest = one->finish_with(tail);
      EXPECT_EQ(passes, 1) << "n " << n << " split " << split;
      a.insert(a.end(), a_rest.begin(), a_rest.end());
      for (const auto& part : {two->push(tail), two->finish()}) b.insert(b.end(), part.begin(), part.end());
      ASSERT_EQ(a.size(), b.size()) << "n " << n << " split " << split;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].token, b[i].token) << "n " << n << " split " << split << " emission " << i;
        EXPECT_EQ(a[i].frame, b[i].frame) << "n " << n << " split " << split << " emission " << i;
      }
      EXPECT_EQ(one->frames_done(), 0);  // the segment ended: the next push starts a new one
    }
  }
}

// A finish encoded ahead (a pending end of speech) leaves the stream as it was,
// and the finish_with() of the same samples then only decodes, with the same
// tokens; a push between drops it (the stream goes on as if nothing ran).
TEST(TransducerStreamFrames, StreamingPrepareFinishEncodesAheadWithTheSameTokens) {
  TempDir dir("transducer-frames");
  const auto model = streaming_model(dir, 6);
  const Hparams& hp = model->hparams();
  const std::vector<float> audio = tones(98 * 160);
  auto open = [&](PassReport report = {}) {
    return open_streaming_stream(model, 1, runtime::CpuKernels::kGgml, hp.att_right, nullptr, "", NemoFrameCount::kNemo,
                                 std::move(report));
  };
  auto same = [](const std::vector<TokenEmission>& a, const std::vector<TokenEmission>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].token != b[i].token || a[i].frame != b[i].frame) return false;
    return true;
  };
  const std::span<const float> head(audio.data(), 6000), middle(audio.data() + 6000, 3000),
      tail(audio.data() + 9000, audio.size() - 9000);
  const auto plain = open();
  std::vector<TokenEmission> expected = plain->push(head);
  for (const auto& part : {plain->push(middle), plain->finish_with(tail)})
    expected.insert(expected.end(), part.begin(), part.end());

  int passes = 0;
  const auto ahead = open(count_encoder_passes(passes));
  std::vector<TokenEmission> got = ahead->push(head);
  const int frames = ahead->frames_done();
  ahead->prepare_finish(middle);  // speech went on: dropped by the push
  EXPECT_EQ(ahead->frames_done(), frames);
  for (const auto& part : {ahead->push(middle)}) got.insert(got.end(), part.begin(), part.end());
  passes = 0;
  ahead->prepare_finish(tail);
  ahead->prepare_finish(tail);  // the same samples: already done
  EXPECT_EQ(passes, 1);
  const std::vector<TokenEmission> rest = ahead->finish_with(tail);
  EXPECT_EQ(passes, 1);  // no encoder pass at the flush
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_TRUE(same(got, expected));
  EXPECT_FALSE(expected.empty());

  // Prepared for other samples than the flush's: the flush encodes them itself.
  const auto other = open();
  std::vector<TokenEmission> again = other->push(head);
  other->prepare_finish(middle);
  for (const auto& part : {other->push(middle), other->finish_with(tail)})
    again.insert(again.end(), part.begin(), part.end());
  EXPECT_TRUE(same(again, expected));
}

}  // namespace
}  // namespace earshot::fastconformer
