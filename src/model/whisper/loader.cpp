// Model::load for whisper.cpp's legacy ggml files. Two passes over the file:
// the first reads every tensor record header and checks names, shapes, types
// and that the data is really there (seeking over it), so that a corrupt or
// truncated file fails before anything is allocated; the second streams the
// data into one backend buffer through the runtime's shared weight placement.
#include <ggml-backend.h>
#include <ggml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "common/error.h"
#include "features/mel.h"
#include "model/runtime/device.h"
#include "model/runtime/model_file.h"
#include "model/runtime/weights.h"
#include "model/whisper/model.h"
#include "model/whisper/model_format.h"

namespace earshot::whisper {
namespace {

[[noreturn]] void invalid_model(const std::filesystem::path& path, const std::string& message) {
  throw Error(ErrorCode::kInvalidModel, "model file " + path.string() + ": " + message);
}

// A binary file read with bounds known up front: every length read from the
// file is checked against the bytes that remain before it is used. Small reads
// go through a buffer (the vocabulary is ~100k of them); large ones go direct.
class FileReader {
 public:
  explicit FileReader(const std::filesystem::path& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      throw Error(ErrorCode::kIo, "cannot open model file " + path.string() + ": " + std::strerror(errno));
    }
    off_t size = 0;
    if (fseeko(file_, 0, SEEK_END) != 0 || (size = ftello(file_)) < 0 || fseeko(file_, 0, SEEK_SET) != 0) {
      const std::string reason = std::strerror(errno);
      std::fclose(file_);
      throw Error(ErrorCode::kIo, "cannot determine the size of model file " + path.string() + ": " + reason);
    }
    size_ = static_cast<uint64_t>(size);
    std::setvbuf(file_, nullptr, _IONBF, 0);  // our own buffer below
  }
  ~FileReader() { std::fclose(file_); }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  uint64_t size() const { return size_; }
  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return size_ - offset_; }

  [[noreturn]] void truncated(std::string_view what, uint64_t expected) const {
    invalid_model(path_, "truncated at " + std::string(what) + ": expected " + std::to_string(expected) +
                             " bytes, got " + std::to_string(remaining()));
  }

  // Reads exactly n bytes; `what` names the thing being read for the truncation message.
  void read(void* dst, uint64_t n, std::string_view what) {
    if (n > remaining()) truncated(what, n);
    if (n == 0) return;  // dst may be null (an empty vector's data())
    auto* out = static_cast<char*>(dst);
    const uint64_t buffered = std::min<uint64_t>(n, buffer_end_ - buffer_pos_);
    std::memcpy(out, buffer_.data() + buffer_pos_, buffered);
    buffer_pos_ += buffered;
    offset_ += buffered;
    out += buffered;
    n -= buffered;
    if (n == 0) return;
    if (n >= kBufferSize) {
      read_file(out, n, what);
    } else {
      const uint64_t fill = std::min<uint64_t>(kBufferSize, remaining());
      read_file(buffer_.data(), fill, what);
      buffer_pos_ = 0;
      buffer_end_ = fill;
      std::memcpy(out, buffer_.data(), n);
      buffer_pos_ = n;
    }
    offset_ += n;
  }
  int32_t read_i32(std::string_view what) {
    int32_t value = 0;
    read(&value, sizeof(value), what);
    return value;
  }
  void seek(uint64_t offset) {
    if (offset > size_) truncated("seek", offset - offset_);
    // The buffered bytes cover file offsets [offset_ - buffer_pos_, offset_ - buffer_pos_ + buffer_end_).
    const uint64_t buffer_start = offset_ - buffer_pos_;
    if (offset >= buffer_start && offset <= buffer_start + buffer_end_) {
      buffer_pos_ = offset - buffer_start;
    } else {
      if (fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0) {
        throw Error(ErrorCode::kIo, "seek error in model file " + path_.string() + ": " + std::strerror(errno));
      }
      buffer_pos_ = buffer_end_ = 0;
    }
    offset_ = offset;
  }
  // Up to n bytes from the start of the file, for describing what it is; the read position is kept.
  std::vector<uint8_t> head(uint64_t n) {
    const uint64_t at = offset_;
    std::vector<uint8_t> bytes(std::min(n, size_));
    seek(0);
    read(bytes.data(), bytes.size(), "the start of the file");
    seek(at);
    return bytes;
  }
  void skip(uint64_t n, std::string_view what) {
    if (n > remaining()) truncated(what, n);
    seek(offset_ + n);
  }

 private:
  static constexpr uint64_t kBufferSize = 1 << 14;

  // Invariant: the file position is offset_ + (buffer_end_ - buffer_pos_), the end of the buffered bytes.
  void read_file(char* dst, uint64_t n, std::string_view what) {
    if (std::fread(dst, 1, n, file_) != n) {
      throw Error(ErrorCode::kIo, "read error in model file " + path_.string() + " at " + std::string(what) + ": " +
                                      (std::ferror(file_) ? std::strerror(errno) : "unexpected end of file"));
    }
  }

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
  std::vector<char> buffer_ = std::vector<char>(kBufferSize);
  uint64_t buffer_pos_ = 0;
  uint64_t buffer_end_ = 0;
};

FileHeader parse_header(FileReader& reader, const std::filesystem::path& path) {
  FileHeader header;
  header.file_size = reader.size();
  if (reader.size() < 4) {
    invalid_model(path, "file is " + std::to_string(reader.size()) + " bytes, too small to be a ggml Whisper model");
  }
  const auto magic = static_cast<uint32_t>(reader.read_i32("magic"));
  if (magic != kGgmlFileMagic) {
    char text[64];
    std::snprintf(text, sizeof(text), "bad magic 0x%08x, expected 0x%08x ('ggml')", magic, kGgmlFileMagic);
    std::string message = text;
    if (magic == 0x46554747) {
      message += "; this is a GGUF file, earshot reads whisper.cpp's legacy ggml .bin files";
    } else {
      message += "; the file is " + runtime::describe_file_start(reader.head(runtime::kProbeBytes), reader.size());
    }
    invalid_model(path, message);
  }
  if (runtime::classify_file_start(reader.head(runtime::kProbeBytes)) == runtime::ModelFileKind::kGgmlVad) {
    invalid_model(path, "this is whisper.cpp's Silero VAD model file, not a Whisper model");
  }

  Hparams& h = header.hparams;
  int32_t* fields[] = {&h.n_vocab,    &h.n_audio_ctx,  &h.n_audio_state, &h.n_audio_head, &h.n_audio_layer,
                       &h.n_text_ctx, &h.n_text_state, &h.n_text_head,   &h.n_text_layer, &h.n_mels};
  for (int32_t* field : fields) *field = reader.read_i32("the hyper-parameters");
  const int32_t raw_ftype = reader.read_i32("the hyper-parameters");
  h.ftype = raw_ftype % GGML_QNT_VERSION_FACTOR;
  h.quantization_version = raw_ftype / GGML_QNT_VERSION_FACTOR;
  try {
    validate_hparams(h);
  } catch (const Error& e) {
    invalid_model(path, e.what());
  }

  MelFilters& filters = header.mel_filters;
  filters.n_mel = reader.read_i32("the mel filter dimensions");
  filters.n_fft = reader.read_i32("the mel filter dimensions");
  if (filters.n_mel < 0 || filters.n_mel > 1024 || filters.n_fft < 0 || filters.n_fft > 8192) {
    invalid_model(
        path, "absurd mel filter dimensions " + std::to_string(filters.n_mel) + " x " + std::to_string(filters.n_fft));
  }
  const uint64_t n_filter = static_cast<uint64_t>(filters.n_mel) * static_cast<uint64_t>(filters.n_fft);
  if (n_filter * sizeof(float) > reader.remaining()) {
    invalid_model(path, "truncated at the mel filters: expected " + std::to_string(n_filter * sizeof(float)) +
                            " bytes, got " + std::to_string(reader.remaining()));
  }
  filters.data.resize(n_filter);
  reader.read(filters.data.data(), n_filter * sizeof(float), "the mel filters");

  const int32_t n_tokens = reader.read_i32("the vocabulary size");
  if (n_tokens < 0 || n_tokens > h.n_vocab) {
    invalid_model(path, "vocabulary holds " + std::to_string(n_tokens) + " tokens, expected 0.." +
                            std::to_string(h.n_vocab) + " (n_vocab)");
  }
  // Each token needs at least its 4-byte length.
  if (static_cast<uint64_t>(n_tokens) * 4 > reader.remaining()) {
    invalid_model(path, "truncated in the vocabulary: " + std::to_string(n_tokens) + " tokens need at least " +
                            std::to_string(static_cast<uint64_t>(n_tokens) * 4) + " bytes, got " +
                            std::to_string(reader.remaining()));
  }
  header.vocabulary.resize(n_tokens);
  for (int32_t i = 0; i < n_tokens; ++i) {
    // The message is built only on failure: this loop runs ~50k times per load.
    if (reader.remaining() < 4) reader.truncated("vocabulary token " + std::to_string(i), 4);
    const int32_t length = reader.read_i32("vocabulary token");
    if (length < 0 || length > kMaxTokenLength) {
      invalid_model(path, "vocabulary token " + std::to_string(i) + " has length " + std::to_string(length) +
                              " (expected 0.." + std::to_string(kMaxTokenLength) + ")");
    }
    if (static_cast<uint64_t>(length) > reader.remaining()) {
      reader.truncated("vocabulary token " + std::to_string(i), length);
    }
    std::string& token = header.vocabulary[i];
    token.resize(length);
    reader.read(token.data(), length, "vocabulary token");
  }
  header.tensors_offset = reader.offset();
  return header;
}

bool filters_usable(const MelFilters& filters, int n_mels) {
  if (filters.n_mel != n_mels || filters.n_fft != kMelFftBins) return false;
  bool any_positive = false;
  for (float v : filters.data) {
    if (!std::isfinite(v) || v < 0.0f) return false;
    any_positive |= v > 0.0f;
  }
  return any_positive;
}

// The self-attention and MLP roles that encoder and decoder blocks both have; nullptr for any other role.
template <typename Layer>
ggml_tensor** block_slot(Layer& l, TensorRole role) {
  using R = TensorRole;
  switch (role) {
    case R::kAttnLnW: return &l.attn_ln_w;
    case R::kAttnLnB: return &l.attn_ln_b;
    case R::kAttnQW: return &l.attn_q_w;
    case R::kAttnQB: return &l.attn_q_b;
    case R::kAttnKW: return &l.attn_k_w;
    case R::kAttnVW: return &l.attn_v_w;
    case R::kAttnVB: return &l.attn_v_b;
    case R::kAttnOutW: return &l.attn_out_w;
    case R::kAttnOutB: return &l.attn_out_b;
    case R::kMlpLnW: return &l.mlp_ln_w;
    case R::kMlpLnB: return &l.mlp_ln_b;
    case R::kMlp0W: return &l.mlp_0_w;
    case R::kMlp0B: return &l.mlp_0_b;
    case R::kMlp1W: return &l.mlp_1_w;
    case R::kMlp1B: return &l.mlp_1_b;
    default: return nullptr;
  }
}

ggml_tensor** weight_slot(Weights& w, const TensorSpec& spec) {
  using R = TensorRole;
  if (spec.layer >= 0 && spec.encoder) {
    if (ggml_tensor** slot = block_slot(w.encoder[spec.layer], spec.role)) return slot;
  } else if (spec.layer >= 0) {
    DecoderLayer& l = w.decoder[spec.layer];
    if (ggml_tensor** slot = block_slot(l, spec.role)) return slot;
    switch (spec.role) {
      case R::kCrossLnW: return &l.cross_ln_w;
      case R::kCrossLnB: return &l.cross_ln_b;
      case R::kCrossQW: return &l.cross_q_w;
      case R::kCrossQB: return &l.cross_q_b;
      case R::kCrossKW: return &l.cross_k_w;
      case R::kCrossVW: return &l.cross_v_w;
      case R::kCrossVB: return &l.cross_v_b;
      case R::kCrossOutW: return &l.cross_out_w;
      case R::kCrossOutB: return &l.cross_out_b;
      default: break;
    }
  } else {
    switch (spec.role) {
      case R::kEncPos: return &w.enc_pos;
      case R::kConv1W: return &w.conv1_w;
      case R::kConv1B: return &w.conv1_b;
      case R::kConv2W: return &w.conv2_w;
      case R::kConv2B: return &w.conv2_b;
      case R::kEncLnW: return &w.enc_ln_w;
      case R::kEncLnB: return &w.enc_ln_b;
      case R::kDecPos: return &w.dec_pos;
      case R::kTokenEmb: return &w.token_emb;
      case R::kDecLnW: return &w.dec_ln_w;
      case R::kDecLnB: return &w.dec_ln_b;
      default: break;
    }
  }
  throw Error(ErrorCode::kInternal, "no weight slot for tensor " + spec.name);
}

uint64_t tensor_bytes(const TensorSpec& spec) {
  return ggml_row_size(spec.type, spec.ne[0]) * static_cast<uint64_t>(spec.ne[1] * spec.ne[2] * spec.ne[3]);
}

}  // namespace

FileHeader read_file_header(const std::filesystem::path& path) {
  FileReader reader(path);
  return parse_header(reader, path);
}

class ModelLoader {
 public:
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, const LoadOptions& options) {
    FileReader reader(path);
    FileHeader header = parse_header(reader, path);
    std::shared_ptr<Model> model(new Model());
    model->path_ = path;
    model->hparams_ = header.hparams;
    const Hparams& h = model->hparams_;
    model->weight_type_ = *weight_type_of_ftype(h.ftype);

    model->mel_filters_ = std::move(header.mel_filters);
    if (!filters_usable(model->mel_filters_, h.n_mels)) {
      // Files converted without filters for their mel count (or with none) get Whisper's own, computed.
      model->mel_filters_.n_mel = h.n_mels;
      model->mel_filters_.n_fft = kMelFftBins;
      model->mel_filters_.data = features::mel_filter_bank(h.n_mels);
    }
    const std::vector<TensorSpec> specs = model_tensor_specs(h, model->weight_type_);
    const std::vector<uint64_t> offsets = locate_tensors(reader, path, specs, h.ftype);
    place_weights(*model, path, specs, offsets, options);

    model->vocabulary_ = std::move(header.vocabulary);
    for (int32_t id = static_cast<int32_t>(model->vocabulary_.size()); id < h.n_vocab; ++id) {
      model->vocabulary_.push_back("[_extra_token_" + std::to_string(id) + "]");
    }

    model->size_name_ = model_size_name(h);
    if (options.alignment_heads.empty()) {
      model->alignment_heads_ = default_alignment_heads(h);
    } else {
      for (const AlignmentHead& head : options.alignment_heads) {
        if (head.layer < 0 || head.layer >= h.n_text_layer || head.head < 0 || head.head >= h.n_text_head) {
          throw Error(ErrorCode::kInvalidArgument, "alignment head (" + std::to_string(head.layer) + "," +
                                                       std::to_string(head.head) + ") is outside the model's " +
                                                       std::to_string(h.n_text_layer) + " decoder layers x " +
                                                       std::to_string(h.n_text_head) + " heads");
        }
      }
      model->alignment_heads_ = options.alignment_heads;
    }
    return model;
  }

 private:
  // Pass 1: validates every tensor record and returns each spec's data offset.
  static std::vector<uint64_t> locate_tensors(FileReader& reader, const std::filesystem::path& path,
                                              const std::vector<TensorSpec>& specs, int32_t ftype) {
    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < specs.size(); ++i) index.emplace(specs[i].name, i);
    constexpr uint64_t kNotFound = ~uint64_t{0};
    std::vector<uint64_t> offsets(specs.size(), kNotFound);
    std::string previous = "the vocabulary";
    size_t n_found = 0;
    while (reader.remaining() > 0) {
      const std::string where = "the tensor record after " + previous;
      const int32_t n_dims = reader.read_i32(where);
      const int32_t name_length = reader.read_i32(where);
      const int32_t ttype = reader.read_i32(where);
      if (n_dims < 1 || n_dims > 4) {
        invalid_model(path, where + " has " + std::to_string(n_dims) + " dimensions (expected 1..4)");
      }
      if (name_length < 1 || name_length > kMaxTensorNameLength) {
        invalid_model(path, where + " has a name of length " + std::to_string(name_length) + " (expected 1.." +
                                std::to_string(kMaxTensorNameLength) + ")");
      }
      int64_t ne[4] = {1, 1, 1, 1};
      for (int i = 0; i < n_dims; ++i) ne[i] = reader.read_i32(where);
      std::string name(name_length, '\0');
      reader.read(name.data(), name_length, where);

      const auto it = index.find(name);
      if (it == index.end()) {
        std::string printable;
        for (char c : name) printable += (c >= 0x20 && c < 0x7f) ? c : '?';
        invalid_model(path, "unknown tensor '" + printable + "' (after " + previous + ")");
      }
      const TensorSpec& spec = specs[it->second];
      if (offsets[it->second] != kNotFound) invalid_model(path, "duplicate tensor " + name);
      if (!std::equal(ne, ne + 4, spec.ne.begin())) {
        invalid_model(path, "tensor " + name + " has shape " + runtime::shape_string(n_dims, ne) + ", expected " +
                                runtime::shape_string(spec.n_dims, spec.ne.data()) + " for the header's dimensions");
      }
      if (ttype != spec.type) {
        const std::string got = ttype >= 0 && ttype < GGML_TYPE_COUNT
                                    ? std::string(type_name(static_cast<ggml_type>(ttype)))
                                    : "unknown type " + std::to_string(ttype);
        invalid_model(path, "tensor " + name + " has type " + got + ", expected " + std::string(type_name(spec.type)) +
                                " in a file of ftype " + std::to_string(ftype));
      }
      offsets[it->second] = reader.offset();
      reader.skip(tensor_bytes(spec), "tensor " + name);
      previous = "tensor " + name;
      ++n_found;
    }
    if (n_found == 0) {
      invalid_model(path, "holds no tensors (a vocabulary/mel template, not a model)");
    }
    if (n_found != specs.size()) {
      std::string missing;
      int listed = 0;
      for (size_t i = 0; i < specs.size() && listed < 3; ++i) {
        if (offsets[i] == kNotFound) missing += (listed++ ? ", " : "") + specs[i].name;
      }
      invalid_model(path, std::to_string(specs.size() - n_found) + " of " + std::to_string(specs.size()) +
                              " tensors are missing: " + missing + (specs.size() - n_found > 3 ? ", ..." : ""));
    }
    return offsets;
  }

  // Pass 2: one buffer on the chosen device, the data streamed from the file.
  static void place_weights(Model& model, const std::filesystem::path& path, const std::vector<TensorSpec>& specs,
                            const std::vector<uint64_t>& offsets, const LoadOptions& options) {
    ggml_backend_dev_t device = runtime::resolve_device(options.backend, "whisper::LoadOptions::backend");
    model.backend_ = runtime::create_backend(device, GGML_DEFAULT_N_THREADS);
    std::vector<runtime::TensorPlacement> placements;
    placements.reserve(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      placements.push_back({{specs[i].name, specs[i].type, specs[i].n_dims, specs[i].ne}, offsets[i]});
    }
    // The blocks' projections are only ever the weight of runtime::mul_mat / MatMul
    // products (encoder.cpp, batch_graph.cpp, graph_ops.h): AMX may hold them.
    const auto product_weight = [](std::string_view name) {
      if (!name.starts_with("encoder.blocks.") && !name.starts_with("decoder.blocks.")) return false;
      for (const char* suffix :
           {".query.weight", ".key.weight", ".value.weight", ".out.weight", ".mlp.0.weight", ".mlp.2.weight"}) {
        if (name.ends_with(suffix)) return true;
      }
      return false;
    };
    model.tensors_ = runtime::ModelWeights::load(
        runtime::ByteSource::file(path), placements, device, "model file " + path.string(),
        options.amx ? std::function<bool(std::string_view)>(product_weight) : std::function<bool(std::string_view)>());
    model.weights_.encoder.resize(model.hparams_.n_audio_layer);
    model.weights_.decoder.resize(model.hparams_.n_text_layer);
    for (size_t i = 0; i < specs.size(); ++i) *weight_slot(model.weights_, specs[i]) = model.tensors_.tensor(i);
  }
};

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path, const LoadOptions& options) {
  return ModelLoader::load(path, options);
}

Model::~Model() = default;

}  // namespace earshot::whisper
