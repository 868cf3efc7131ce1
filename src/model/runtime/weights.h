// Shared weight placement for every model family: given the tensors a model
// expects and where their bytes lie in its file (legacy ggml or GGUF), check
// everything, then allocate one backend buffer on the chosen device and stream
// the bytes into it, a tensor (or a 16 MiB chunk of one) at a time.
#pragma once

#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace earshot::runtime {

class GgufFile;

// Bytes a model is read from: a file, read piecewise and never whole, or memory.
class ByteSource {
 public:
  // Throws earshot::Error(kIo) "cannot open <label>: <reason>".
  static ByteSource file(const std::filesystem::path& path, std::string_view label = "model file");
  static ByteSource memory(std::span<const uint8_t> bytes);
  // `base`, then `tail` at offsets base.size() onwards: a file plus tensors a
  // loader derived from it (another project's layout translated: gates
  // reordered, biases summed, kernels widened to f32), read as one source.
  static ByteSource with_appendix(const ByteSource& base, std::shared_ptr<const std::vector<uint8_t>> tail);

  uint64_t size() const { return size_; }
  // Copies [offset, offset + n) to dst; the range must lie within size(). Throws kIo on a read error.
  void read(uint64_t offset, void* dst, uint64_t n) const;

 private:
  struct Fd;
  ByteSource() = default;
  std::shared_ptr<Fd> fd_;
  std::span<const uint8_t> bytes_;
  std::shared_ptr<const std::vector<uint8_t>> tail_;  // with_appendix: bytes from base_size_ on
  uint64_t base_size_ = 0;
  uint64_t size_ = 0;
  std::string label_;
};

// A tensor a model expects: name, storage type and shape (ggml order).
struct ExpectedTensor {
  std::string name;
  ggml_type type = GGML_TYPE_F32;
  int n_dims = 1;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};
};

// An expected tensor and where its first byte lies in the source.
struct TensorPlacement {
  ExpectedTensor tensor;
  uint64_t offset = 0;
};

// "[64, 256]": the first n_dims sizes of ne.
std::string shape_string(int n_dims, const int64_t* ne);

// Matches a GGUF file's tensor table against what the model expects: each
// expected tensor is there with its shape and type, and the file holds no other.
// Throws Error(kInvalidModel) starting with file.label(): "tensor X has shape
// [a, b], expected [c, d]", "tensor X has type f32, expected f16", "N of M
// tensors are missing: A, B, C, ...", "unexpected tensor 'X'".
std::vector<TensorPlacement> place_gguf_tensors(const GgufFile& file, std::span<const ExpectedTensor> expected);

// The tensors of a loaded model in one backend buffer. Move-only; immutable once
// loaded and safe to share between threads.
class ModelWeights {
 public:
  // Validates every placement before allocating (a known type, rows a multiple
  // of its block size, bytes within the source: "truncated at tensor X: expected
  // N bytes, got M"), creates the tensors, allocates one buffer of `device`'s
  // buffer type (null: the CPU) and copies the bytes. `label` starts every
  // message ("model file /path/ggml-base.en.bin"). Throws earshot::Error
  // (kInvalidModel, kIo, or kResourceExhausted when the buffer cannot be allocated).
  //
  // `product_weight` (optional) names the tensors the family's graphs use only as
  // the weight of runtime::mul_mat / runtime::MatMul products: on the CPU, those of
  // them that runtime::amx_can_hold go to a second buffer of ggml's AMX type where
  // this CPU has one (runtime/amx.h), repacked for its kernels.
  static ModelWeights load(const ByteSource& source, std::span<const TensorPlacement> placements,
                           ggml_backend_dev_t device, std::string_view label,
                           const std::function<bool(std::string_view)>& product_weight = {});

  ModelWeights() = default;
  ModelWeights(ModelWeights&&) noexcept = default;
  ModelWeights& operator=(ModelWeights&&) noexcept = default;

  // In placement order.
  ggml_tensor* tensor(size_t i) const { return tensors_.at(i); }
  size_t size() const { return tensors_.size(); }
  // nullptr when no tensor has that name.
  ggml_tensor* find(std::string_view name) const;
  // The buffer of every tensor not placed on AMX.
  ggml_backend_buffer_t buffer() const { return buffer_.get(); }
  // Bytes of both buffers.
  uint64_t n_bytes() const;
  // How many tensors live in the AMX buffer.
  size_t n_amx() const { return n_amx_; }

 private:
  ggml_context_ptr ctx_;
  ggml_backend_buffer_ptr buffer_;
  ggml_context_ptr amx_ctx_;
  ggml_backend_buffer_ptr amx_buffer_;
  size_t n_amx_ = 0;
  std::vector<ggml_tensor*> tensors_;
};

}  // namespace earshot::runtime
