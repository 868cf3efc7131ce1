// Random-weight Qwen3-ASR GGUF pairs in the files users have (ggml-org's
// Qwen3-ASR-*-GGUF as llama.cpp v0.5.0 converts them): a text GGUF of arch
// `qwen3vl` (Qwen3 decoder, tied head, IMROPE sections, no deepstack) and an
// mmproj GGUF (arch `clip`, audio projector `qwen3a`: 3 x conv2d, conv_out,
// sinusoidal positions, pre-LN blocks, post_ln, mm.a.mlp.{1,2}). The vocabulary
// is grafted from llama.cpp's Qwen2 vocabulary GGUF with Qwen3-ASR's audio and
// control tokens put at their ids. Tests and benchmarks only: no real weights.
#pragma once

#include <ggml.h>

#include <array>
#include <cstdint>
#include <filesystem>

namespace earshot::qwen3asr {

// Token ids of Qwen3-ASR's prompt (tokenizer of Qwen/Qwen3-ASR-*).
inline constexpr int32_t kEndOfText = 151643;
inline constexpr int32_t kImStart = 151644;
inline constexpr int32_t kImEnd = 151645;
inline constexpr int32_t kAudioStart = 151669;
inline constexpr int32_t kAudioEnd = 151670;
inline constexpr int32_t kAudioPad = 151676;
inline constexpr int32_t kAsrText = 151704;
inline constexpr int32_t kVocabSize = 151936;

struct TextDims {
  uint32_t n_embd = 64;
  uint32_t n_layer = 4;
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t head_dim = 16;
  uint32_t n_ff = 128;
  uint32_t n_ctx = 4096;
  float rope_theta = 1e6f;
  float rms_eps = 1e-6f;
  std::array<int32_t, 4> rope_sections = {4, 2, 2, 0};  // sums to head_dim / 2 (0.6B: 24, 20, 20, 0)
};

struct AudioDims {
  uint32_t n_embd = 32;  // d_model
  uint32_t n_layer = 2;
  uint32_t n_head = 2;
  uint32_t n_ff = 64;
  uint32_t conv_channels = 8;  // 480 in the real models
  uint32_t n_mel = 128;
  float ln_eps = 1e-5f;
};

struct PairDims {
  TextDims text;
  AudioDims audio;
  bool f32_weights = false;  // every tensor F32 (the numpy reference's exact comparisons); else matrices F16
  static PairDims tiny() { return {}; }
  // Qwen3-ASR-0.6B and -1.7B (public configs): for the benchmark, written at bench time.
  static PairDims real_0_6b();
  static PairDims real_1_7b();
};

struct WrittenPair {
  std::filesystem::path text;
  std::filesystem::path mmproj;
};

// Writes `<out_prefix>.gguf` and `<out_prefix>-mmproj.gguf`. `vocab` is
// llama.cpp's models/ggml-vocab-qwen2.gguf. Throws earshot::Error (kIo,
// kInvalidModel for a vocabulary that is not Qwen2's 151936 tokens).
WrittenPair write_random_pair(const PairDims& dims, const std::filesystem::path& vocab,
                              const std::filesystem::path& out_prefix, uint32_t seed = 1);

// Rewrites the text GGUF at `text` with its matrices quantised to `type`
// (GGML_TYPE_Q8_0 or GGML_TYPE_Q4_0) by libllama's quantizer, exactly as
// llama.cpp's llama-quantize writes such a file (norms and the token embedding
// as that tool leaves them). The mmproj is not touched: libllama's quantizer does
// not take it. Throws earshot::Error (kInvalidArgument for another type, kIo when
// libllama fails).
void quantize_text_model(const std::filesystem::path& text, ggml_type type);
// The same, writing `out` from `in` (`in` is left as it is).
void quantize_text_model(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type);

// Rewrites the mmproj GGUF at `mmproj` with its matrices at GGML_TYPE_Q8_0, as
// llama.cpp's convert_hf_to_gguf.py --outtype q8_0 writes Qwen3-ASR's (ggml-org's
// mmproj-Qwen3-ASR-*-Q8_0.gguf): the blocks' attention and feed-forward matrices
// and the projector's two; the conv stem and conv_out stay F16, norms, biases
// and the positions F32. Throws earshot::Error (kInvalidArgument for another type
// or a file that is not F16/F32, kIo).
void quantize_mmproj(const std::filesystem::path& mmproj, ggml_type type);
// The same, writing `out` from `in` (`in` is left as it is).
void quantize_mmproj(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type);

}  // namespace earshot::qwen3asr
