// Cache-aware streaming FastConformer (Nemotron-shaped random models): the file
// carries every streaming flag, the offline encoder computes NeMo's causal
// subsampling, causal LayerNorm conv module and chunked_limited mask, and the
// streaming encoder (with the streaming mel) equals the offline encoder frame
// for frame for every right context and any split of the audio, with the same
// greedy RNN-T tokens and frames.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "error_of.h"
#include "features/nemo_mel_stream.h"
#include "model/fastconformer/encoder.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/random_model.h"
#include "model/fastconformer/streaming_encoder.h"
#include "model/runtime/device.h"
#include "model_test_util.h"

namespace earshot::fastconformer {
namespace {

using earshot::testing::error_of;
using whisper::testing::TempDir;

std::shared_ptr<const Model> streaming_model(const TempDir& dir, unsigned seed = 3) {
  RandomModelOptions o;
  o.streaming = true;
  o.seed = seed;
  write_gguf(dir / "nemotron.gguf", random_model(o));
  return Model::load(dir / "nemotron.gguf");
}

// A few seconds of a speech-like signal: gliding harmonics under a syllable envelope, and noise.
std::vector<float> test_audio(double seconds, unsigned seed = 9) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.02f);
  std::vector<float> audio(static_cast<size_t>(seconds * 16000));
  for (size_t i = 0; i < audio.size(); ++i) {
    const double t = i / 16000.0, f0 = 140 + 40 * std::sin(2 * M_PI * 0.7 * t);
    const double envelope = 0.5 + 0.5 * std::sin(2 * M_PI * 3.1 * t);
    double v = 0;
    for (int h = 1; h <= 5; ++h) v += std::sin(2 * M_PI * f0 * h * t + h) / h;
    audio[i] = static_cast<float>(0.3 * envelope * v) + noise(rng);
  }
  return audio;
}

features::NemoMelConfig mel_config(const Hparams& hp) {
  features::NemoMelConfig c;
  c.n_fft = hp.n_fft, c.hop_length = hp.hop_length, c.n_mels = hp.n_mels;
  c.preemph = hp.preemph, c.log_guard = hp.log_guard;
  c.normalize_per_feature = hp.feature_norm == FeatureNorm::kPerFeature;
  return c;
}

// Random piece sizes in [1, max_piece].
std::vector<size_t> random_split(size_t n, size_t max_piece, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> size(1, max_piece);
  std::vector<size_t> pieces;
  for (size_t done = 0; done < n;) {
    const size_t s = std::min(size(rng), n - done);
    pieces.push_back(s);
    done += s;
  }
  return pieces;
}

TEST(FastConformerStreaming, TheFileCarriesEveryStreamingFlag) {
  TempDir dir("nemotron");
  const auto model = streaming_model(dir);
  const Hparams& hp = model->hparams();
  EXPECT_TRUE(hp.causal_subsampling);
  EXPECT_TRUE(hp.causal_conv);
  EXPECT_TRUE(hp.xscaling);
  EXPECT_EQ(hp.conv_norm, ConvNorm::kLayerNorm);
  EXPECT_EQ(hp.att_style, AttentionStyle::kChunkedLimited);
  EXPECT_EQ(hp.att_left, 12);
  EXPECT_EQ(hp.att_right, 13);
  EXPECT_EQ(hp.att_right_options, (std::vector<int>{0, 1, 6, 13}));
  EXPECT_EQ(hp.feature_norm, FeatureNorm::kNone);
  EXPECT_TRUE(hp.durations.empty());
  EXPECT_TRUE(hp.streaming());
  EXPECT_EQ(hp.subsampled_bins(), 17);  // NeMo's 4352 = 256 channels x 17 bins
  EXPECT_EQ(hp.encoder_frames(1), 1);
  EXPECT_EQ(hp.encoder_frames(8), 2);
  EXPECT_EQ(hp.encoder_frames(9), 2);
  EXPECT_EQ(hp.encoder_frames(10), 3);
  EXPECT_EQ(model->layers[0].bn_mean, nullptr);
  // The legacy format cannot say any of this.
  RandomModelOptions o;
  o.streaming = true;
  EXPECT_EQ(error_of([&] { write_legacy(dir / "x.bin", random_model(o)); }).code(), ErrorCode::kInvalidArgument);
}

TEST(FastConformerStreaming, TheMaskIsNeMosChunkedLimited) {
  Hparams hp;
  hp.att_style = AttentionStyle::kChunkedLimited;
  hp.att_left = 5, hp.att_right = 1;
  // Chunks of 2 frames, 5 / 2 = 2 chunks of left context.
  const int T = 9;
  const std::vector<float> mask = attention_mask(hp, 1, T);
  for (int i = 0; i < T; ++i) {
    for (int j = 0; j < T; ++j) {
      const int diff = i / 2 - j / 2;
      EXPECT_EQ(mask[i * T + j] == 0.0f, diff >= 0 && diff <= 2) << i << " " << j;
    }
  }
  EXPECT_TRUE(std::isinf(attention_mask(hp, 0, T)[0 * T + 1]));  // r = 0: strictly causal
  EXPECT_EQ(attention_mask(hp, 0, T)[5 * T + 0], 0.0f);          // 5 chunks of 1 frame back
  EXPECT_TRUE(std::isinf(attention_mask(hp, 0, T)[6 * T + 0]));
  hp.att_style = AttentionStyle::kRegular;  // a band of [-5, +1]
  const std::vector<float> band = attention_mask(hp, 1, T);
  EXPECT_EQ(band[3 * T + 4], 0.0f);
  EXPECT_TRUE(std::isinf(band[3 * T + 5]));
  EXPECT_EQ(band[6 * T + 1], 0.0f);
  EXPECT_TRUE(std::isinf(band[7 * T + 1]));
}

TEST(FastConformerStreaming, OfflineOutputIsCausalUpToTheChunkEnd) {
  // A frame of chunk c reads mel up to 8 * (its chunk's last frame): changing
  // the mel after that leaves it alone, and changes the next chunk.
  TempDir dir("nemotron");
  const auto model = streaming_model(dir);
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 1);
  for (int r : {0, 6}) {
    Encoder encoder(model, backend.get(), {.right_context = r});
    const int n_mels = model->hparams().n_mels, n_frames = 120;
    std::vector<float> mel(static_cast<size_t>(n_frames) * n_mels);
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : mel) v = normal(rng);
    const EncoderOutput a = encoder.encode(mel, n_frames);
    const int last = 2 * (r + 1) - 1;  // the second chunk's last frame
    for (size_t i = static_cast<size_t>(8 * last + 1) * n_mels; i < mel.size(); ++i) mel[i] += 1.0f;
    const EncoderOutput b = encoder.encode(mel, n_frames);
    ASSERT_EQ(a.n_frames, b.n_frames);
    const size_t d = a.n_state;
    for (size_t i = 0; i < (last + 1) * d; ++i) ASSERT_EQ(a.data[i], b.data[i]) << "r " << r << " value " << i;
    double moved = 0;
    for (size_t i = (last + 1) * d; i < (last + 2) * d; ++i) moved += std::abs(a.data[i] - b.data[i]);
    EXPECT_GT(moved, 1e-3) << "r " << r;
  }
}

TEST(FastConformerStreaming, RefusesWhatCannotStreamAndUnknownLookaheads) {
  TempDir dir("nemotron");
  const auto model = streaming_model(dir);
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 1);
  EXPECT_EQ(error_of([&] { StreamingEncoder(model, backend.get(), {.right_context = 3}); }).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { Encoder(model, backend.get(), {.right_context = 2}); }).code(), ErrorCode::kInvalidArgument);
  RandomModelOptions o;
  o.n_layer = 1;
  write_gguf(dir / "parakeet.gguf", random_model(o));
  const auto parakeet = Model::load(dir / "parakeet.gguf");
  EXPECT_EQ(error_of([&] { StreamingEncoder(parakeet, backend.get()); }).code(), ErrorCode::kUnsupported);
}

struct Decoded {
  std::vector<int> tokens, frames;
};

Decoded greedy(const Model& model, const EncoderOutput& enc) {
  transducer::Decoder decoder(&model.decoder_weights());
  transducer::DecoderState state = decoder.initial_state();
  std::vector<transducer::Emission> emissions;
  decoder.greedy(decoder.project_encoder(enc.data, enc.n_frames), enc.n_frames, state, emissions);
  Decoded d;
  for (const auto& e : emissions) d.tokens.push_back(e.token), d.frames.push_back(e.frame);
  return d;
}

// Streams audio in the given pieces through the streaming mel and encoder.
EncoderOutput stream(StreamingEncoder& encoder, features::NemoMelStream& mel, std::span<const float> audio,
                     const std::vector<size_t>& pieces) {
  EncoderOutput all;
  auto append = [&](const EncoderOutput& part) {
    EXPECT_EQ(part.first_frame, all.n_frames);
    all.data.insert(all.data.end(), part.data.begin(), part.data.end());
    all.n_frames += part.n_frames;
  };
  size_t at = 0;
  for (size_t n : pieces) {
    const features::FrameMajorMel m = mel.push(audio.subspan(at, n));
    append(encoder.push(m.data, m.n_frames));
    at += n;
  }
  const features::FrameMajorMel m = mel.finish();
  append(encoder.push(m.data, m.n_frames));
  append(encoder.finish());
  all.n_state = encoder.right_context() >= 0 ? static_cast<int>(all.data.size() / std::max(all.n_frames, 1)) : 0;
  return all;
}

TEST(FastConformerStreaming, StreamingEqualsOfflineForEveryLookaheadAndSplit) {
  TempDir dir("nemotron");
  const auto model = streaming_model(dir);
  const Hparams& hp = model->hparams();
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 1);
  const std::vector<float> audio = test_audio(3.37);
  const features::NemoMelConfig config = mel_config(hp);
  const features::FrameMajorMel offline_mel =
      features::nemo_log_mel(audio, config, model->mel_filters(), model->window());
  features::NemoMelStream mel(config, model->mel_filters(), model->window());
  for (int r : {0, 1, 6, 13}) {
    Encoder offline(model, backend.get(), {.right_context = r});
    const EncoderOutput want = offline.encode(offline_mel.data, offline_mel.n_frames);
    ASSERT_EQ(want.n_frames, hp.encoder_frames(offline_mel.n_frames));
    const Decoded want_tokens = greedy(*model, want);
    // A random model that never emits (or always does) proves little about the tokens.
    const size_t emitting = std::set<int>(want_tokens.frames.begin(), want_tokens.frames.end()).size();
    EXPECT_GE(emitting, static_cast<size_t>(want.n_frames / 5)) << "r " << r;
    EXPECT_LE(emitting, static_cast<size_t>(want.n_frames / 2)) << "r " << r;
    StreamingEncoder streaming(model, backend.get(), {.right_context = r});
    for (unsigned split = 0; split < 3; ++split) {
      const std::vector<size_t> pieces = split == 0 ? std::vector<size_t>{audio.size()}
                                                    : random_split(audio.size(), split == 1 ? 700 : 5000, r + split);
      const EncoderOutput got = stream(streaming, mel, audio, pieces);
      ASSERT_EQ(got.n_frames, want.n_frames) << "r " << r << " split " << split;
      float max_diff = 0;
      for (size_t i = 0; i < want.data.size(); ++i) max_diff = std::max(max_diff, std::abs(got.data[i] - want.data[i]));
      EXPECT_LT(max_diff, 2e-5f) << "r " << r << " split " << split;
      const Decoded got_tokens = greedy(*model, got);
      EXPECT_EQ(got_tokens.tokens, want_tokens.tokens) << "r " << r << " split " << split;
      EXPECT_EQ(got_tokens.frames, want_tokens.frames) << "r " << r << " split " << split;
    }
    // The step's products on the few-row op (kAuto: runtime/rows_ops.h) instead of
    // ggml's: the same frames to the f32 sums' order, the same tokens.
    StreamingEncoder rows(model, backend.get(), {.right_context = r, .cpu_kernels = runtime::CpuKernels::kAuto});
    const EncoderOutput got = stream(rows, mel, audio, random_split(audio.size(), 700, r));
    ASSERT_EQ(got.n_frames, want.n_frames) << "r " << r << " on the few-row op";
    float max_diff = 0;
    for (size_t i = 0; i < want.data.size(); ++i) max_diff = std::max(max_diff, std::abs(got.data[i] - want.data[i]));
    EXPECT_LT(max_diff, 2e-5f) << "r " << r << " on the few-row op";
    EXPECT_EQ(greedy(*model, got).tokens, want_tokens.tokens) << "r " << r << " on the few-row op";
  }
}

TEST(FastConformerStreaming, OneSamplePiecesOfAShortStream) {
  TempDir dir("nemotron");
  const auto model = streaming_model(dir);
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 1);
  const std::vector<float> audio = test_audio(0.41, 2);
  const features::NemoMelConfig config = mel_config(model->hparams());
  const features::FrameMajorMel offline_mel =
      features::nemo_log_mel(audio, config, model->mel_filters(), model->window());
  features::NemoMelStream mel(config, model->mel_filters(), model->window());
  for (int r : {0, 1}) {
    const EncoderOutput want =
        Encoder(model, backend.get(), {.right_context = r}).encode(offline_mel.data, offline_mel.n_frames);
    StreamingEncoder streaming(model, backend.get(), {.right_context = r});
    const EncoderOutput got = stream(streaming, mel, audio, std::vector<size_t>(audio.size(), 1));
    ASSERT_EQ(got.n_frames, want.n_frames);
    for (size_t i = 0; i < want.data.size(); ++i) ASSERT_NEAR(got.data[i], want.data[i], 2e-5f) << i;
  }
}

}  // namespace
}  // namespace earshot::fastconformer
