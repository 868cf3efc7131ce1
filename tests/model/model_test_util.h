// Helpers for the model tests (and the end-to-end tests of other parts, which
// include it as "../model/model_test_util.h"): random models written to a
// per-test temporary folder, and an independent parser of the tensor records of a legacy ggml file
// (so tests can corrupt specific fields).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/whisper/model.h"
#include "model/whisper/model_format.h"
#include "model/whisper/model_writer.h"

namespace earshot::whisper::testing {

// n samples of Gaussian noise (sigma 0.1): audio the random models encode to something non-degenerate.
inline std::vector<float> noise_audio(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  std::vector<float> pcm(n);
  for (float& x : pcm) x = noise(rng);
  return pcm;
}

inline std::filesystem::path shared_dir() { return EARSHOT_SHARED_DIR; }
inline std::filesystem::path template_path(const std::string& size) {
  return shared_dir() / "models" / ("for-tests-ggml-" + size + ".bin");
}

// A folder removed with its content when the test ends.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("earshot-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

// A small model: 64-wide, 2 heads, 2+2 layers, short contexts (fast to write and load).
inline RandomModelSpec small_spec(const std::string& template_size = "tiny.en", ggml_type type = GGML_TYPE_F16,
                                  uint64_t seed = 7) {
  RandomModelSpec spec;
  spec.template_path = template_path(template_size);
  spec.hparams = read_file_header(spec.template_path).hparams;
  spec.hparams.n_audio_state = spec.hparams.n_text_state = 64;
  spec.hparams.n_audio_head = spec.hparams.n_text_head = 2;
  spec.hparams.n_audio_layer = spec.hparams.n_text_layer = 2;
  spec.hparams.n_audio_ctx = 24;
  spec.hparams.n_text_ctx = 16;
  spec.weight_type = type;
  spec.seed = seed;
  return spec;
}

// A model for running the whole pipeline in seconds: tiny.en's full contexts and
// real GPT-2 vocabulary, 64-wide, 2 heads, 1 audio + 2 text layers, f32 weights.
inline RandomModelSpec pipeline_spec(uint64_t seed) {
  RandomModelSpec spec;
  spec.template_path = template_path("tiny.en");
  spec.hparams = read_file_header(spec.template_path).hparams;
  spec.hparams.n_audio_state = 64;
  spec.hparams.n_audio_head = 2;
  spec.hparams.n_audio_layer = 1;
  spec.hparams.n_text_state = 64;
  spec.hparams.n_text_head = 2;
  spec.hparams.n_text_layer = 2;
  spec.weight_type = GGML_TYPE_F32;
  spec.seed = seed;
  spec.vocab_tiktoken = shared_dir() / "models" / "whisper-gpt2.tiktoken";
  return spec;
}

// Writes the model to a temporary folder (named after `tag`) and loads it; the file is gone on return.
inline std::shared_ptr<const Model> load_random_model(const RandomModelSpec& spec, const std::string& tag) {
  TempDir dir(tag);
  write_random_model(spec, dir / "model.bin");
  return Model::load(dir / "model.bin");
}

inline std::vector<char> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline int32_t get_i32(const std::vector<char>& bytes, size_t offset) {
  int32_t v;
  std::memcpy(&v, bytes.data() + offset, 4);
  return v;
}
inline void set_i32(std::vector<char>& bytes, size_t offset, int32_t v) { std::memcpy(bytes.data() + offset, &v, 4); }

// Byte offsets of the header fields.
inline constexpr size_t kHparamsOffset = 4;  // 11 int32 after the magic
inline size_t hparam_offset(int index) { return kHparamsOffset + 4 * static_cast<size_t>(index); }
inline constexpr size_t kMelOffset = 48;  // int32 n_mel, int32 n_fft, data

// Keeps only the first n_keep vocabulary tokens (the loader pads the rest):
// files that parse in microseconds, for the fuzz test.
inline std::vector<char> shrink_vocabulary(const std::vector<char>& bytes, int32_t n_keep) {
  size_t off = kMelOffset;
  off += 8 + 4 * static_cast<size_t>(get_i32(bytes, off)) * get_i32(bytes, off + 4);
  const size_t count_offset = off;
  off += 4;
  for (int32_t i = 0; i < n_keep; ++i) off += 4 + get_i32(bytes, off);
  const size_t kept_end = off;
  for (int32_t i = n_keep; i < get_i32(bytes, count_offset); ++i) off += 4 + get_i32(bytes, off);
  std::vector<char> out(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(kept_end));
  set_i32(out, count_offset, n_keep);
  out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(off), bytes.end());
  return out;
}

struct Record {
  size_t begin = 0;        // n_dims field
  size_t ne_offset = 0;    // first ne
  size_t type_offset = 0;  // ttype field
  size_t name_offset = 0;
  size_t data_offset = 0;
  size_t end = 0;  // one past the data
  std::string name;
};

// Parses a well-formed file written by write_random_model (sizes from its tensor specs).
inline std::vector<Record> parse_records(const std::vector<char>& bytes) {
  size_t off = kMelOffset;
  const int32_t n_mel = get_i32(bytes, off), n_fft = get_i32(bytes, off + 4);
  off += 8 + 4 * static_cast<size_t>(n_mel) * n_fft;
  const int32_t n_tokens = get_i32(bytes, off);
  off += 4;
  for (int32_t i = 0; i < n_tokens; ++i) off += 4 + get_i32(bytes, off);
  Hparams h;
  int32_t* fields[] = {&h.n_vocab,    &h.n_audio_ctx,  &h.n_audio_state, &h.n_audio_head, &h.n_audio_layer,
                       &h.n_text_ctx, &h.n_text_state, &h.n_text_head,   &h.n_text_layer, &h.n_mels};
  for (int i = 0; i < 10; ++i) *fields[i] = get_i32(bytes, hparam_offset(i));
  const int32_t ftype = get_i32(bytes, hparam_offset(10)) % 1000;
  std::vector<Record> records;
  for (const TensorSpec& spec : model_tensor_specs(h, *weight_type_of_ftype(ftype))) {
    Record r;
    r.begin = off;
    r.type_offset = off + 8;
    r.ne_offset = off + 12;
    const int32_t n_dims = get_i32(bytes, off);
    const int32_t name_length = get_i32(bytes, off + 4);
    r.name_offset = r.ne_offset + 4 * static_cast<size_t>(n_dims);
    r.name.assign(bytes.data() + r.name_offset, name_length);
    r.data_offset = r.name_offset + name_length;
    r.end = r.data_offset + ggml_row_size(spec.type, spec.ne[0]) * spec.ne[1] * spec.ne[2] * spec.ne[3];
    off = r.end;
    records.push_back(r);
  }
  return records;
}

}  // namespace earshot::whisper::testing
