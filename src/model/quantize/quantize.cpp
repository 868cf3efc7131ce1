#include "model/quantize/quantize.h"

#include <gguf.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <thread>
#include <unordered_map>

#include "common/error.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/model_file.h"

namespace earshot::quantize {

int32_t file_type_of(ggml_type type) {
  switch (type) {
    case GGML_TYPE_Q4_0: return GGML_FTYPE_MOSTLY_Q4_0;
    case GGML_TYPE_Q4_1: return GGML_FTYPE_MOSTLY_Q4_1;
    case GGML_TYPE_Q5_0: return GGML_FTYPE_MOSTLY_Q5_0;
    case GGML_TYPE_Q5_1: return GGML_FTYPE_MOSTLY_Q5_1;
    case GGML_TYPE_Q8_0: return GGML_FTYPE_MOSTLY_Q8_0;
    case GGML_TYPE_Q2_K: return GGML_FTYPE_MOSTLY_Q2_K;
    case GGML_TYPE_Q3_K: return GGML_FTYPE_MOSTLY_Q3_K;
    case GGML_TYPE_Q4_K: return GGML_FTYPE_MOSTLY_Q4_K;
    case GGML_TYPE_Q5_K: return GGML_FTYPE_MOSTLY_Q5_K;
    case GGML_TYPE_Q6_K: return GGML_FTYPE_MOSTLY_Q6_K;
    default: return -1;
  }
}

bool is_float(ggml_type type) { return type == GGML_TYPE_F32 || type == GGML_TYPE_F16; }

namespace {

[[noreturn]] void io_error(const std::filesystem::path& path, const std::string& what) {
  throw Error(ErrorCode::kIo, "cannot " + what + " " + path.string());
}

std::vector<float> to_floats(ggml_type type, const uint8_t* data, int64_t n) {
  std::vector<float> out(n);
  switch (type) {
    case GGML_TYPE_F32: std::memcpy(out.data(), data, n * sizeof(float)); break;
    case GGML_TYPE_F16: ggml_fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t*>(data), out.data(), n); break;
    case GGML_TYPE_BF16: ggml_bf16_to_fp32_row(reinterpret_cast<const ggml_bf16_t*>(data), out.data(), n); break;
    default:
      throw Error(ErrorCode::kInternal,
                  std::string("cannot convert from ") + ggml_type_name(type) + " (f32, f16, bf16)");
  }
  return out;
}

}  // namespace

std::vector<uint8_t> convert_rows(ggml_type to, ggml_type from, const uint8_t* data, int64_t n_per_row,
                                  int64_t n_rows) {
  const std::vector<float> f = to_floats(from, data, n_per_row * n_rows);
  const int64_t n = n_per_row * n_rows;
  std::vector<uint8_t> out(ggml_row_size(to, n_per_row) * n_rows);
  switch (to) {
    case GGML_TYPE_F32: std::memcpy(out.data(), f.data(), out.size()); return out;
    case GGML_TYPE_F16: ggml_fp32_to_fp16_row(f.data(), reinterpret_cast<ggml_fp16_t*>(out.data()), n); return out;
    case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(f.data(), reinterpret_cast<ggml_bf16_t*>(out.data()), n); return out;
    default: break;
  }
  if (!ggml_is_quantized(to) || ggml_quantize_requires_imatrix(to))
    throw Error(ErrorCode::kInternal, std::string("cannot convert to ") + ggml_type_name(to));
  // Rows quantise independently: split over the cores, the bytes are the same on any number of threads.
  const int64_t n_threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, n_rows);
  ggml_quantize_init(to);
  std::vector<std::thread> threads;
  for (int64_t i = 0; i < n_threads; ++i) {
    const int64_t first = n_rows * i / n_threads, end = n_rows * (i + 1) / n_threads;
    threads.emplace_back([&, first, end] {
      ggml_quantize_chunk(to, f.data(), out.data(), first * n_per_row, end - first, n_per_row, nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

namespace {

// One tensor record of whisper.cpp's legacy files: n_dims, name length, type, dims, name, data.
struct Record {
  int32_t n_dims = 0, type = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};
  std::string name;
  std::vector<uint8_t> data;
};

// Reads the records after `offset`, calling `visit` for each (data read only when `with_data`).
void walk_legacy(const std::filesystem::path& path, uint64_t offset, bool with_data,
                 const std::function<void(Record&)>& visit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_error(path, "open");
  in.seekg(static_cast<std::streamoff>(offset));
  const std::string label = "model file " + path.string();
  for (;;) {
    Record r;
    int32_t head[3];
    in.read(reinterpret_cast<char*>(head), sizeof head);
    if (in.gcount() == 0 && in.eof()) return;
    if (in.gcount() != sizeof head) throw Error(ErrorCode::kInvalidModel, label + ": a truncated tensor record");
    r.n_dims = head[0], r.type = head[2];
    const int32_t name_length = head[1];
    if (r.n_dims < 0 || r.n_dims > 4 || name_length < 1 || name_length > 256 || r.type < 0 ||
        r.type >= GGML_TYPE_COUNT || ggml_type_size(static_cast<ggml_type>(r.type)) == 0)
      throw Error(ErrorCode::kInvalidModel, label + ": a malformed tensor record at byte " +
                                                std::to_string(static_cast<uint64_t>(in.tellg()) - sizeof head));
    for (int i = 0; i < r.n_dims; ++i) {
      int32_t n = 0;
      in.read(reinterpret_cast<char*>(&n), 4);
      if (n < 1) throw Error(ErrorCode::kInvalidModel, label + ": a tensor dimension of " + std::to_string(n));
      r.ne[i] = n;
    }
    r.name.resize(name_length);
    in.read(r.name.data(), name_length);
    const ggml_type t = static_cast<ggml_type>(r.type);
    if (r.ne[0] % ggml_blck_size(t) != 0)
      throw Error(ErrorCode::kInvalidModel, label + ": tensor " + r.name + " has rows of partial blocks");
    const uint64_t n_bytes = ggml_row_size(t, r.ne[0]) * r.ne[1] * r.ne[2] * r.ne[3];
    if (with_data) {
      r.data.resize(n_bytes);
      in.read(reinterpret_cast<char*>(r.data.data()), static_cast<std::streamsize>(n_bytes));
      if (static_cast<uint64_t>(in.gcount()) != n_bytes)
        throw Error(ErrorCode::kInvalidModel, label + ": tensor " + r.name + " is truncated");
    } else {
      in.seekg(static_cast<std::streamoff>(n_bytes), std::ios::cur);
    }
    if (!in) throw Error(ErrorCode::kInvalidModel, label + ": truncated at tensor " + r.name);
    visit(r);
  }
}

TensorInfo info_of(const Record& r) { return {r.name, r.n_dims, r.ne, static_cast<ggml_type>(r.type)}; }

struct GgufDeleter {
  void operator()(gguf_context* c) const { gguf_free(c); }
};
struct GgmlDeleter {
  void operator()(ggml_context* c) const { ggml_free(c); }
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

void rewrite_legacy_file(const std::filesystem::path& in, const std::filesystem::path& out, uint64_t tensors_offset,
                         uint64_t ftype_offset, int32_t ftype, const ChooseType& choose, QuantizeReport& report) {
  std::vector<uint8_t> header(tensors_offset);
  {
    std::ifstream f(in, std::ios::binary);
    if (!f.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(header.size())))
      io_error(in, "read");
  }
  std::memcpy(header.data() + ftype_offset, &ftype, 4);
  std::ofstream o(out, std::ios::binary | std::ios::trunc);
  if (!o) io_error(out, "create");
  o.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  walk_legacy(in, tensors_offset, true, [&](Record& r) {
    report.bytes_in += r.data.size();
    const ggml_type to = choose(info_of(r));
    if (to != static_cast<ggml_type>(r.type)) {
      r.data = convert_rows(to, static_cast<ggml_type>(r.type), r.data.data(), r.ne[0], r.ne[1] * r.ne[2] * r.ne[3]);
      r.type = to;
      if (ggml_is_quantized(to)) ++report.n_quantized;
    }
    report.bytes_out += r.data.size();
    const int32_t head[3] = {r.n_dims, static_cast<int32_t>(r.name.size()), r.type};
    o.write(reinterpret_cast<const char*>(head), sizeof head);
    for (int i = 0; i < r.n_dims; ++i) {
      const int32_t n = static_cast<int32_t>(r.ne[i]);
      o.write(reinterpret_cast<const char*>(&n), 4);
    }
    o.write(r.name.data(), static_cast<std::streamsize>(r.name.size()));
    o.write(reinterpret_cast<const char*>(r.data.data()), static_cast<std::streamsize>(r.data.size()));
  });
  o.close();
  if (!o) io_error(out, "write");
}

void rewrite_gguf_file(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                       const ChooseType& choose, QuantizeReport& report) {
  const std::string label = "model file " + in.string();
  ggml_context* raw = nullptr;
  std::unique_ptr<gguf_context, GgufDeleter> gin(gguf_init_from_file(in.c_str(), {false, &raw}));
  std::unique_ptr<ggml_context, GgmlDeleter> data(raw);
  if (!gin) throw Error(ErrorCode::kInvalidModel, label + ": ggml cannot read it as GGUF");
  const int64_t n = gguf_get_n_tensors(gin.get());
  std::unique_ptr<gguf_context, GgufDeleter> gout(gguf_init_empty());
  gguf_set_kv(gout.get(), gin.get());
  gguf_set_val_u32(gout.get(), "general.quantization_version", GGML_QNT_VERSION);
  gguf_set_val_u32(gout.get(), "general.file_type", static_cast<uint32_t>(file_type_of(type)));
  std::unique_ptr<ggml_context, GgmlDeleter> meta(
      ggml_init({static_cast<size_t>(n + 1) * ggml_tensor_overhead(), nullptr, true}));
  std::deque<std::vector<uint8_t>> buffers;
  for (int64_t i = 0; i < n; ++i) {
    const std::string name = gguf_get_tensor_name(gin.get(), i);
    const ggml_tensor* t = ggml_get_tensor(data.get(), name.c_str());
    const ggml_type to = choose({name, ggml_n_dims(t), {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, t->type});
    report.bytes_in += ggml_nbytes(t);
    ggml_tensor* o = ggml_new_tensor(meta.get(), to, GGML_MAX_DIMS, t->ne);
    ggml_set_name(o, name.c_str());
    gguf_add_tensor(gout.get(), o);
    if (to == t->type) {
      gguf_set_tensor_data(gout.get(), name.c_str(), t->data);
    } else {
      buffers.push_back(
          convert_rows(to, t->type, static_cast<const uint8_t*>(t->data), t->ne[0], ggml_nelements(t) / t->ne[0]));
      gguf_set_tensor_data(gout.get(), name.c_str(), buffers.back().data());
      ++report.n_quantized;
    }
    report.bytes_out += ggml_nbytes(o);
  }
  if (!gguf_write_to_file(gout.get(), out.c_str(), false)) io_error(out, "write");
}

std::map<ggml_type, uint64_t> legacy_tensor_bytes(const std::filesystem::path& path, uint64_t tensors_offset,
                                                  const std::function<bool(const TensorInfo&)>& counted) {
  std::map<ggml_type, uint64_t> bytes;
  walk_legacy(path, tensors_offset, false, [&](Record& r) {
    if (counted(info_of(r)))
      bytes[static_cast<ggml_type>(r.type)] +=
          ggml_row_size(static_cast<ggml_type>(r.type), r.ne[0]) * r.ne[1] * r.ne[2] * r.ne[3];
  });
  return bytes;
}

std::string type_mix(const std::map<ggml_type, uint64_t>& bytes) {
  std::vector<std::pair<uint64_t, ggml_type>> order;
  for (const auto& [type, n] : bytes) order.emplace_back(n, type);
  std::sort(order.rbegin(), order.rend());
  std::string out;
  for (const auto& [n, type] : order) out += (out.empty() ? "" : " + ") + std::string(ggml_type_name(type));
  return out.empty() ? "-" : out;
}

const std::vector<ggml_type>& quantize_types() {
  static const std::vector<ggml_type> types = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                               GGML_TYPE_Q8_0, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
                                               GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
  return types;
}

std::optional<ggml_type> parse_quantize_type(std::string_view name) {
  for (ggml_type t : quantize_types())
    if (lower(ggml_type_name(t)) == lower(name)) return t;
  return std::nullopt;
}

QuantizeReport write_quantized(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                               const std::function<void(const std::filesystem::path& part, QuantizeReport&)>& write) {
  if (std::find(quantize_types().begin(), quantize_types().end(), type) == quantize_types().end())
    throw Error(ErrorCode::kInvalidArgument, std::string("cannot quantise to ") + ggml_type_name(type));
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec))
    throw Error(ErrorCode::kInvalidArgument, "the output " + out.string() + " is the input file");
  const std::filesystem::path part = out.string() + ".part";
  QuantizeReport report;
  try {
    write(part, report);
  } catch (...) {
    std::filesystem::remove(part, ec);
    throw;
  }
  if (report.n_quantized == 0) {
    std::filesystem::remove(part, ec);
    throw Error(ErrorCode::kInvalidArgument,
                "model file " + in.string() + ": no matrix has rows of whole " + ggml_type_name(type) + " blocks (" +
                    std::to_string(ggml_blck_size(type)) + " values); nothing to quantise");
  }
  std::filesystem::rename(part, out, ec);
  if (ec) io_error(out, "rename " + part.string() + " to");
  return report;
}

std::string gguf_matrix_types(const std::filesystem::path& path,
                              const std::function<bool(const std::string& name)>& is_matrix) {
  const runtime::GgufFile f = runtime::GgufFile::open(path);
  std::map<ggml_type, uint64_t> bytes;
  for (const runtime::GgufTensor& t : f.tensors())
    if (is_matrix ? is_matrix(t.name) : t.n_dims >= 2) bytes[t.type] += t.n_bytes;
  return type_mix(bytes);
}

FileSummary summarize_other_file(const std::filesystem::path& path) {
  const runtime::ModelFileProbe probe = runtime::probe_model_file(path);
  FileSummary s;
  switch (probe.kind) {
    case runtime::ModelFileKind::kGgmlVad:
      s.family = "Silero VAD", s.layout = "whisper.cpp ggml .bin", s.quantization = "-";
      return s;
    case runtime::ModelFileKind::kGguf:
      s.family = probe.architecture == "clip" ? "mmproj (clip)" : "LLM (" + probe.architecture + ")";
      s.layout = "llama.cpp GGUF";
      s.quantization = gguf_matrix_types(path);
      return s;
    default: s.family = "unknown", s.layout = probe.description, s.quantization = "-"; return s;
  }
}

}  // namespace earshot::quantize
