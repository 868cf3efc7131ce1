// Facts of whisper.cpp's legacy ggml Whisper file shared by the loader and the
// random-model writer: the magic, the weight types, and the list of tensors
// (name, shape, storage type) that a file with given hyper-parameters holds.
#pragma once

#include <ggml.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/whisper/hparams.h"
#include "model/whisper/model.h"

namespace earshot::whisper {

inline constexpr uint32_t kGgmlFileMagic = 0x67676d6c;  // "ggml"
inline constexpr int kMelFftBins = 201;                 // n_fft of the stored filters
inline constexpr int kMaxLayers = 64;                   // large has 32; more is a corrupt header
inline constexpr int kMaxState = 8192;                  // large has 1280
inline constexpr int kMaxTextCtx = 4096;                // Whisper uses 448
inline constexpr int kMaxAudioCtx = 8192;               // Whisper uses 1500
inline constexpr int kMaxTensorNameLength = 256;
inline constexpr int kMaxTokenLength = 1024;  // longest real token is 128 bytes

// The weight type of a file's ftype (without the quantisation version):
// 0 f32, 1 f16, 2 q4_0, 3 q4_1, 7 q8_0, 8 q5_0, 9 q5_1; nullopt for any other.
std::optional<ggml_type> weight_type_of_ftype(int32_t ftype);
// The inverse; -1 for a type the format cannot express.
int32_t ftype_of_weight_type(ggml_type type);
// "f16", "q5_0", ... (ggml's names).
std::string_view type_name(ggml_type type);
// Parses "f32|f16|q4_0|q4_1|q5_0|q5_1|q8_0"; nullopt otherwise.
std::optional<ggml_type> parse_weight_type(std::string_view name);

// Which field of Weights/EncoderLayer/DecoderLayer a tensor fills.
enum class TensorRole {
  kEncPos,
  kConv1W,
  kConv1B,
  kConv2W,
  kConv2B,
  kEncLnW,
  kEncLnB,
  kDecPos,
  kTokenEmb,
  kDecLnW,
  kDecLnB,
  kAttnLnW,
  kAttnLnB,
  kAttnQW,
  kAttnQB,
  kAttnKW,
  kAttnVW,
  kAttnVB,
  kAttnOutW,
  kAttnOutB,
  kCrossLnW,
  kCrossLnB,
  kCrossQW,
  kCrossQB,
  kCrossKW,
  kCrossVW,
  kCrossVB,
  kCrossOutW,
  kCrossOutB,
  kMlpLnW,
  kMlpLnB,
  kMlp0W,
  kMlp0B,
  kMlp1W,
  kMlp1B,
};

// How a tensor's initial values should be drawn by the random-model writer.
enum class TensorInit { kMatrix, kBias, kLayerNormWeight, kLayerNormBias, kEmbedding, kPositional };

struct TensorSpec {
  std::string name;
  int n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ggml order: ne[0] is the contiguous dimension
  ggml_type type = GGML_TYPE_F32;            // storage type in a file of the given weight type
  TensorRole role = TensorRole::kEncPos;
  int layer = -1;  // block index for per-layer tensors, -1 otherwise
  bool encoder = true;
  TensorInit init = TensorInit::kMatrix;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

// Throws kInvalidModel naming the first absurd hyper-parameter: an n_vocab that
// is no Whisper vocabulary, layer/head/state/context counts that are zero or
// huge, heads that do not divide the state, n_mels other than 80/128, an
// unsupported ftype, or a state the weight type's block size does not divide.
void validate_hparams(const Hparams& hparams);

// Every tensor of a model, in the order openai-whisper's state dict (and thus
// convert-pt-to-ggml.py) writes them. Types follow whisper.cpp's conventions:
// 1-D tensors, conv biases and positional embeddings f32; conv kernels f16
// (f32 in an all-f32 file, never quantised since they are 3-D); every other
// 2-D tensor in the weight type. hparams must already be validated.
std::vector<TensorSpec> model_tensor_specs(const Hparams& hparams, ggml_type weight_type);

// Everything before the tensor records, exactly as stored.
struct FileHeader {
  Hparams hparams;
  MelFilters mel_filters;               // as stored: may be empty or of another size than n_mels
  std::vector<std::string> vocabulary;  // as stored, without padding to n_vocab
  uint64_t tensors_offset = 0;          // where the first tensor record starts
  uint64_t file_size = 0;
};

// Reads and validates the header, mel filters and vocabulary of a file (a model
// or a tensor-less template). Throws like Model::load.
FileHeader read_file_header(const std::filesystem::path& path);

}  // namespace earshot::whisper
