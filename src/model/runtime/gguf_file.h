// GGUF, the file format of every model family after Whisper: a reader over
// ggml's gguf.h that turns each way a file can be wrong into an error a user can
// act on, typed metadata getters, the tensor table, and a writer for the tests
// and the random-weight model generators.
//
//   auto file = runtime::GgufFile::open("model.gguf");
//   const uint32_t n_layer = file.get_u32(file.architecture() + ".block_count");
//   const runtime::GgufTensor* t = file.find_tensor("token_embd.weight");
#pragma once

#include <ggml.h>

#include <array>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct gguf_context;

// The value types GGUF metadata holds: the T of GgufFile::find/get and
// GgufWriter::set, instantiated in the .cpp files by applying X to each.
// clang-format off
#define EARSHOT_GGUF_VALUE_TYPES(X)                                             \
  X(uint8_t) X(int8_t) X(uint16_t) X(int16_t) X(uint32_t) X(int32_t)            \
  X(uint64_t) X(int64_t) X(float) X(double) X(bool) X(std::string)
// clang-format on

namespace earshot::runtime {

inline constexpr char kArchitectureKey[] = "general.architecture";

// A metadata value's type, numbered as gguf.h's gguf_type.
enum class MetaType : int {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
// "u32", "string", "array", ... (for messages).
std::string_view meta_type_name(MetaType type);

// One tensor of the table: where its bytes are in the file and how many.
struct GgufTensor {
  std::string name;
  ggml_type type = GGML_TYPE_F32;
  int n_dims = 0;                            // as stored (0 for a scalar)
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ggml order: ne[0] is the contiguous dimension
  uint64_t offset = 0;                       // of the first data byte, from the start of the file
  uint64_t n_bytes = 0;
};

struct GgufContextDeleter {
  void operator()(gguf_context* ctx) const;
};

class GgufFile {
 public:
  // Reads the metadata and the tensor table (not the tensor data). Throws
  // earshot::Error: kIo when the file cannot be read; kInvalidModel when it is
  // not a GGUF file (naming what it looks like: a legacy ggml model, safetensors,
  // a .nemo archive, an HTML page from a failed download...), has an unsupported
  // version, is truncated (at which key or tensor, expected vs actual bytes), or
  // has an unknown value or tensor type, duplicate keys or tensors, misplaced data.
  static GgufFile open(const std::filesystem::path& path);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return file_size_; }
  uint32_t alignment() const { return alignment_; }
  // general.architecture ("" when the file has none).
  const std::string& architecture() const { return architecture_; }

  // Metadata. find_* return nullopt for a missing key; get_* throw
  // Error(kInvalidModel) naming the key, the file and the architecture. Both
  // throw kInvalidModel when the key holds another type (no conversions: a u32
  // is not read as an i32).
  bool has(std::string_view key) const;
  std::optional<MetaType> key_type(std::string_view key) const;
  std::vector<std::string> keys() const;
  // T: one of EARSHOT_GGUF_VALUE_TYPES (top of this file).
  template <typename T>
  std::optional<T> find(std::string_view key) const;
  template <typename T>
  T get(std::string_view key) const;
  // Arrays of any of those element types.
  template <typename T>
  std::optional<std::vector<T>> find_array(std::string_view key) const;
  template <typename T>
  std::vector<T> get_array(std::string_view key) const;

  std::string get_string(std::string_view key) const { return get<std::string>(key); }
  uint32_t get_u32(std::string_view key) const { return get<uint32_t>(key); }
  // A u32 count or size (layers, heads, dimensions, frames) as an int, clamped
  // to kMaxCount so that a corrupt value neither wraps negative nor overflows
  // the products the caller's range checks compute; the errors are get_u32's.
  static constexpr int kMaxCount = 1 << 30;
  int get_count(std::string_view key) const {
    const uint32_t value = get_u32(key);
    return value > static_cast<uint32_t>(kMaxCount) ? kMaxCount : static_cast<int>(value);
  }
  float get_f32(std::string_view key) const { return get<float>(key); }
  std::optional<std::string> find_string(std::string_view key) const { return find<std::string>(key); }
  std::optional<uint32_t> find_u32(std::string_view key) const { return find<uint32_t>(key); }
  std::optional<float> find_f32(std::string_view key) const { return find<float>(key); }

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

  // "model file PATH (architecture 'qwen3')": how messages about this file start.
  std::string label() const;

 private:
  GgufFile() = default;
  int64_t key_id(std::string_view key, MetaType expected, bool array, bool required) const;
  [[noreturn]] void fail(const std::string& message) const;

  std::filesystem::path path_;
  uint32_t version_ = 0;
  uint64_t file_size_ = 0;
  uint32_t alignment_ = 32;
  std::string architecture_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;  // LLM files hold hundreds of tensors
  std::unique_ptr<gguf_context, GgufContextDeleter> ctx_;
};

// Builds a GGUF file in memory and writes it atomically (a temporary file in the
// same folder, flushed, then renamed over the target: a reader never sees half a
// file). Misuse (a duplicate tensor, data of the wrong size) throws
// Error(kInvalidArgument) instead of reaching ggml's aborts.
class GgufWriter {
 public:
  GgufWriter();
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Sets (or replaces) a key. T as for GgufFile::find; const char* is a string.
  // Data is aligned to GGUF's default 32 bytes (general.alignment is refused).
  template <typename T>
  void set(std::string_view key, const T& value);
  void set(std::string_view key, const char* value) { set(key, std::string(value)); }
  template <typename T>
  void set_array(std::string_view key, std::span<const T> values);
  void set_architecture(std::string_view name) { set(kArchitectureKey, std::string(name)); }

  // A tensor of any ggml type from its bytes as ggml lays them out (copied).
  // ne lists n_dims dimensions, ne[0] the contiguous one.
  void add_tensor(std::string_view name, ggml_type type, std::span<const int64_t> ne, std::span<const uint8_t> data);
  // Same from float values, converted or quantised to `type` (f32, f16, bf16 or
  // any quantised type that needs no importance matrix).
  void add_tensor_f32(std::string_view name, ggml_type type, std::span<const int64_t> ne,
                      std::span<const float> values);

  size_t n_tensors() const { return tensors_.size(); }
  // Throws Error(kIo) naming the path when the file cannot be written.
  void write(const std::filesystem::path& path) const;

 private:
  struct Tensor {
    ggml_tensor* meta;
    std::vector<uint8_t> data;
  };
  ggml_tensor* new_tensor(std::string_view name, ggml_type type, std::span<const int64_t> ne);

  std::unique_ptr<gguf_context, GgufContextDeleter> ctx_;
  std::vector<ggml_context*> tensor_contexts_;  // tensor metadata, a few hundred per context
  std::deque<Tensor> tensors_;                  // stable addresses: gguf keeps pointers to the data
};

}  // namespace earshot::runtime
