// Writing Voxtral GGUFs in transcribe.cpp's published layout: its presets (which
// type each tensor gets: tools/transcribe-quantize/policy.cpp), the keys its
// converter writes (scripts/convert-voxtral_realtime.py), and a writer that
// streams tensor data to the file one tensor at a time (a real-dimension F16
// file is 8.9 GB: never in memory at once). The random-weight generator and
// the quantiser both write through it.
#pragma once

#include <ggml.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/voxtral/model.h"

struct gguf_context;

namespace earshot::voxtral {

// transcribe.cpp's presets (its file names' suffixes): BF16 is its converter's
// reference file; the rest transcribe-quantize's. F32 is earshot's (for references).
enum class Preset { kF32, kF16, kBF16, kQ8_0, kQ6_K, kQ5_K_M, kQ4_K_M };

// "F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M"; parse_preset takes
// those in any case and ggml's type names of the quantised ones ("q4_K" = Q4_K_M,
// "q5_K" = Q5_K_M, "q6_K", "q8_0").
const char* preset_name(Preset preset);
std::optional<Preset> parse_preset(std::string_view name);
// general.file_type of a file of that preset (llama.cpp's LLAMA_FTYPE numbers).
uint32_t preset_file_type(Preset preset);

// The type transcribe.cpp gives a tensor of this layout under a preset: linears
// the preset's type (Q4_K_M: attention outputs Q8_0, the token embedding Q6_K;
// rows that are not whole blocks of it fall back to Q8_0, then F16), conv
// kernels F16 in BF16 files and F32 in quantised ones, norms, biases and the
// front end's tables F32.
ggml_type tensor_type(Preset preset, const std::string& name, int64_t ne0);

// Tokens of a vocabulary to write: each normal token's bytes, each control token's name.
struct VocabTable {
  std::vector<std::string> pieces;
  std::vector<bool> control;
};

// Sets every key transcribe.cpp's converter writes for a file of these
// hyper-parameters and vocabulary (general.*, stt.*, tokenizer.ggml.* except
// the merges, which decoding never reads).
void set_metadata(gguf_context* ctx, const Hparams& hp, const VocabTable& vocab, Preset preset,
                  const std::string& variant);

// A GGUF written front to back: keys and the tensor table first (the tensors
// declared with their types and shapes), then each tensor's bytes in the
// declared order. Throws Error(kIo) naming the path; the file is written to
// PATH.part and renamed when finish() completes.
class StreamingGgufWriter {
 public:
  explicit StreamingGgufWriter(std::filesystem::path path);
  ~StreamingGgufWriter();
  StreamingGgufWriter(const StreamingGgufWriter&) = delete;
  StreamingGgufWriter& operator=(const StreamingGgufWriter&) = delete;

  gguf_context* meta() { return ctx_; }
  // ne[0] first (ggml order).
  void declare(const std::string& name, ggml_type type, std::span<const int64_t> ne);
  // After every declare: writes the header. Then write() each tensor's bytes, in order.
  void begin_data();
  void write(std::span<const uint8_t> bytes);
  void finish();

 private:
  std::filesystem::path path_, part_;
  gguf_context* ctx_ = nullptr;
  std::vector<ggml_context*> tensor_ctxs_;
  std::FILE* file_ = nullptr;
  size_t next_tensor_ = 0;
};

// `values` (ne[0] x rows floats) as `type`'s bytes (f32, f16, bf16 or a quantised type).
std::vector<uint8_t> encode_values(ggml_type type, std::span<const float> values, int64_t ne0);

}  // namespace earshot::voxtral
