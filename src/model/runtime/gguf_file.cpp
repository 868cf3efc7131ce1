// GgufFile: the file is checked by our own bounded scan of the metadata and the
// tensor table first (ggml's reader only logs why it refuses a file and returns
// null, and asserts on a few malformed inputs), then parsed by gguf.h, whose
// context answers every metadata and tensor query.
#include "model/runtime/gguf_file.h"

#include <fcntl.h>
#include <gguf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "common/error.h"
#include "model/runtime/model_file.h"

namespace earshot::runtime {

void GgufContextDeleter::operator()(gguf_context* ctx) const { gguf_free(ctx); }

std::string_view meta_type_name(MetaType type) {
  switch (type) {
    case MetaType::kU8: return "u8";
    case MetaType::kI8: return "i8";
    case MetaType::kU16: return "u16";
    case MetaType::kI16: return "i16";
    case MetaType::kU32: return "u32";
    case MetaType::kI32: return "i32";
    case MetaType::kF32: return "f32";
    case MetaType::kBool: return "bool";
    case MetaType::kString: return "string";
    case MetaType::kArray: return "array";
    case MetaType::kU64: return "u64";
    case MetaType::kI64: return "i64";
    case MetaType::kF64: return "f64";
  }
  return "unknown";
}

namespace {

constexpr uint32_t kMinVersion = 2;  // v1 used 32-bit counts; ggml dropped it

[[noreturn]] void invalid(const std::filesystem::path& path, const std::string& message) {
  throw Error(ErrorCode::kInvalidModel, "model file " + path.string() + ": " + message);
}

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > 80 ? out + "..." : out;
}

// Byte size of one scalar of a metadata type; 0 for strings, arrays and unknown types.
size_t scalar_size(int32_t type) {
  switch (static_cast<MetaType>(type)) {
    case MetaType::kU8:
    case MetaType::kI8:
    case MetaType::kBool: return 1;
    case MetaType::kU16:
    case MetaType::kI16: return 2;
    case MetaType::kU32:
    case MetaType::kI32:
    case MetaType::kF32: return 4;
    case MetaType::kU64:
    case MetaType::kI64:
    case MetaType::kF64: return 8;
    default: return 0;
  }
}

bool known_meta_type(int32_t type) { return type >= 0 && type <= static_cast<int32_t>(MetaType::kF64); }

// Reads the file front to back with every length checked against what remains.
class Scanner {
 public:
  Scanner(int fd, uint64_t size, const std::filesystem::path& path) : fd_(fd), size_(size), path_(path) {}

  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return size_ - offset_; }

  [[noreturn]] void truncated(const std::string& what, uint64_t expected) const {
    invalid(path_, "truncated at " + what + ": expected " + std::to_string(expected) + " bytes, got " +
                       std::to_string(remaining()));
  }
  void read(void* dst, uint64_t n, const std::string& what) {
    if (n > remaining()) truncated(what, n);
    auto* out = static_cast<char*>(dst);
    while (n > 0) {
      if (offset_ < buffer_start_ || offset_ >= buffer_start_ + buffer_.size()) fill();
      const uint64_t at = offset_ - buffer_start_;
      const uint64_t len = std::min<uint64_t>(n, buffer_.size() - at);
      std::memcpy(out, buffer_.data() + at, len);
      out += len, offset_ += len, n -= len;
    }
  }
  template <typename T>
  T value(const std::string& what) {
    T v{};
    read(&v, sizeof(v), what);
    return v;
  }
  void skip(uint64_t n, const std::string& what) {
    if (n > remaining()) truncated(what, n);
    offset_ += n;
  }
  std::string string(const std::string& what) {
    const auto length = value<uint64_t>(what);
    if (length > remaining()) truncated(what, length);
    std::string s(length, '\0');
    read(s.data(), length, what);
    return s;
  }

 private:
  void fill() {
    buffer_start_ = offset_;
    buffer_.resize(std::min<uint64_t>(kBufferSize, size_ - offset_));
    size_t done = 0;
    while (done < buffer_.size()) {
      const ssize_t got =
          ::pread(fd_, buffer_.data() + done, buffer_.size() - done, static_cast<off_t>(buffer_start_ + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw Error(ErrorCode::kIo, "read error in model file " + path_.string() + ": " +
                                        (got < 0 ? std::strerror(errno) : "unexpected end of file"));
      }
      done += static_cast<size_t>(got);
    }
  }

  static constexpr uint64_t kBufferSize = 1 << 16;
  int fd_;
  uint64_t size_;
  const std::filesystem::path& path_;
  uint64_t offset_ = 0;
  uint64_t buffer_start_ = 0;
  std::vector<char> buffer_;
};

struct ScannedTensor {
  std::string name;
  int n_dims = 0;
  uint64_t relative_offset = 0;
  uint64_t n_bytes = 0;
};

struct ScanResult {
  uint32_t version = 0;
  uint32_t alignment = GGUF_DEFAULT_ALIGNMENT;
  uint64_t data_offset = 0;
  std::vector<ScannedTensor> tensors;
};

void scan_value(Scanner& s, const std::string& key, int32_t type, const std::filesystem::path& path) {
  const std::string what = "the value of key '" + key + "'";
  if (type == static_cast<int32_t>(MetaType::kString)) {
    s.string(what);
    return;
  }
  if (type != static_cast<int32_t>(MetaType::kArray)) {
    if (!known_meta_type(type)) invalid(path, "key '" + key + "' has unknown value type " + std::to_string(type));
    s.skip(scalar_size(type), what);
    return;
  }
  const auto element = s.value<int32_t>(what);
  const auto n = s.value<uint64_t>(what);
  if (element == static_cast<int32_t>(MetaType::kArray) || !known_meta_type(element)) {
    invalid(path, "key '" + key + "' is an array of " +
                      (known_meta_type(element) ? std::string("arrays") : "unknown type " + std::to_string(element)) +
                      " (GGUF arrays hold scalars or strings)");
  }
  if (element == static_cast<int32_t>(MetaType::kString)) {
    if (n > s.remaining() / 8) s.truncated(what, n * 8);  // each string needs its 8-byte length at least
    for (uint64_t i = 0; i < n; ++i) s.string(what);
    return;
  }
  const size_t size = scalar_size(element);
  if (n > s.remaining() / size) s.truncated(what, n * size);
  s.skip(n * size, what);
}

std::string shape_text(int n_dims, const int64_t* ne) {
  std::string s = "[";
  for (int i = 0; i < n_dims; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

ScanResult scan(Scanner& s, const std::filesystem::path& path) {
  ScanResult result;
  s.skip(4, "the magic");
  result.version = s.value<uint32_t>("the GGUF version");
  if ((result.version & 0xffffu) == 0 && result.version != 0) {
    invalid(path, "GGUF version " + std::to_string(result.version) +
                      " is absurd: the file was written on a machine of the other byte order");
  }
  if (result.version < kMinVersion || result.version > GGUF_VERSION) {
    invalid(path, "GGUF version " + std::to_string(result.version) + " is not supported (this build reads versions " +
                      std::to_string(kMinVersion) + " to " + std::to_string(GGUF_VERSION) +
                      (result.version > GGUF_VERSION ? "; a newer earshot may read it)" : "; re-convert the model)"));
  }
  const auto n_tensors = s.value<int64_t>("the GGUF header");
  const auto n_kv = s.value<int64_t>("the GGUF header");
  // Each key needs at least 12 bytes (length, type), each tensor 24 (name length, n_dims, type, offset).
  if (n_kv < 0 || static_cast<uint64_t>(n_kv) > s.remaining() / 12) {
    invalid(path, "the GGUF header claims " + std::to_string(n_kv) + " metadata keys, more than the " +
                      std::to_string(s.remaining()) + " remaining bytes can hold (truncated or corrupt)");
  }
  if (n_tensors < 0 || static_cast<uint64_t>(n_tensors) > s.remaining() / 24) {
    invalid(path, "the GGUF header claims " + std::to_string(n_tensors) + " tensors, more than the " +
                      std::to_string(s.remaining()) + " remaining bytes can hold (truncated or corrupt)");
  }

  std::unordered_set<std::string> keys;
  std::string previous = "the GGUF header";
  for (int64_t i = 0; i < n_kv; ++i) {
    const std::string key = s.string("the metadata key after " + previous);
    if (key.empty()) invalid(path, "metadata key " + std::to_string(i) + " (after " + previous + ") is empty");
    if (!keys.insert(key).second) invalid(path, "duplicate metadata key '" + printable(key) + "'");
    const auto type = s.value<int32_t>("the type of key '" + printable(key) + "'");
    if (key == GGUF_KEY_GENERAL_ALIGNMENT) {
      if (type != static_cast<int32_t>(MetaType::kU32)) {
        invalid(path, std::string("key ") + GGUF_KEY_GENERAL_ALIGNMENT + " must be a u32, it is " +
                          (known_meta_type(type) ? std::string(meta_type_name(static_cast<MetaType>(type)))
                                                 : "of unknown type " + std::to_string(type)));
      }
      result.alignment = s.value<uint32_t>("the value of key '" + key + "'");
      if (result.alignment == 0 || (result.alignment & (result.alignment - 1)) != 0) {
        invalid(path, "alignment " + std::to_string(result.alignment) + " is not a power of 2");
      }
    } else {
      scan_value(s, printable(key), type, path);
    }
    previous = "key '" + printable(key) + "'";
  }

  std::unordered_set<std::string> names;
  uint64_t expected_offset = 0;
  for (int64_t i = 0; i < n_tensors; ++i) {
    const std::string where = "the tensor info after " + previous;
    ScannedTensor t;
    t.name = s.string(where);
    const std::string name = printable(t.name);
    if (t.name.empty() || t.name.size() >= GGML_MAX_NAME) {
      invalid(path, "tensor " + std::to_string(i) + " has a name of " + std::to_string(t.name.size()) +
                        " bytes (ggml takes 1.." + std::to_string(GGML_MAX_NAME - 1) + "): '" + name + "'");
    }
    if (!names.insert(t.name).second) invalid(path, "duplicate tensor " + name);
    const auto n_dims = s.value<uint32_t>("the info of tensor " + name);
    if (n_dims > GGML_MAX_DIMS) {
      invalid(path, "tensor " + name + " has " + std::to_string(n_dims) + " dimensions (at most " +
                        std::to_string(GGML_MAX_DIMS) + ")");
    }
    t.n_dims = static_cast<int>(n_dims);
    int64_t ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
    for (uint32_t d = 0; d < n_dims; ++d) ne[d] = s.value<int64_t>("the shape of tensor " + name);
    int64_t n_elements = 1;
    for (int64_t dim : ne) {
      if (dim < 0 || (dim > 0 && n_elements > std::numeric_limits<int64_t>::max() / dim)) {
        invalid(path, "tensor " + name + " has an absurd shape " + shape_text(t.n_dims, ne));
      }
      n_elements *= dim;
    }
    const auto type = s.value<int32_t>("the type of tensor " + name);
    if (type < 0 || type >= GGML_TYPE_COUNT || ggml_blck_size(static_cast<ggml_type>(type)) == 0) {
      invalid(path, "tensor " + name + " has unknown ggml type " + std::to_string(type) +
                        " (a newer ggml's type, or a corrupt file)");
    }
    const auto gtype = static_cast<ggml_type>(type);
    if (ne[0] % ggml_blck_size(gtype) != 0) {
      invalid(path, "tensor " + name + " of type " + ggml_type_name(gtype) + " has rows of " + std::to_string(ne[0]) +
                        " elements, not a multiple of its block size " + std::to_string(ggml_blck_size(gtype)));
    }
    const uint64_t rows = n_elements == 0 ? 0 : static_cast<uint64_t>(n_elements / ne[0]);
    if (__builtin_mul_overflow(rows, ggml_row_size(gtype, ne[0]), &t.n_bytes)) {
      invalid(path, "tensor " + name + " has an absurd shape " + shape_text(t.n_dims, ne) + " for its type");
    }
    t.relative_offset = s.value<uint64_t>("the data offset of tensor " + name);
    if (t.relative_offset != expected_offset) {
      invalid(path, "tensor " + name + " has data offset " + std::to_string(t.relative_offset) + ", expected " +
                        std::to_string(expected_offset) + " (tensors are stored in order, each aligned to " +
                        std::to_string(result.alignment) + " bytes)");
    }
    uint64_t padded = 0;
    if (__builtin_add_overflow(t.n_bytes, result.alignment - 1, &padded) ||
        __builtin_add_overflow(expected_offset, padded / result.alignment * result.alignment, &expected_offset)) {
      invalid(path, "tensor " + name + " has an absurd size of " + std::to_string(t.n_bytes) + " bytes");
    }
    result.tensors.push_back(std::move(t));
    previous = "tensor " + name;
  }
  const uint64_t end = s.offset();
  result.data_offset = n_tensors > 0 ? (end + result.alignment - 1) / result.alignment * result.alignment : end;
  const uint64_t size = end + s.remaining();
  for (const ScannedTensor& t : result.tensors) {
    uint64_t start = 0;
    const bool beyond = __builtin_add_overflow(result.data_offset, t.relative_offset, &start) || start >= size;
    const uint64_t available = beyond ? 0 : size - start;
    if (t.n_bytes > available) {
      invalid(path, "truncated at tensor " + printable(t.name) + ": expected " + std::to_string(t.n_bytes) +
                        " bytes, got " + std::to_string(available));
    }
  }
  return result;
}

class Fd {
 public:
  explicit Fd(const std::filesystem::path& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw Error(ErrorCode::kIo, "cannot open model file " + path.string() + ": " + std::strerror(errno));
  }
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::filesystem::path& path) {
  Fd fd(path);
  const off_t end = ::lseek(fd.get(), 0, SEEK_END);
  if (end < 0) throw Error(ErrorCode::kIo, "cannot read model file " + path.string() + ": " + std::strerror(errno));
  const auto size = static_cast<uint64_t>(end);

  std::vector<uint8_t> head(std::min<uint64_t>(size, kProbeBytes));
  if (!head.empty() && ::pread(fd.get(), head.data(), head.size(), 0) != static_cast<ssize_t>(head.size())) {
    throw Error(ErrorCode::kIo, "cannot read model file " + path.string() + ": " + std::strerror(errno));
  }
  if (head.size() < 4 || std::memcmp(head.data(), "GGUF", 4) != 0) {
    invalid(path, "not a GGUF file: " + describe_file_start(head, size));
  }
  Scanner scanner(fd.get(), size, path);
  const ScanResult scanned = scan(scanner, path);

  GgufFile file;
  file.path_ = path;
  file.version_ = scanned.version;
  file.file_size_ = size;
  file.alignment_ = scanned.alignment;
  gguf_init_params params = {/*.no_alloc =*/true, /*.ctx =*/nullptr};
  file.ctx_.reset(gguf_init_from_file(path.c_str(), params));
  if (!file.ctx_) {
    invalid(path, "ggml's GGUF reader refuses the metadata (its log above says why)");
  }
  if (gguf_get_n_tensors(file.ctx_.get()) != static_cast<int64_t>(scanned.tensors.size()) ||
      gguf_get_data_offset(file.ctx_.get()) != scanned.data_offset) {
    invalid(path, "ggml reads another tensor table than the file's header describes (changed while reading?)");
  }

  for (size_t i = 0; i < scanned.tensors.size(); ++i) {
    const auto id = static_cast<int64_t>(i);
    GgufTensor t;
    t.name = gguf_get_tensor_name(file.ctx_.get(), id);
    t.type = gguf_get_tensor_type(file.ctx_.get(), id);
    t.n_dims = scanned.tensors[i].n_dims;
    std::copy_n(gguf_get_tensor_ne(file.ctx_.get(), id), 4, t.ne.begin());
    t.offset = scanned.data_offset + gguf_get_tensor_offset(file.ctx_.get(), id);
    t.n_bytes = gguf_get_tensor_size(file.ctx_.get(), id);
    if (t.n_bytes != scanned.tensors[i].n_bytes) invalid(path, "ggml sizes tensor " + t.name + " differently");
    file.tensor_index_.emplace(t.name, file.tensors_.size());
    file.tensors_.push_back(std::move(t));
  }
  const int64_t arch = gguf_find_key(file.ctx_.get(), kArchitectureKey);
  if (arch >= 0) {
    if (gguf_get_kv_type(file.ctx_.get(), arch) != GGUF_TYPE_STRING) {
      invalid(path, std::string("key ") + kArchitectureKey + " must be a string, it is " +
                        std::string(meta_type_name(static_cast<MetaType>(gguf_get_kv_type(file.ctx_.get(), arch)))));
    }
    file.architecture_ = gguf_get_val_str(file.ctx_.get(), arch);
  }
  return file;
}

std::string GgufFile::label() const {
  return "model file " + path_.string() +
         (architecture_.empty() ? " (no " + std::string(kArchitectureKey) + ")"
                                : " (architecture '" + printable(architecture_) + "')");
}

void GgufFile::fail(const std::string& message) const {
  throw Error(ErrorCode::kInvalidModel, label() + ": " + message);
}

bool GgufFile::has(std::string_view key) const { return gguf_find_key(ctx_.get(), std::string(key).c_str()) >= 0; }

std::optional<MetaType> GgufFile::key_type(std::string_view key) const {
  const int64_t id = gguf_find_key(ctx_.get(), std::string(key).c_str());
  if (id < 0) return std::nullopt;
  return static_cast<MetaType>(gguf_get_kv_type(ctx_.get(), id));
}

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  for (int64_t i = 0; i < gguf_get_n_kv(ctx_.get()); ++i) out.emplace_back(gguf_get_key(ctx_.get(), i));
  return out;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  const auto found = tensor_index_.find(std::string(name));
  return found == tensor_index_.end() ? nullptr : &tensors_[found->second];
}

int64_t GgufFile::key_id(std::string_view key, MetaType expected, bool array, bool required) const {
  const std::string k(key);
  const int64_t id = gguf_find_key(ctx_.get(), k.c_str());
  if (id < 0) {
    if (required) fail("required key '" + k + "' is missing");
    return -1;
  }
  const auto type = static_cast<MetaType>(gguf_get_kv_type(ctx_.get(), id));
  const auto element = type == MetaType::kArray ? static_cast<MetaType>(gguf_get_arr_type(ctx_.get(), id)) : type;
  const auto describe = [](bool is_array, MetaType t) {
    const std::string name(meta_type_name(t));
    if (is_array) return "an array of " + name;
    return (name[0] == 'i' || name[0] == 'f' ? "an " : "a ") + name;  // "an i32", "an f32", "a u32"
  };
  if ((type == MetaType::kArray) != array || element != expected) {
    fail("key '" + k + "' is " + describe(type == MetaType::kArray, element) + ", expected " +
         describe(array, expected));
  }
  return id;
}

namespace {

template <typename T>
constexpr MetaType meta_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return MetaType::kU8;
  if constexpr (std::is_same_v<T, int8_t>) return MetaType::kI8;
  if constexpr (std::is_same_v<T, uint16_t>) return MetaType::kU16;
  if constexpr (std::is_same_v<T, int16_t>) return MetaType::kI16;
  if constexpr (std::is_same_v<T, uint32_t>) return MetaType::kU32;
  if constexpr (std::is_same_v<T, int32_t>) return MetaType::kI32;
  if constexpr (std::is_same_v<T, uint64_t>) return MetaType::kU64;
  if constexpr (std::is_same_v<T, int64_t>) return MetaType::kI64;
  if constexpr (std::is_same_v<T, float>) return MetaType::kF32;
  if constexpr (std::is_same_v<T, double>) return MetaType::kF64;
  if constexpr (std::is_same_v<T, bool>) return MetaType::kBool;
  if constexpr (std::is_same_v<T, std::string>) return MetaType::kString;
}

}  // namespace

template <typename T>
std::optional<T> GgufFile::find(std::string_view key) const {
  const int64_t id = key_id(key, meta_type_of<T>(), false, false);
  if (id < 0) return std::nullopt;
  if constexpr (std::is_same_v<T, std::string>) {
    return std::string(gguf_get_val_str(ctx_.get(), id));
  } else if constexpr (std::is_same_v<T, bool>) {
    return *static_cast<const uint8_t*>(gguf_get_val_data(ctx_.get(), id)) != 0;  // any byte, not only 0/1
  } else {
    T value;
    std::memcpy(&value, gguf_get_val_data(ctx_.get(), id), sizeof(T));
    return value;
  }
}

template <typename T>
T GgufFile::get(std::string_view key) const {
  key_id(key, meta_type_of<T>(), false, true);
  return *find<T>(key);
}

template <typename T>
std::optional<std::vector<T>> GgufFile::find_array(std::string_view key) const {
  const int64_t id = key_id(key, meta_type_of<T>(), true, false);
  if (id < 0) return std::nullopt;
  const size_t n = gguf_get_arr_n(ctx_.get(), id);
  std::vector<T> values(n);
  if constexpr (std::is_same_v<T, std::string>) {
    for (size_t i = 0; i < n; ++i) values[i] = gguf_get_arr_str(ctx_.get(), id, i);
  } else if constexpr (std::is_same_v<T, bool>) {
    const auto* data = static_cast<const uint8_t*>(gguf_get_arr_data(ctx_.get(), id));
    for (size_t i = 0; i < n; ++i) values[i] = data[i] != 0;
  } else if (n > 0) {
    std::memcpy(values.data(), gguf_get_arr_data(ctx_.get(), id), n * sizeof(T));
  }
  return values;
}

template <typename T>
std::vector<T> GgufFile::get_array(std::string_view key) const {
  key_id(key, meta_type_of<T>(), true, true);
  return *find_array<T>(key);
}

#define EARSHOT_GGUF_INSTANTIATE(T)                                                       \
  template std::optional<T> GgufFile::find<T>(std::string_view) const;                    \
  template T GgufFile::get<T>(std::string_view) const;                                    \
  template std::optional<std::vector<T>> GgufFile::find_array<T>(std::string_view) const; \
  template std::vector<T> GgufFile::get_array<T>(std::string_view) const;
EARSHOT_GGUF_VALUE_TYPES(EARSHOT_GGUF_INSTANTIATE)
#undef EARSHOT_GGUF_INSTANTIATE

}  // namespace earshot::runtime
