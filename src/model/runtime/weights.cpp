#include "model/runtime/weights.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "model/runtime/amx.h"
#include "model/runtime/device.h"
#include "model/runtime/gguf_file.h"

namespace earshot::runtime {

struct ByteSource::Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

ByteSource ByteSource::file(const std::filesystem::path& path, std::string_view label) {
  ByteSource source;
  source.label_ = std::string(label) + " " + path.string();
  source.fd_ = std::make_shared<Fd>();
  source.fd_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (source.fd_->fd < 0) throw Error(ErrorCode::kIo, "cannot open " + source.label_ + ": " + std::strerror(errno));
  const off_t end = ::lseek(source.fd_->fd, 0, SEEK_END);
  if (end < 0) throw Error(ErrorCode::kIo, "cannot read " + source.label_ + ": " + std::strerror(errno));
  source.size_ = static_cast<uint64_t>(end);
  return source;
}

ByteSource ByteSource::memory(std::span<const uint8_t> bytes) {
  ByteSource source;
  source.bytes_ = bytes;
  source.size_ = bytes.size();
  return source;
}

ByteSource ByteSource::with_appendix(const ByteSource& base, std::shared_ptr<const std::vector<uint8_t>> tail) {
  ByteSource source = base;
  source.base_size_ = base.size_;
  source.size_ = base.size_ + (tail ? tail->size() : 0);
  source.tail_ = std::move(tail);
  return source;
}

void ByteSource::read(uint64_t offset, void* dst, uint64_t n) const {
  if (offset > size_ || n > size_ - offset) {
    throw Error(ErrorCode::kInternal, "ByteSource::read past the end of " + (label_.empty() ? "memory" : label_));
  }
  if (tail_ && offset + n > base_size_) {
    // The part in the base, then the part in the appendix.
    const uint64_t in_base = offset < base_size_ ? base_size_ - offset : 0;
    if (in_base > 0) {
      ByteSource base = *this;
      base.tail_.reset();
      base.size_ = base_size_;
      base.read(offset, dst, in_base);
    }
    std::memcpy(static_cast<char*>(dst) + in_base, tail_->data() + (offset + in_base - base_size_), n - in_base);
    return;
  }
  if (!fd_) {
    if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
    return;
  }
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd_->fd, out, std::min<uint64_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw Error(ErrorCode::kIo, "read error in " + label_ + ": " +
                                      (got < 0 ? std::strerror(errno) : "the file shrank while being read"));
    }
    out += got, offset += static_cast<uint64_t>(got), n -= static_cast<uint64_t>(got);
  }
}

std::string shape_string(int n_dims, const int64_t* ne) {
  std::string s = "[";
  for (int i = 0; i < n_dims; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::vector<TensorPlacement> place_gguf_tensors(const GgufFile& file, std::span<const ExpectedTensor> expected) {
  const auto fail = [&](const std::string& message) {
    throw Error(ErrorCode::kInvalidModel, file.label() + ": " + message);
  };
  std::unordered_set<std::string_view> names;
  for (const ExpectedTensor& e : expected) names.insert(e.name);
  for (const GgufTensor& t : file.tensors()) {
    if (!names.contains(t.name)) fail("unexpected tensor '" + t.name + "' (not part of this architecture)");
  }
  std::vector<TensorPlacement> placements;
  std::vector<std::string> missing;
  for (const ExpectedTensor& e : expected) {
    const GgufTensor* t = file.find_tensor(e.name);
    if (t == nullptr) {
      missing.push_back(e.name);
      continue;
    }
    if (t->ne != e.ne) {
      fail("tensor " + e.name + " has shape " + shape_string(std::max(t->n_dims, 1), t->ne.data()) + ", expected " +
           shape_string(e.n_dims, e.ne.data()));
    }
    if (t->type != e.type) {
      fail("tensor " + e.name + " has type " + ggml_type_name(t->type) + ", expected " + ggml_type_name(e.type));
    }
    placements.push_back({e, t->offset});
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 3; ++i) list += (i ? ", " : "") + missing[i];
    fail(std::to_string(missing.size()) + " of " + std::to_string(expected.size()) + " tensors are missing: " + list +
         (missing.size() > 3 ? ", ..." : ""));
  }
  return placements;
}

ModelWeights ModelWeights::load(const ByteSource& source, std::span<const TensorPlacement> placements,
                                ggml_backend_dev_t device, std::string_view label,
                                const std::function<bool(std::string_view)>& product_weight) {
  const auto fail = [&](const std::string& message) {
    throw Error(ErrorCode::kInvalidModel, std::string(label) + ": " + message);
  };
  // Everything is checked before the buffer exists: a bad file costs no allocation.
  for (const TensorPlacement& p : placements) {
    const ExpectedTensor& t = p.tensor;
    if (t.type < 0 || t.type >= GGML_TYPE_COUNT || ggml_blck_size(t.type) == 0) {
      fail("tensor " + t.name + " has unknown ggml type " + std::to_string(static_cast<int>(t.type)));
    }
    if (t.n_dims < 1 || t.n_dims > 4 || std::any_of(t.ne.begin(), t.ne.end(), [](int64_t d) { return d < 1; })) {
      fail("tensor " + t.name + " has an absurd shape " + shape_string(4, t.ne.data()));
    }
    if (t.ne[0] % ggml_blck_size(t.type) != 0) {
      fail("tensor " + t.name + " of type " + ggml_type_name(t.type) + " has rows of " + std::to_string(t.ne[0]) +
           " elements, not a multiple of its block size " + std::to_string(ggml_blck_size(t.type)));
    }
    uint64_t rows = 1, n_bytes = 0;
    bool overflow = false;
    for (int d = 1; d < 4; ++d) overflow |= __builtin_mul_overflow(rows, static_cast<uint64_t>(t.ne[d]), &rows);
    overflow |= __builtin_mul_overflow(rows, ggml_row_size(t.type, t.ne[0]), &n_bytes);
    const uint64_t available = p.offset >= source.size() ? 0 : source.size() - p.offset;
    if (overflow || n_bytes > available) {
      fail("truncated at tensor " + t.name + ": expected " + (overflow ? "over 2^64" : std::to_string(n_bytes)) +
           " bytes, got " + std::to_string(available));
    }
  }

  ModelWeights weights;
  if (device == nullptr) device = cpu_device();
  const ggml_backend_buffer_type_t amx = product_weight && is_cpu(device) ? amx_buffer_type() : nullptr;
  const auto on_amx = [&](const ExpectedTensor& t) {
    return amx != nullptr && amx_can_hold(t.type, t.n_dims, t.ne) && product_weight(t.name);
  };
  ggml_init_params params = {(placements.size() + 1) * ggml_tensor_overhead(), nullptr, /*.no_alloc =*/true};
  weights.ctx_.reset(ggml_init(params));
  weights.amx_ctx_.reset(ggml_init(params));
  if (!weights.ctx_ || !weights.amx_ctx_)
    throw Error(ErrorCode::kInternal, "cannot create the ggml context for the weights");
  for (const TensorPlacement& p : placements) {
    const bool to_amx = on_amx(p.tensor);
    ggml_tensor* t = ggml_new_tensor((to_amx ? weights.amx_ctx_ : weights.ctx_).get(), p.tensor.type, p.tensor.n_dims,
                                     p.tensor.ne.data());
    ggml_set_name(t, p.tensor.name.c_str());
    weights.tensors_.push_back(t);
    weights.n_amx_ += to_amx;
  }
  ggml_backend_buffer_type_t buffer_type = ggml_backend_dev_buffer_type(device);
  if (weights.n_amx_ > 0) {
    weights.amx_buffer_.reset(ggml_backend_alloc_ctx_tensors_from_buft(weights.amx_ctx_.get(), amx));
    if (!weights.amx_buffer_)
      throw Error(ErrorCode::kIo, "cannot allocate the AMX weight buffer for " + std::string(label));
    ggml_backend_buffer_set_usage(weights.amx_buffer_.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
  }
  if (weights.n_amx_ < placements.size()) {
    weights.buffer_.reset(ggml_backend_alloc_ctx_tensors_from_buft(weights.ctx_.get(), buffer_type));
    if (!weights.buffer_) {
      throw Error(ErrorCode::kIo, "cannot allocate the weight buffer for " + std::string(label) + " on " +
                                      ggml_backend_dev_name(device));
    }
    ggml_backend_buffer_set_usage(weights.buffer_.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
  }

  // Host buffers take the bytes directly; a device buffer through a bounded staging
  // area; the AMX buffer a whole tensor at a time (its kernels' layout is made from
  // the whole matrix).
  const bool host = weights.buffer_ && ggml_backend_buffer_is_host(weights.buffer_.get());
  constexpr uint64_t kChunk = 16u << 20;
  std::vector<char> staging;
  for (size_t i = 0; i < placements.size(); ++i) {
    ggml_tensor* t = weights.tensors_[i];
    const uint64_t n = ggml_nbytes(t);
    if (t->buffer == weights.amx_buffer_.get()) {
      staging.resize(n);
      source.read(placements[i].offset, staging.data(), n);
      ggml_backend_tensor_set(t, staging.data(), 0, n);
      continue;
    }
    if (host) {
      source.read(placements[i].offset, t->data, n);
      continue;
    }
    staging.resize(std::min<uint64_t>(n, kChunk));
    for (uint64_t done = 0; done < n;) {
      const uint64_t len = std::min<uint64_t>(kChunk, n - done);
      source.read(placements[i].offset + done, staging.data(), len);
      ggml_backend_tensor_set(t, staging.data(), done, len);
      done += len;
    }
  }
  return weights;
}

ggml_tensor* ModelWeights::find(std::string_view name) const {
  for (ggml_tensor* t : tensors_) {
    if (name == ggml_get_name(t)) return t;
  }
  return nullptr;
}

uint64_t ModelWeights::n_bytes() const {
  return (buffer_ ? ggml_backend_buffer_get_size(buffer_.get()) : 0) +
         (amx_buffer_ ? ggml_backend_buffer_get_size(amx_buffer_.get()) : 0);
}

}  // namespace earshot::runtime
