// Helpers for the runtime tests: a temporary folder, file bytes, a small GGUF
// model of a made-up architecture, and an independent walker of the GGUF layout
// (written from the format's description, not from our reader) that finds the
// byte offset of every field so tests can corrupt exactly one.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/runtime/gguf_file.h"
#include "model/runtime/weights.h"

namespace earshot::runtime::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("earshot-runtime-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
template <typename T>
void put(std::vector<uint8_t>& bytes, uint64_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}
template <typename T>
T get(const std::vector<uint8_t>& bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// Reproducible values in [-1, 1) (splitmix64).
inline std::vector<float> random_values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    x = static_cast<float>((z ^ (z >> 31)) >> 40) / static_cast<float>(1ull << 23) - 1.0f;
  }
  return v;
}

// The tensors of the small test model ("toy" architecture): several storage types.
inline std::vector<ExpectedTensor> toy_tensors() {
  return {
      {"token_embd.weight", GGML_TYPE_F16, 2, {64, 10, 1, 1}},
      {"blk.0.attn_norm.weight", GGML_TYPE_F32, 1, {64, 1, 1, 1}},
      {"blk.0.attn_q.weight", GGML_TYPE_Q8_0, 2, {64, 64, 1, 1}},
      {"blk.1.ffn_up.weight", GGML_TYPE_Q4_0, 2, {64, 32, 1, 1}},
      {"blk.1.conv.weight", GGML_TYPE_F32, 3, {3, 4, 8, 1}},
      {"output.bias", GGML_TYPE_F32, 1, {10, 1, 1, 1}},
  };
}

// Writes the toy model: metadata of the architecture plus random tensors.
inline void write_toy_model(const std::filesystem::path& path, uint64_t seed = 1) {
  GgufWriter writer;
  writer.set_architecture("toy");
  writer.set<uint32_t>("toy.block_count", 2);
  writer.set<uint32_t>("toy.embedding_length", 64);
  writer.set<float>("toy.attention.layer_norm_epsilon", 1e-5f);
  writer.set("general.name", "toy test model");
  const std::vector<std::string> tokens = {"<s>", "a", "b", "c", "hello", " world", "</s>", "x", "y", "z"};
  writer.set_array<std::string>("tokenizer.ggml.tokens", tokens);
  for (const ExpectedTensor& t : toy_tensors()) {
    const size_t n = static_cast<size_t>(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
    writer.add_tensor_f32(t.name, t.type, std::span<const int64_t>(t.ne.data(), t.n_dims), random_values(n, seed++));
  }
  writer.write(path);
}

// Offsets of every field of a GGUF file.
struct GgufLayout {
  struct Kv {
    std::string key;
    uint64_t begin = 0;  // of the key's length
    uint64_t type = 0;   // of the value type
    uint64_t value = 0;  // of the value (for an array: of its element type)
  };
  struct Info {
    std::string name;
    uint64_t begin = 0, n_dims = 0, ne = 0, type = 0, offset = 0;
    uint64_t data = 0;  // absolute offset of the data
    uint64_t n_bytes = 0;
  };
  static constexpr uint64_t kNTensorsField = 8, kNKvField = 16, kVersionField = 4;
  std::vector<Kv> kvs;
  std::vector<Info> infos;
  uint64_t data_offset = 0;
};

inline GgufLayout walk_gguf(const std::vector<uint8_t>& b) {
  GgufLayout layout;
  uint64_t at = 8;
  const auto n_tensors = get<int64_t>(b, at);
  const auto n_kv = get<int64_t>(b, at + 8);
  at += 16;
  auto string = [&]() {
    const auto n = get<uint64_t>(b, at);
    std::string s(reinterpret_cast<const char*>(b.data() + at + 8), n);
    at += 8 + n;
    return s;
  };
  auto scalar_size = [](int32_t type) -> uint64_t {
    static const uint64_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return sizes[type];
  };
  for (int64_t i = 0; i < n_kv; ++i) {
    GgufLayout::Kv kv;
    kv.begin = at;
    kv.key = string();
    kv.type = at;
    const auto type = get<int32_t>(b, at);
    at += 4;
    kv.value = at;
    if (type == 8) {
      string();
    } else if (type == 9) {
      const auto element = get<int32_t>(b, at);
      const auto n = get<uint64_t>(b, at + 4);
      at += 12;
      for (uint64_t j = 0; j < n; ++j) {
        if (element == 8) {
          string();
        } else {
          at += scalar_size(element);
        }
      }
    } else {
      at += scalar_size(type);
    }
    layout.kvs.push_back(kv);
  }
  for (int64_t i = 0; i < n_tensors; ++i) {
    GgufLayout::Info info;
    info.begin = at;
    info.name = string();
    info.n_dims = at;
    const auto n_dims = get<uint32_t>(b, at);
    at += 4;
    info.ne = at;
    int64_t ne[4] = {1, 1, 1, 1};
    for (uint32_t d = 0; d < n_dims; ++d) ne[d] = get<int64_t>(b, at + 8 * d);
    at += 8 * n_dims;
    info.type = at;
    const auto type = static_cast<ggml_type>(get<int32_t>(b, at));
    at += 4;
    info.offset = at;
    at += 8;
    info.n_bytes = ggml_row_size(type, ne[0]) * static_cast<uint64_t>(ne[1] * ne[2] * ne[3]);
    layout.infos.push_back(info);
  }
  layout.data_offset = (at + 31) / 32 * 32;
  for (auto& info : layout.infos) info.data = layout.data_offset + get<uint64_t>(b, info.offset);
  return layout;
}

}  // namespace earshot::runtime::testing
