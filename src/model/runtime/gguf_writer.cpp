// GgufWriter over gguf.h's context: every argument is checked here first, since
// gguf.h aborts the process on a duplicate tensor or a bad name.
#include <fcntl.h>
#include <gguf.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "model/runtime/gguf_file.h"

namespace earshot::runtime {
namespace {

constexpr size_t kTensorsPerContext = 256;

[[noreturn]] void misuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

void check_key(std::string_view key) {
  if (key.empty()) misuse("GGUF metadata keys cannot be empty");
  // gguf.h lays the data out with the default alignment whatever this key says.
  if (key == GGUF_KEY_GENERAL_ALIGNMENT) misuse("the GGUF writer keeps the default alignment (general.alignment)");
}

template <typename T>
constexpr gguf_type gguf_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return GGUF_TYPE_UINT8;
  if constexpr (std::is_same_v<T, int8_t>) return GGUF_TYPE_INT8;
  if constexpr (std::is_same_v<T, uint16_t>) return GGUF_TYPE_UINT16;
  if constexpr (std::is_same_v<T, int16_t>) return GGUF_TYPE_INT16;
  if constexpr (std::is_same_v<T, uint32_t>) return GGUF_TYPE_UINT32;
  if constexpr (std::is_same_v<T, int32_t>) return GGUF_TYPE_INT32;
  if constexpr (std::is_same_v<T, uint64_t>) return GGUF_TYPE_UINT64;
  if constexpr (std::is_same_v<T, int64_t>) return GGUF_TYPE_INT64;
  if constexpr (std::is_same_v<T, float>) return GGUF_TYPE_FLOAT32;
  if constexpr (std::is_same_v<T, double>) return GGUF_TYPE_FLOAT64;
  if constexpr (std::is_same_v<T, bool>) return GGUF_TYPE_BOOL;
  if constexpr (std::is_same_v<T, std::string>) return GGUF_TYPE_STRING;
}

}  // namespace

GgufWriter::GgufWriter() : ctx_(gguf_init_empty()) {
  if (!ctx_) throw Error(ErrorCode::kInternal, "gguf_init_empty failed");
}

GgufWriter::~GgufWriter() {
  for (ggml_context* ctx : tensor_contexts_) ggml_free(ctx);
}

template <typename T>
void GgufWriter::set(std::string_view key, const T& value) {
  check_key(key);
  const std::string k(key);
  gguf_context* c = ctx_.get();
  if constexpr (std::is_same_v<T, std::string>) {
    gguf_set_val_str(c, k.c_str(), value.c_str());
  } else if constexpr (std::is_same_v<T, bool>) {
    gguf_set_val_bool(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    gguf_set_val_u8(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, int8_t>) {
    gguf_set_val_i8(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    gguf_set_val_u16(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, int16_t>) {
    gguf_set_val_i16(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    gguf_set_val_u32(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, int32_t>) {
    gguf_set_val_i32(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    gguf_set_val_u64(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    gguf_set_val_i64(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, float>) {
    gguf_set_val_f32(c, k.c_str(), value);
  } else if constexpr (std::is_same_v<T, double>) {
    gguf_set_val_f64(c, k.c_str(), value);
  }
}

template <typename T>
void GgufWriter::set_array(std::string_view key, std::span<const T> values) {
  check_key(key);
  const std::string k(key);
  if constexpr (std::is_same_v<T, std::string>) {
    std::vector<const char*> pointers;
    for (const std::string& s : values) pointers.push_back(s.c_str());
    gguf_set_arr_str(ctx_.get(), k.c_str(), pointers.data(), pointers.size());
  } else if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());  // GGUF stores a bool in one byte
    gguf_set_arr_data(ctx_.get(), k.c_str(), GGUF_TYPE_BOOL, bytes.data(), bytes.size());
  } else {
    gguf_set_arr_data(ctx_.get(), k.c_str(), gguf_type_of<T>(), values.data(), values.size());
  }
}

ggml_tensor* GgufWriter::new_tensor(std::string_view name, ggml_type type, std::span<const int64_t> ne) {
  const std::string n(name);
  if (n.empty() || n.size() >= GGML_MAX_NAME) {
    misuse("GGUF tensor name '" + n + "' must have 1.." + std::to_string(GGML_MAX_NAME - 1) + " bytes");
  }
  if (gguf_find_tensor(ctx_.get(), n.c_str()) >= 0) misuse("duplicate GGUF tensor " + n);
  if (type < 0 || type >= GGML_TYPE_COUNT || ggml_blck_size(type) == 0) {
    misuse("tensor " + n + ": unknown ggml type " + std::to_string(static_cast<int>(type)));
  }
  if (ne.size() > GGML_MAX_DIMS) misuse("tensor " + n + " has " + std::to_string(ne.size()) + " dimensions");
  for (int64_t d : ne) {
    if (d < 0) misuse("tensor " + n + " has a negative dimension");
  }
  if (!ne.empty() && ne[0] % ggml_blck_size(type) != 0) {
    misuse("tensor " + n + ": rows of " + std::to_string(ne[0]) + " elements are not a multiple of " +
           ggml_type_name(type) + "'s block size " + std::to_string(ggml_blck_size(type)));
  }
  if (tensors_.size() % kTensorsPerContext == 0) {
    ggml_init_params params = {kTensorsPerContext * ggml_tensor_overhead(), nullptr, /*.no_alloc =*/true};
    ggml_context* ctx = ggml_init(params);
    if (ctx == nullptr) throw Error(ErrorCode::kInternal, "ggml_init failed for GGUF tensor metadata");
    tensor_contexts_.push_back(ctx);
  }
  // A scalar is a 1-element 1-D tensor in ggml.
  const int64_t scalar[1] = {1};
  ggml_tensor* t = ne.empty() ? ggml_new_tensor(tensor_contexts_.back(), type, 1, scalar)
                              : ggml_new_tensor(tensor_contexts_.back(), type, static_cast<int>(ne.size()), ne.data());
  ggml_set_name(t, n.c_str());
  return t;
}

void GgufWriter::add_tensor(std::string_view name, ggml_type type, std::span<const int64_t> ne,
                            std::span<const uint8_t> data) {
  ggml_tensor* t = new_tensor(name, type, ne);
  if (data.size() != ggml_nbytes(t)) {
    misuse("tensor " + std::string(name) + ": " + std::to_string(data.size()) + " bytes of data, its shape and type " +
           ggml_type_name(type) + " take " + std::to_string(ggml_nbytes(t)));
  }
  Tensor& stored = tensors_.emplace_back(Tensor{t, std::vector<uint8_t>(data.begin(), data.end())});
  t->data = stored.data.data();
  gguf_add_tensor(ctx_.get(), t);
}

void GgufWriter::add_tensor_f32(std::string_view name, ggml_type type, std::span<const int64_t> ne,
                                std::span<const float> values) {
  int64_t n_elements = 1;
  for (int64_t d : ne) n_elements *= d;
  if (static_cast<int64_t>(values.size()) != n_elements) {
    misuse("tensor " + std::string(name) + ": " + std::to_string(values.size()) + " values for " +
           std::to_string(n_elements) + " elements");
  }
  if (type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16 &&
      (!ggml_is_quantized(type) || ggml_quantize_requires_imatrix(type))) {
    misuse("tensor " + std::string(name) + ": cannot convert floats to " +
           (type >= 0 && type < GGML_TYPE_COUNT ? ggml_type_name(type) : "an unknown type"));
  }
  const int64_t row = ne.empty() ? 1 : ne[0];
  if (row % ggml_blck_size(type) != 0) {
    new_tensor(name, type, ne);  // throws the block size message
  }
  const int64_t rows = row == 0 ? 0 : n_elements / row;
  std::vector<uint8_t> bytes(ggml_row_size(type, row) * static_cast<size_t>(rows));
  if (type == GGML_TYPE_F32) {
    std::memcpy(bytes.data(), values.data(), values.size() * sizeof(float));
  } else if (type == GGML_TYPE_F16) {
    ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<ggml_fp16_t*>(bytes.data()), n_elements);
  } else if (type == GGML_TYPE_BF16) {
    ggml_fp32_to_bf16_row(values.data(), reinterpret_cast<ggml_bf16_t*>(bytes.data()), n_elements);
  } else if (rows > 0) {
    ggml_quantize_chunk(type, values.data(), bytes.data(), 0, rows, row, nullptr);
  }
  add_tensor(name, type, ne, bytes);
}

void GgufWriter::write(const std::filesystem::path& path) const {
  static std::atomic<unsigned> counter{0};
  std::filesystem::path temporary = path;
  temporary += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw Error(ErrorCode::kIo, "cannot write GGUF file " + path.string() + ": " + what + ": " + reason);
  };
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) fail("cannot create " + temporary.string());
  const bool written = gguf_write_to_file_ptr(ctx_.get(), file, /*only_meta =*/false);
  const bool flushed = written && std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const bool closed = std::fclose(file) == 0;
  if (!written || !flushed || !closed) fail("writing " + temporary.string());
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail("renaming " + temporary.string());
}

#define EARSHOT_GGUF_INSTANTIATE(T)                             \
  template void GgufWriter::set<T>(std::string_view, const T&); \
  template void GgufWriter::set_array<T>(std::string_view, std::span<const T>);
EARSHOT_GGUF_VALUE_TYPES(EARSHOT_GGUF_INSTANTIATE)
#undef EARSHOT_GGUF_INSTANTIATE

}  // namespace earshot::runtime
