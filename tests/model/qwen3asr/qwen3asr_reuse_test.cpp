// Qwen3-ASR's work kept across a stream's passes, against doing it all again:
// the audio encoder's windows (audio_windows.h: a window whose mel is unchanged
// keeps its tokens) give exactly a full re-encode's embeddings, on real speech
// streamed in pieces with the buffer trimmed at window boundaries and anywhere;
// a prefill from the first changed position (the prompt's KV rows before it
// kept) gives a full prefill's greedy tokens, on several random models, with
// the teacher-forced logits within rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <span>
#include <thread>

#include "audio/audio.h"
#include "model/qwen3asr/model.h"
#include "model/qwen3asr/model_writer.h"

namespace earshot::qwen3asr {
namespace {

namespace fs = std::filesystem;

ModelOptions with_reuse(bool reuse, runtime::CpuKernels kernels = runtime::CpuKernels::kAuto) {
  ModelOptions o;
  o.n_threads = 1;
  o.reuse_encoder_windows = o.reuse_prompt_kv = reuse;
  o.cpu_kernels = kernels;
  return o;
}

struct Qwen3AsrReuse : ::testing::Test {
  static inline fs::path dir;
  static inline WrittenPair pair;
  static inline std::shared_ptr<const Model> kept, full;
  static inline std::vector<float> speech;  // LibriVox clips back to back, 32 s at least
  static void SetUpTestSuite() {
    dir = fs::temp_directory_path() / ("earshot-qwen3asr-reuse-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    pair = write_random_pair(PairDims::tiny(), EARSHOT_QWEN2_VOCAB, dir / "tiny", 11);
    kept = Model::load(pair.text, pair.mmproj, with_reuse(true));
    full = Model::load(pair.text, pair.mmproj, with_reuse(false));
    const fs::path librivox = fs::path(EARSHOT_SHARED_DIR) / "data" / "librivox";
    while (speech.size() < 32 * 16000) {
      for (const char* clip : {"0870", "0880", "0890", "0920", "0930"}) {
        const std::vector<float> a =
            audio::load_file(librivox / ("sense_and_sensibility_01_austen_64kb-" + std::string(clip) + ".wav"));
        speech.insert(speech.end(), a.begin(), a.end());
      }
    }
  }
  static void TearDownTestSuite() {
    kept.reset();
    full.reset();
    fs::remove_all(dir);
  }
  static std::span<const float> part(size_t begin, size_t end) {
    return std::span<const float>(speech).subspan(begin, std::min(end, speech.size()) - begin);
  }
};

#ifndef EARSHOT_QWEN3ASR_REUSE_SWEEP
size_t windows_of(size_t samples) {
  const size_t frames = samples / kHopSamples + 1;
  return (frames + kWindowFrames - 1) / kWindowFrames;
}

// A stream's buffer growing by uneven pieces, trimmed at the front as AlignAtt
// trims it (whole windows, or anywhere): after every encode the kept windows'
// embeddings equal a full re-encode's bit for bit (the same graph on the same
// mel), whole windows are kept wherever the mel allows it, and within a window
// that is encoded again the chunks whose mel is unchanged keep their conv stem.
TEST_F(Qwen3AsrReuse, KeptWindowsEqualAFullReencodeAsTheBufferGrowsAndIsTrimmed) {
  ASSERT_GT(speech.size(), 30u * 16000u);
  for (const bool window_trim : {true, false}) {
    SCOPED_TRACE(window_trim ? "trimmed at window boundaries" : "trimmed anywhere");
    Session a(kept, {{3, 0}}), b(full, {{3, 0}});
    size_t begin = 0, end = 8000;
    int encodes = 0, reused = 0, encoded = 0, stems = 0, stems_kept = 0;
    const size_t max_samples = 15 * 16000;
    for (size_t piece = 0; end < 30 * 16000; ++piece) {
      end += 7000 + (piece * 3917) % 12000;  // 0.44 to 1.19 s
      while (end - begin > max_samples) begin += window_trim ? static_cast<size_t>(kWindowSamples) : 9000;
      const std::span<const float> buffer = part(begin, end);
      ASSERT_EQ(a.encode(buffer), b.encode(buffer));
      ASSERT_EQ(a.audio_embeddings(), b.audio_embeddings()) << "at " << begin << ".." << end;
      const EncodeStats& s = a.last_encode();
      EXPECT_EQ(s.windows, static_cast<int>(windows_of(buffer.size())));
      EXPECT_EQ(s.encoded + s.reused, s.windows);
      EXPECT_GE(s.encoded, 1);  // the last window grew
      EXPECT_EQ(b.last_encode().encoded, s.windows);
      EXPECT_EQ(b.last_encode().stems_kept, 0);
      ++encodes;
      reused += s.reused;
      encoded += s.encoded;
      stems += s.stems;
      stems_kept += s.stems_kept;
    }
    EXPECT_GE(encodes, 30);
    std::printf("%s: %d windows encoded, %d kept; of the encoded windows' chunks %d stems run, %d kept\n",
                window_trim ? "window trim" : "sliding trim", encoded, reused, stems, stems_kept);
    // Trimmed anywhere, every window's audio moves on each trim (the seed's 15 s
    // sliding trim leaves nothing to keep once the buffer is full).
    if (window_trim) {
      EXPECT_GE(reused, 10) << encoded << " windows encoded";
      EXPECT_GT(stems_kept, stems) << "a growing window's earlier chunks keep their stems";
    } else {
      EXPECT_GT(stems_kept, 0);
    }
  }
}

// Speech with digital silence between its words: the silence's mel bins sit at
// Whisper's clamp (the buffer's maximum - 8), so a louder sound anywhere later
// changes every window's mel, and every window is encoded again.
TEST_F(Qwen3AsrReuse, AWindowIsEncodedAgainExactlyWhenItsMelChanges) {
  std::vector<float> pcm(part(0, 12 * 16000).begin(), part(0, 12 * 16000).end());
  for (size_t i = 16000; i < 24000; ++i) pcm[i] = 0.0f;  // a pause, clamped
  Session a(kept, {{3, 0}}), b(full, {{3, 0}});
  const auto encode = [&](size_t samples) {
    const std::span<const float> buffer(pcm.data(), samples);
    a.encode(buffer);
    b.encode(buffer);
    EXPECT_EQ(a.audio_embeddings(), b.audio_embeddings()) << samples;
    return a.last_encode();
  };
  EXPECT_EQ(encode(9 * 16000).encoded, 2);
  EncodeStats s = encode(10 * 16000);  // window 0 is whole and unchanged
  EXPECT_EQ(s.reused, 1);
  EXPECT_EQ(s.encoded, 1);
  for (size_t i = 10 * 16000; i < 10 * 16000 + 8000; ++i) {  // 1 kHz at full scale: louder than all before
    pcm[i] = static_cast<float>(std::sin(2 * M_PI * 1000.0 * static_cast<double>(i) / 16000.0));
  }
  s = encode(11 * 16000);
  EXPECT_EQ(s.reused, 0);
  EXPECT_EQ(s.encoded, 2);
  EXPECT_EQ(encode(12 * 16000).reused, 1);
  // The same buffer again: every window kept, the last one too.
  EXPECT_EQ(encode(12 * 16000).reused, 2);
}

// mtmd's own token count (its zero-padded last chunk kept), and Hugging Face's
// frame count: kept windows equal a full re-encode there too.
TEST_F(Qwen3AsrReuse, KeptWindowsEqualAFullReencodeForEitherTokenCount) {
  for (const bool mtmd_count : {true, false}) {
    ModelOptions a_options = with_reuse(true), b_options = with_reuse(false);
    a_options.reference_audio_length = b_options.reference_audio_length = !mtmd_count;
    if (!mtmd_count) a_options.mel_frames = b_options.mel_frames = MelFrames::kHf;
    Session a(Model::load(pair.text, pair.mmproj, a_options), {{3, 0}});
    Session b(Model::load(pair.text, pair.mmproj, b_options), {{3, 0}});
    int reused = 0;
    for (size_t end = 20000; end < 12 * 16000; end += 13001) {
      const std::span<const float> buffer = part(0, end);
      ASSERT_EQ(a.encode(buffer), b.encode(buffer));
      ASSERT_EQ(a.audio_embeddings(), b.audio_embeddings()) << end;
      reused += a.last_encode().reused;
    }
    EXPECT_GE(reused, 1);
  }
}

// Streams sharing a model encode one at a time on its one libmtmd context: on
// threads, each gets what it gets alone.
TEST_F(Qwen3AsrReuse, StreamsOnThreadsEncodeAsAlone) {
  std::vector<std::vector<float>> alone;
  {
    Session s(kept, {{3, 0}});
    for (int t = 0; t < 3; ++t) {
      s.encode(part(static_cast<size_t>(t) * 16000, static_cast<size_t>(t + 9) * 16000));
      alone.push_back(s.audio_embeddings());
    }
  }
  std::vector<std::vector<float>> got(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      Session s(kept, {{3, 0}});
      for (int i = 0; i < 3; ++i) s.encode(part(static_cast<size_t>(t) * 16000, static_cast<size_t>(t + 9) * 16000));
      got[static_cast<size_t>(t)] = s.audio_embeddings();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 3; ++t) EXPECT_EQ(got[static_cast<size_t>(t)], alone[static_cast<size_t>(t)]) << t;
}

#endif  // EARSHOT_QWEN3ASR_REUSE_SWEEP

// AlignAtt's passes as a stream makes them: the buffer grows by about a second
// and is trimmed by whole windows past 15 s; each pass encodes it, prefills the
// prompt with the last 30 committed tokens after it and steps greedily, and
// commits the first few tokens of the pass. A stream keeping its windows and its
// prompt's KV rows (the rows before the first changed position: the system turn
// and the whole windows' audio) gives the logits of one that encodes and prefills
// everything every pass, fed the same tokens. On ggml's kernels its logits are the same bit
// for bit (a row's products do not depend on the rows beside it). On OpenBLAS
// (the default) they differ by rounding: sgemm's blocking follows the number of
// rows, and a K/V value one f32 ulp apart can round to f16 one f16 ulp apart
// (max |diff| / max |logit| 8.5e-5 here; with an F32 KV cache 6.8e-7).
struct Model4 {
  PairDims dims;
  uint32_t seed;
  size_t audio_offset;
  runtime::CpuKernels kernels;
};

void expect_prefills_decode_as_full_ones(std::span<const Model4> models) {
  const fs::path& dir = Qwen3AsrReuse::dir;
  const auto part = &Qwen3AsrReuse::part;
  const std::vector<float>& speech = Qwen3AsrReuse::speech;
  using runtime::CpuKernels;
  float worst = 0;
  int ties = 0;  // greedy choices that differed on a near-tie (OpenBLAS only)
  for (const Model4& m : models) {
    SCOPED_TRACE("seed " + std::to_string(m.seed));
    const WrittenPair files =
        write_random_pair(m.dims, EARSHOT_QWEN2_VOCAB, dir / ("m" + std::to_string(m.seed)), m.seed);
    Session a(Model::load(files.text, files.mmproj, with_reuse(true, m.kernels)), {{m.dims.text.n_layer - 1, 0}});
    Session b(Model::load(files.text, files.mmproj, with_reuse(false, m.kernels)), {{m.dims.text.n_layer - 1, 0}});
    float model_worst = 0;
    std::vector<int32_t> committed;
    size_t begin = m.audio_offset, end = m.audio_offset + 8000;
    int passes = 0, reused_passes = 0, steps = 0;
    for (size_t piece = 0; end < m.audio_offset + 21 * 16000 && end <= speech.size(); ++piece) {
      end += 13000 + (piece * 2711) % 6000;
      while (end - begin > 15 * 16000) begin += static_cast<size_t>(kWindowSamples);
      const std::span<const float> buffer = part(begin, end);
      a.encode(buffer);
      b.encode(buffer);
      PromptSpec prompt{"", "English", {}};
      prompt.prefix_tokens.assign(committed.end() - std::min<std::ptrdiff_t>(30, std::ssize(committed)),
                                  committed.end());
      int32_t ta = a.prefill(prompt), tb = b.prefill(prompt);
      EXPECT_EQ(a.last_prefill().tokens, b.last_prefill().tokens);
      EXPECT_EQ(b.last_prefill().reused, 0);
      EXPECT_EQ(a.last_prefill().reused + a.last_prefill().decoded, a.last_prefill().tokens);
      reused_passes += a.last_prefill().reused > a.audio_begin();
      // The logits' difference bounds everything (below); the greedy choices are
      // equal but where two logits lie closer than twice that difference: random
      // weights over a 151k vocabulary make such near-ties, and where OpenBLAS
      // rounds (the CPU's sgemm kernel decides how) one may fall the other way. b is
      // teacher-forced with a's tokens, so a tie does not send the sessions apart.
      auto compare = [&](int32_t ta, int32_t tb, const std::string& where) {
        float diff = 0, scale = 0;
        for (size_t k = 0; k < a.logits().size(); ++k) {
          diff = std::max(diff, std::abs(a.logits()[k] - b.logits()[k]));
          scale = std::max(scale, std::abs(b.logits()[k]));
        }
        model_worst = std::max(model_worst, diff / scale);
        if (ta == tb) return;
        ++ties;
        EXPECT_NE(m.kernels, CpuKernels::kGgml) << where << ": ggml's kernels give the same logits bit for bit";
      };
      compare(ta, tb, "pass " + std::to_string(passes) + " prefill");
      std::vector<int32_t> pass{ta};
      for (int step = 0; step < 6 && !a.model().is_end(ta); ++step, ++steps) {
        const int32_t given = ta;
        ta = a.step(given);
        tb = b.step(given);
        ASSERT_EQ(a.step_frames(), b.step_frames());
        compare(ta, tb, "pass " + std::to_string(passes) + " step " + std::to_string(step));
        pass.push_back(ta);
      }
      committed.insert(committed.end(), pass.begin(), pass.begin() + std::min<std::ptrdiff_t>(3, std::ssize(pass)));
      ++passes;
    }
    EXPECT_GE(passes, 15);
    EXPECT_GE(steps, 30);
    EXPECT_GE(reused_passes, passes / 3) << "passes that kept audio rows";
    if (m.kernels == CpuKernels::kGgml) {
      EXPECT_EQ(model_worst, 0.0f);
    } else {
      worst = std::max(worst, model_worst);
    }
  }
  std::printf("OpenBLAS: max |logit diff| / max |logit|, kept KV rows against a full prefill: %.3g; %d near-ties\n",
              worst, ties);
  EXPECT_LT(worst, 1e-3f);
}

#ifndef EARSHOT_QWEN3ASR_REUSE_SWEEP
// One model on each kernel path (OpenBLAS's, ggml's); the six-model sweep is
// earshot_qwen3asr_reuse_sweep_test (labelled slow: Release only).
TEST_F(Qwen3AsrReuse, APrefillFromTheFirstChangedPositionDecodesAsAFullOne) {
  const Model4 models[] = {{PairDims::tiny(), 21, 0, runtime::CpuKernels::kAuto},
                           {PairDims::tiny(), 25, 2 * 16000, runtime::CpuKernels::kGgml}};
  expect_prefills_decode_as_full_ones(models);
}
#else
// Six random models, two of them wider, at several offsets into the speech.
TEST_F(Qwen3AsrReuse, APrefillFromTheFirstChangedPositionDecodesAsAFullOneOnSixModels) {
  PairDims wide = PairDims::tiny();
  wide.text.n_embd = 128;
  wide.text.n_layer = 6;
  wide.text.n_head = 8;
  wide.text.n_head_kv = 4;
  wide.text.n_ff = 256;
  wide.audio.n_embd = 64;
  wide.audio.n_layer = 3;
  using runtime::CpuKernels;
  const Model4 models[] = {
      {PairDims::tiny(), 21, 0, CpuKernels::kAuto},          {PairDims::tiny(), 22, 5 * 16000, CpuKernels::kAuto},
      {PairDims::tiny(), 23, 11 * 16000, CpuKernels::kAuto}, {wide, 24, 3 * 16000, CpuKernels::kAuto},
      {PairDims::tiny(), 25, 2 * 16000, CpuKernels::kGgml},  {wide, 26, 7 * 16000, CpuKernels::kGgml}};
  expect_prefills_decode_as_full_ones(models);
}
#endif  // EARSHOT_QWEN3ASR_REUSE_SWEEP

#ifndef EARSHOT_QWEN3ASR_REUSE_SWEEP
// The same prompt twice: every row but the last kept, the same answer; a
// changed context re-decodes from the system turn's first changed token.
TEST_F(Qwen3AsrReuse, ThePrefillReusesTheLongestUnchangedPrefix) {
  Session s(kept, {{3, 0}});
  s.encode(part(0, 3 * 16000));
  const int32_t first = s.prefill({"context", "English", {}});
  const int n = s.n_past();
  EXPECT_EQ(s.last_prefill().reused, 0);
  EXPECT_EQ(s.prefill({"context", "English", {}}), first);
  EXPECT_EQ(s.last_prefill().reused, n - 1);
  EXPECT_EQ(s.last_prefill().decoded, 1);
  s.step(first);
  // With the step's token carried as a committed token: the step's row is kept too.
  s.prefill({"context", "English", {first}});
  EXPECT_EQ(s.last_prefill().reused, n);
  EXPECT_EQ(s.last_prefill().decoded, 1);
  // Another system text: from its first different token on.
  s.prefill({"contexts", "English", {}});
  EXPECT_LT(s.last_prefill().reused, s.audio_begin());
  // New audio in the last window only: the audio's rows from that window's first token.
  s.encode(part(0, 10 * 16000));
  s.prefill({"contexts", "English", {}});
  s.encode(part(0, 11 * 16000));
  EXPECT_EQ(s.last_encode().reused, 1);
  s.prefill({"contexts", "English", {}});
  EXPECT_EQ(s.last_prefill().reused, s.audio_begin() + kTokensPerChunk * (kWindowFrames / kChunkFrames));
}
#endif  // EARSHOT_QWEN3ASR_REUSE_SWEEP

}  // namespace
}  // namespace earshot::qwen3asr
