#include "model/whisper/model_writer.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "common/error.h"
#include "features/mel.h"

namespace earshot::whisper {
namespace {

// splitmix64: tiny, fast, and identical everywhere (std distributions are not).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1), never 0 so that log() is finite.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t state_;
};

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

// Box-Muller in double, rounded to float: libm differences of an ulp in double
// practically never change the float, so files are reproducible across machines.
void fill_normal(SplitMix64& rng, float mean, float stddev, std::vector<float>& out) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (size_t i = 0; i < out.size(); i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(rng.uniform()));
    const double angle = kTwoPi * rng.uniform();
    out[i] = static_cast<float>(mean + stddev * radius * std::cos(angle));
    if (i + 1 < out.size()) out[i + 1] = static_cast<float>(mean + stddev * radius * std::sin(angle));
  }
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string base64_decode(std::string_view text, const std::filesystem::path& path) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const int v = base64_value(c);
    if (v < 0)
      throw Error(ErrorCode::kInvalidArgument, "invalid base64 '" + std::string(text) + "' in " + path.string());
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

// Token bytes by rank from a tiktoken file; the template's tokens beyond its
// last rank (the English template's <|endoftext|>) are kept.
std::vector<std::string> vocabulary_from_tiktoken(const std::filesystem::path& path,
                                                  std::vector<std::string> template_tokens) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIo, "cannot open tiktoken vocabulary " + path.string());
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument, "tiktoken line without a rank in " + path.string() + ": " + line);
    }
    const long rank = std::strtol(line.c_str() + space + 1, nullptr, 10);
    if (rank < 0 || rank > 1000000) {
      throw Error(ErrorCode::kInvalidArgument, "tiktoken rank out of range in " + path.string() + ": " + line);
    }
    if (static_cast<size_t>(rank) >= tokens.size()) tokens.resize(rank + 1);
    tokens[rank] = base64_decode(std::string_view(line).substr(0, space), path);
  }
  for (size_t i = tokens.size(); i < template_tokens.size(); ++i) tokens.push_back(std::move(template_tokens[i]));
  return tokens;
}

template <typename T>
void put(std::ofstream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(value));
}

}  // namespace

std::vector<float> random_tensor_values(uint64_t seed, const TensorSpec& tensor) {
  // Each tensor has its own stream, so any one can be regenerated alone (tests compare against it).
  SplitMix64 rng(seed ^ fnv1a(tensor.name));
  std::vector<float> values(static_cast<size_t>(tensor.n_elements()));
  switch (tensor.init) {
    case TensorInit::kMatrix: {
      // fan_in: the contiguous row (ne[0]) for matrices, kernel x in-channels for convolutions.
      const double fan_in = tensor.n_dims == 3 ? static_cast<double>(tensor.ne[0] * tensor.ne[1]) : tensor.ne[0];
      fill_normal(rng, 0.0f, static_cast<float>(1.0 / std::sqrt(fan_in)), values);
      break;
    }
    case TensorInit::kBias: fill_normal(rng, 0.0f, 0.02f, values); break;
    case TensorInit::kLayerNormWeight: fill_normal(rng, 1.0f, 0.1f, values); break;
    case TensorInit::kLayerNormBias: fill_normal(rng, 0.0f, 0.02f, values); break;
    case TensorInit::kEmbedding:
      fill_normal(rng, 0.0f, static_cast<float>(3.0 / std::sqrt(static_cast<double>(tensor.ne[0]))), values);
      break;
    case TensorInit::kPositional: fill_normal(rng, 0.0f, 0.1f, values); break;
  }
  return values;
}

std::vector<uint8_t> random_tensor_bytes(uint64_t seed, const TensorSpec& tensor) {
  const std::vector<float> values = random_tensor_values(seed, tensor);
  const int64_t n_rows = tensor.ne[1] * tensor.ne[2] * tensor.ne[3];
  std::vector<uint8_t> bytes(ggml_row_size(tensor.type, tensor.ne[0]) * n_rows);
  if (tensor.type == GGML_TYPE_F32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else if (tensor.type == GGML_TYPE_F16) {
    ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<ggml_fp16_t*>(bytes.data()), tensor.n_elements());
  } else {
    ggml_quantize_chunk(tensor.type, values.data(), bytes.data(), 0, n_rows, tensor.ne[0], nullptr);
  }
  return bytes;
}

void write_random_model(const RandomModelSpec& spec, const std::filesystem::path& out_path) {
  FileHeader tmpl = read_file_header(spec.template_path);

  Hparams h = spec.hparams;
  h.ftype = ftype_of_weight_type(spec.weight_type);
  if (h.ftype < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "weight type " + std::string(type_name(spec.weight_type)) + " cannot be stored in a Whisper ggml file");
  }
  h.quantization_version = ggml_is_quantized(spec.weight_type) ? GGML_QNT_VERSION : 0;
  try {
    validate_hparams(h);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, std::string("cannot write this model: ") + e.what());
  }

  std::vector<std::string> vocabulary = std::move(tmpl.vocabulary);
  if (!spec.vocab_tiktoken.empty()) vocabulary = vocabulary_from_tiktoken(spec.vocab_tiktoken, std::move(vocabulary));
  if (vocabulary.size() > static_cast<size_t>(h.n_vocab)) vocabulary.resize(h.n_vocab);

  // The template's filters are Whisper's 80-bin bank; 128 bins are computed like the real ones.
  MelFilters filters = std::move(tmpl.mel_filters);
  if (filters.n_mel != h.n_mels || filters.n_fft != kMelFftBins) {
    filters.n_mel = h.n_mels;
    filters.n_fft = kMelFftBins;
    filters.data = features::mel_filter_bank(h.n_mels);
    if (filters.data.size() != static_cast<size_t>(h.n_mels) * kMelFftBins) {
      throw Error(ErrorCode::kInternal, "mel_filter_bank returned " + std::to_string(filters.data.size()) + " values");
    }
  }

  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorCode::kIo, "cannot create " + out_path.string());
  put<uint32_t>(out, kGgmlFileMagic);
  for (int32_t field : {h.n_vocab, h.n_audio_ctx, h.n_audio_state, h.n_audio_head, h.n_audio_layer, h.n_text_ctx,
                        h.n_text_state, h.n_text_head, h.n_text_layer, h.n_mels}) {
    put<int32_t>(out, field);
  }
  put<int32_t>(out, h.quantization_version * GGML_QNT_VERSION_FACTOR + h.ftype);
  put<int32_t>(out, filters.n_mel);
  put<int32_t>(out, filters.n_fft);
  out.write(reinterpret_cast<const char*>(filters.data.data()), static_cast<std::streamsize>(filters.data.size() * 4));
  put<int32_t>(out, static_cast<int32_t>(vocabulary.size()));
  for (const std::string& token : vocabulary) {
    put<int32_t>(out, static_cast<int32_t>(token.size()));
    out.write(token.data(), static_cast<std::streamsize>(token.size()));
  }

  for (const TensorSpec& tensor : model_tensor_specs(h, spec.weight_type)) {
    put<int32_t>(out, tensor.n_dims);
    put<int32_t>(out, static_cast<int32_t>(tensor.name.size()));
    put<int32_t>(out, static_cast<int32_t>(tensor.type));
    for (int i = 0; i < tensor.n_dims; ++i) put<int32_t>(out, static_cast<int32_t>(tensor.ne[i]));
    out.write(tensor.name.data(), static_cast<std::streamsize>(tensor.name.size()));
    const std::vector<uint8_t> bytes = random_tensor_bytes(spec.seed, tensor);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  out.close();
  if (!out) throw Error(ErrorCode::kIo, "write error on " + out_path.string());
}

}  // namespace earshot::whisper
