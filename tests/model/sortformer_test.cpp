// The Sortformer diarizer on small random-weight GGUFs: the loader and its errors,
// the stream's invariances (push sizes, samples vs their mel, a one-chunk stream vs
// the offline pass), its clock and max_speakers, option checks, and the speaker
// cache's update rules on hand-built inputs. The values against an independent
// PyTorch model are tests/model/reference/sortformer_reference.py's.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "error_of.h"
#include "features/nemo_mel.h"
#include "model/runtime/gguf_file.h"
#include "model/sortformer/aosc.h"
#include "model/sortformer/model.h"
#include "model/sortformer/random_model.h"
#include "model/sortformer/stream.h"
#include "model_test_util.h"

namespace earshot::sortformer {
namespace {

using earshot::testing::error_of;
using whisper::testing::TempDir;

std::shared_ptr<const Model> small_model(TempDir& dir, unsigned seed = 3, ggml_type type = GGML_TYPE_F32) {
  write_random_model(dir / "s.gguf", {.real = false, .seed = seed, .matrix_type = type});
  return Model::load(dir / "s.gguf");
}

// Speech-like samples: a few tones switching every half second, with pauses.
std::vector<float> test_audio(double seconds) {
  std::vector<float> x(static_cast<size_t>(seconds * 16000));
  for (size_t i = 0; i < x.size(); ++i) {
    const int segment = static_cast<int>(i / 8000) % 5;
    const double f = 150.0 + 90.0 * segment;
    x[i] = segment == 4 ? 0.001f * std::sin(0.37 * i) : static_cast<float>(0.3 * std::sin(2 * M_PI * f * i / 16000.0));
  }
  return x;
}

features::FrameMajorMel mel_of(const Model& m, std::span<const float> samples) {
  const fastconformer::Hparams& e = m.hparams().encoder;
  features::NemoMelConfig c{.n_fft = e.n_fft,
                            .hop_length = e.hop_length,
                            .n_mels = e.n_mels,
                            .preemph = e.preemph,
                            .log_guard = e.log_guard,
                            .normalize_per_feature = false};
  return features::nemo_log_mel(samples, c, m.mel_filters(), m.window());
}

std::vector<FrameActivity> run_features(const Model& m, const features::FrameMajorMel& mel, int piece,
                                        StreamOptions o) {
  Stream s(m, o);
  std::vector<FrameActivity> out;
  for (int at = 0; at < mel.n_frames; at += piece) {
    const int n = std::min(piece, mel.n_frames - at);
    s.push_features(std::span<const float>(mel.data).subspan(static_cast<size_t>(at) * mel.n_mel,
                                                             static_cast<size_t>(n) * mel.n_mel),
                    n);
    for (const FrameActivity& f : s.take_frames()) out.push_back(f);
  }
  s.finish();
  for (const FrameActivity& f : s.take_frames()) out.push_back(f);
  return out;
}

void expect_same(const std::vector<FrameActivity>& a, const std::vector<FrameActivity>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].start, b[i].start);
    for (int k = 0; k < 4; ++k) ASSERT_EQ(a[i].prob[k], b[i].prob[k]) << "frame " << i << " speaker " << k;
  }
}

TEST(SortformerModel, LoadsTheRandomModelWithItsHyperParameters) {
  TempDir dir("sortformer");
  const auto m = small_model(dir);
  const Hparams& hp = m->hparams();
  EXPECT_EQ(hp.encoder.n_state, 64);
  EXPECT_TRUE(hp.encoder.bias);
  EXPECT_EQ(hp.n_speakers, 4);
  EXPECT_EQ(hp.tf_n_layer, 2);
  EXPECT_EQ(static_cast<int>(m->layers.size()), 2);
  EXPECT_NE(m->encoder().layers.at(0).q_b, nullptr);
  EXPECT_DOUBLE_EQ(hp.frame_seconds(), 0.08);
  EXPECT_EQ(hp.cache.spkcache_len, 188);
  EXPECT_EQ(m->window().size(), 400u);
}

TEST(SortformerModel, RefusesOtherFilesByName) {
  TempDir dir("sortformer");
  write_random_model(dir / "s.gguf", {});
  // Another architecture.
  runtime::GgufWriter w;
  w.set_architecture("earshot-fastconformer-transducer");
  w.write(dir / "other.gguf");
  Error e = error_of([&] { Model::load(dir / "other.gguf"); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(e.what()).find("expected 'earshot-sortformer'"), std::string::npos) << e.what();
  e = error_of([&] { Model::load(dir / "missing.gguf"); });
  EXPECT_EQ(e.code(), ErrorCode::kIo);
}

TEST(SortformerModel, OfflineProbabilitiesAreProbabilitiesPerFrame) {
  TempDir dir("sortformer");
  const auto m = small_model(dir);
  const std::vector<float> audio = test_audio(3.0);
  const FrameProbabilities p = frame_probabilities(*m, audio, {.threads = 1});
  // 3 s: 300 mel frames (NeMo's n / 160), 38 encoder frames ((n + 1) / 2 three times).
  EXPECT_EQ(p.n_frames, 38);
  EXPECT_EQ(p.n_speakers, 4);
  for (float v : p.data) ASSERT_TRUE(v > 0.0f && v < 1.0f);
}

TEST(SortformerStream, PushSizesDoNotChangeTheResult) {
  TempDir dir("sortformer");
  const auto m = small_model(dir);
  const features::FrameMajorMel mel = mel_of(*m, test_audio(12.0));
  const StreamOptions o{.chunk_frames = 4,
                        .left_context = 2,
                        .right_context = 3,
                        .spkcache_len = 24,
                        .fifo_len = 8,
                        .update_period = 6,
                        .run = {.threads = 1}};
  const std::vector<FrameActivity> whole = run_features(*m, mel, mel.n_frames, o);
  EXPECT_EQ(whole.size(), 150u);  // the encoder frames of 12 s: 1200 mel frames (NeMo's count)
  expect_same(whole, run_features(*m, mel, 1, o));
  expect_same(whole, run_features(*m, mel, 37, o));
}

TEST(SortformerStream, SamplesGiveWhatTheirMelGives) {
  TempDir dir("sortformer");
  const auto m = small_model(dir);
  const std::vector<float> audio = test_audio(6.5);
  const StreamOptions o{.run = {.threads = 1}};
  Stream s(*m, o);
  for (size_t at = 0; at < audio.size(); at += 999)
    s.push(std::span<const float>(audio).subspan(at, std::min<size_t>(999, audio.size() - at)));
  s.finish();
  expect_same(run_features(*m, mel_of(*m, audio), 50, o), s.take_frames());
}

TEST(SortformerStream, OneChunkIsTheOfflinePass) {
  TempDir dir("sortformer");
  const auto m = small_model(dir);
  const std::vector<float> audio = test_audio(4.0);
  const FrameProbabilities offline = frame_probabilities(*m, audio, {.threads = 1});
  const std::vector<FrameActivity> streamed =
      run_features(*m, mel_of(*m, audio), 401, {.chunk_frames = 100, .run = {.threads = 1}});
  ASSERT_EQ(static_cast<int>(streamed.size()), offline.n_frames);
  for (size_t i = 0; i < streamed.size(); ++i)
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(streamed[i].prob[k], offline.data[i * 4 + k], 1e-6f);
}

// NeMo's frame count, n / 160 mel frames of n samples (its forward trims the
// features to it), offline and streamed from samples, on lengths m * 160 + k
// either side of an encoder step (96 mel frames are 12 encoder frames, 97 are 13).
TEST(SortformerStream, OfflineAndStreamedKeepNeMosFrameCount) {
  TempDir dir("sortformer");
  const auto m = small_model(dir);
  const std::vector<float> audio = test_audio(1.0);
  const StreamOptions one_chunk{.chunk_frames = 100, .run = {.threads = 1}};
  for (int mel : {95, 96, 97}) {
    for (int k : {0, 1, 80, 159}) {
      const int n = mel * 160 + k;
      const std::span<const float> x(audio.data(), static_cast<size_t>(n));
      const int frames = m->hparams().encoder.encoder_frames(mel);
      const FrameProbabilities offline = frame_probabilities(*m, x, {.threads = 1});
      ASSERT_EQ(offline.n_frames, frames) << "n " << n;
      Stream s(*m, one_chunk);
      for (int at = 0; at < n; at += 777) s.push(x.subspan(at, std::min(777, n - at)));
      s.finish();
      const std::vector<FrameActivity> streamed = s.take_frames();
      ASSERT_EQ(static_cast<int>(streamed.size()), frames) << "n " << n;
      for (int t = 0; t < frames; ++t)
        for (int sp = 0; sp < 4; ++sp)
          ASSERT_NEAR(streamed[t].prob[sp], offline.data[static_cast<size_t>(t) * 4 + sp], 1e-6f) << "n " << n;
    }
  }
  EXPECT_EQ(m->hparams().encoder.encoder_frames(96), 12);
  EXPECT_EQ(m->hparams().encoder.encoder_frames(97), 13);
  // Under one hop: no frame; the offline pass says so, a stream gives nothing.
  const Error e = error_of([&] { frame_probabilities(*m, std::span<const float>(audio.data(), 159)); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("159 samples hold no feature frame"), std::string::npos) << e.what();
  Stream s(*m, one_chunk);
  s.push(std::span<const float>(audio.data(), 159));
  s.finish();
  EXPECT_TRUE(s.take_frames().empty());
}

TEST(SortformerStream, FramesAreOnTheStreamClockAndMaxSpeakersHidesChannels) {
  TempDir dir("sortformer");
  const auto m = small_model(dir);
  const features::FrameMajorMel mel = mel_of(*m, test_audio(5.0));
  const auto all = run_features(*m, mel, 64, {.run = {.threads = 1}});
  const auto two = run_features(*m, mel, 64, {.max_speakers = 2, .run = {.threads = 1}});
  ASSERT_EQ(all.size(), two.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_NEAR(all[i].start, 0.08 * i, 1e-9);
    EXPECT_NEAR(all[i].end, 0.08 * (i + 1), 1e-9);
    EXPECT_EQ(two[i].prob[0], all[i].prob[0]);
    EXPECT_EQ(two[i].prob[1], all[i].prob[1]);
    EXPECT_EQ(two[i].prob[2], 0.0f);
    EXPECT_EQ(two[i].prob[3], 0.0f);
  }
}

TEST(SortformerStream, RefusesOptionsNeMoRefuses) {
  TempDir dir("sortformer");
  const auto m = small_model(dir);
  EXPECT_EQ(error_of([&] { Stream(*m, {.max_speakers = 5, .run = {}}); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { Stream(*m, {.chunk_frames = 0, .run = {}}); }).code(), ErrorCode::kInvalidArgument);
  // The refusal names the StreamOptions field, for callers that restate it as their own option.
  try {
    Stream(*m, {.max_speakers = 5, .run = {}});
    ADD_FAILURE() << "max_speakers 5 accepted";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.field(), "max_speakers");
    EXPECT_EQ(std::string(e.what()),
              "diarization stream: max_speakers 5 is outside 1..4 (the model tells at most 4 speakers apart)");
  }
  const Error e = error_of([&] { Stream(*m, {.spkcache_len = 15, .run = {}}); });
  EXPECT_NE(std::string(e.what()).find("spkcache_len 15"), std::string::npos) << e.what();
  Stream s(*m, {});
  s.push(std::vector<float>(100, 0.0f));
  EXPECT_EQ(error_of([&] { s.push_features(std::vector<float>(32, 0.0f), 1); }).code(), ErrorCode::kInvalidArgument);
}

// The cache's rules on hand-built predictions (d = 1: the embedding is the frame's number).
AoscConfig tiny_config() {
  AoscConfig c;
  c.n_speakers = 4;
  c.d = 1;
  c.params.spkcache_len = 16;  // 4 per speaker: 1 kept frame + 3 silence slots
  c.params.fifo_len = 2;
  c.params.update_period = 3;
  return c;
}

TEST(Aosc, ChunksFillTheFifoThenPopIntoTheCache) {
  const AoscConfig c = tiny_config();
  AoscState s;
  // Chunk 1: 2 frames, no context: the FIFO holds them.
  std::vector<float> preds(2 * 4, 0.9f);
  std::vector<float> out = aosc_update(c, s, std::vector<float>{1, 2}, 2, preds, 0, 0);
  EXPECT_EQ(out.size(), 8u);
  EXPECT_EQ(s.n_fifo, 2);
  EXPECT_EQ(s.n_cache, 0);
  // Chunk 2 with one left-context frame: 2 + 2 > fifo 2 -> pop max(3, 2 - 2 + 2) = 3 frames.
  preds.assign((2 + 3) * 4, 0.01f);  // silence: every popped frame joins the silence profile
  aosc_update(c, s, std::vector<float>{2, 3, 4}, 3, preds, 1, 0);
  EXPECT_EQ(s.n_cache, 3);
  EXPECT_EQ(s.n_fifo, 1);
  EXPECT_EQ(s.fifo, std::vector<float>{4});
  EXPECT_EQ(s.cache, (std::vector<float>{1, 2, 3}));
  EXPECT_FALSE(s.has_cache_preds);
  EXPECT_EQ(s.n_sil_frames, 3);
  EXPECT_FLOAT_EQ(s.mean_sil_emb[0], 2.0f);
}

TEST(Aosc, CompressionKeepsEachSpeakersBestFramesInTimeOrderThenSilence) {
  const AoscConfig c = tiny_config();
  // 20 frames: frame t is speaker t % 4 alone, more confident as t grows; frame 19 is silent.
  const int n = 20;
  std::vector<float> emb(n), preds(n * 4, 0.01f);
  for (int t = 0; t < n; ++t) {
    emb[t] = static_cast<float>(t);
    if (t < 19) preds[t * 4 + t % 4] = 0.6f + 0.015f * t;
  }
  std::vector<float> out_emb, out_preds;
  aosc_compress(c, emb, preds, n, std::vector<float>{-1.0f}, out_emb, out_preds);
  // Per speaker: one frame (the best; boosts keep them), then 3 mean-silence frames.
  ASSERT_EQ(out_emb.size(), 16u);
  EXPECT_EQ(out_emb, (std::vector<float>{16, -1, -1, -1, 17, -1, -1, -1, 18, -1, -1, -1, 15, -1, -1, -1}));
  EXPECT_EQ(out_preds[0 * 4 + 0], preds[16 * 4 + 0]);
  EXPECT_EQ(out_preds[1 * 4 + 0], 0.0f);
}

}  // namespace
}  // namespace earshot::sortformer
