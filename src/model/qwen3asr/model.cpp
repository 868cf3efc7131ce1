#include "model/qwen3asr/model.h"

#include <ggml-backend.h>
#include <ggml.h>
#include <llama.h>
#include <mtmd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#include "common/error.h"
#include "common/pass_threads.h"
#include "model/qwen3asr/context_params.h"
#include "model/qwen3asr/model_writer.h"
#include "model/qwen3asr/shared_context.h"
#include "model/runtime/cache_attention.h"
#include "model/runtime/gemv_ops.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/q8_gemm.h"
#include "model/runtime/rows_ops.h"

namespace earshot::qwen3asr {
namespace {

constexpr struct {
  const char* code;
  const char* name;
} kLanguages[] = {
    {"zh", "Chinese"}, {"en", "English"},   {"yue", "Cantonese"}, {"ar", "Arabic"},     {"de", "German"},
    {"fr", "French"},  {"es", "Spanish"},   {"pt", "Portuguese"}, {"id", "Indonesian"}, {"it", "Italian"},
    {"ko", "Korean"},  {"ru", "Russian"},   {"th", "Thai"},       {"vi", "Vietnamese"}, {"ja", "Japanese"},
    {"tr", "Turkish"}, {"hi", "Hindi"},     {"ms", "Malay"},      {"nl", "Dutch"},      {"sv", "Swedish"},
    {"da", "Danish"},  {"fi", "Finnish"},   {"pl", "Polish"},     {"cs", "Czech"},      {"fa", "Persian"},
    {"el", "Greek"},   {"hu", "Hungarian"}, {"mk", "Macedonian"}, {"ro", "Romanian"}};

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// Checks the pair before libllama/libmtmd see it, so a wrong file gets a message
// that says what it is instead of a loader's log line. Returns what the loader
// takes from the text model's header.
struct TextHeader {
  bool float_weights = true;       // its layer weights are all float (F16, BF16, F32: none quantised)
  runtime::GgufTensor token_embd;  // where the token embeddings are in the file
  // The audio encoder's conv stem kernels whose products the int8 op can take
  // (float, rows of a multiple of 32 values once flattened: conv2d.2, conv2d.3,
  // conv_out), listed where the encoder's layer matrices are Q8_0.
  std::vector<runtime::GgufTensor> stem_kernels;
};

// A weight's row length once flattened to a matrix: every dimension but the last
// (a conv kernel [KW, KH, IC, OC] gives KW x KH x IC values per output channel).
int64_t flattened_row(const runtime::GgufTensor& w) {
  int64_t n = 1;
  for (int d = 0; d + 1 < w.n_dims; ++d) n *= w.ne[static_cast<size_t>(d)];
  return n;
}

TextHeader check_pair(const std::filesystem::path& text, const std::filesystem::path& mmproj) {
  const runtime::GgufFile t = runtime::GgufFile::open(text);  // kIo / kInvalidModel with the reason
  if (t.architecture() == "clip") {
    throw Error(ErrorCode::kInvalidModel, t.label() +
                                              " is an mmproj (audio encoder) file: pass it with --mmproj "
                                              "and the text model (arch qwen3vl) with --model");
  }
  if (t.architecture() != "qwen3vl") {
    throw Error(ErrorCode::kInvalidModel, t.label() + " is not a Qwen3-ASR text model (expected arch 'qwen3vl')");
  }
  if (mmproj.empty()) {
    throw Error(
        ErrorCode::kInvalidModel,
        "Qwen3-ASR needs its audio encoder file too (the ...-mmproj.gguf next to the text model): pass --mmproj");
  }
  const runtime::GgufFile m = runtime::GgufFile::open(mmproj);
  if (m.architecture() != "clip") {
    throw Error(ErrorCode::kInvalidModel, m.label() + " is not an mmproj file (expected arch 'clip')");
  }
  std::string projector = m.find_string("clip.audio.projector_type").value_or("");
  if (projector.empty()) projector = m.find_string("clip.projector_type").value_or("");
  if (projector != "qwen3a" || !m.find<bool>("clip.has_audio_encoder").value_or(false)) {
    throw Error(ErrorCode::kInvalidModel,
                m.label() + " has projector '" + projector + "', not Qwen3-ASR's audio encoder 'qwen3a'");
  }
  TextHeader h;
  h.float_weights = std::ranges::none_of(t.tensors(), [](const runtime::GgufTensor& w) {
    return w.name.starts_with("blk.") && ggml_is_quantized(w.type);
  });
  const runtime::GgufTensor* embd = t.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->n_dims != 2 ||
      (embd->type != GGML_TYPE_F32 && ggml_get_type_traits(embd->type)->to_float == nullptr)) {
    throw Error(ErrorCode::kInvalidModel, t.label() + " has no 2-D token_embd.weight of a type ggml can read");
  }
  h.token_embd = *embd;
  const bool q8_encoder = std::ranges::any_of(m.tensors(), [](const runtime::GgufTensor& w) {
    return w.name.starts_with("a.blk.") && w.type == GGML_TYPE_Q8_0;
  });
  if (q8_encoder) {
    for (const runtime::GgufTensor& w : m.tensors()) {
      const bool stem = w.name.starts_with("a.conv2d.") || w.name.starts_with("a.conv_out.");
      const bool floats = w.type == GGML_TYPE_F16 || w.type == GGML_TYPE_BF16 || w.type == GGML_TYPE_F32;
      if (stem && w.name.ends_with(".weight") && floats && flattened_row(w) % ggml_blck_size(GGML_TYPE_Q8_0) == 0)
        h.stem_kernels.push_back(w);
    }
  }
  return h;
}

// Audio tokens of the reference model for n_frames mel frames: 13 per 100-frame
// chunk, and for a shorter last chunk the length after three stride-2 convs.
int reference_tokens(int64_t n_frames) {
  int64_t n = (n_frames / 100) * 13, rest = n_frames % 100;
  if (rest > 0) {
    for (int i = 0; i < 3; ++i) rest = (rest - 1) / 2 + 1;
    n += rest;
  }
  return static_cast<int>(n);
}

bool capture_callback(ggml_tensor* t, bool ask, void* user) { return static_cast<Session*>(user)->on_node(t, ask); }

}  // namespace

namespace detail {

void init_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(quiet_log, nullptr);
    mtmd_log_set(quiet_log, nullptr);
    llama_backend_init();
  });
}

}  // namespace detail

std::string language_name(const std::string& code) {
  for (const auto& l : kLanguages) {
    if (code == l.code) return l.name;
  }
  return "";
}

std::string language_code(const std::string& name) {
  for (const auto& l : kLanguages) {
    if (name == l.name) return l.code;
  }
  return "";
}

namespace {

// Whether a quantised weight's products may run on OpenBLAS, dequantised: when
// the model wants it, and the weight's bytes are in its type's own layout (a
// plain host buffer; ggml's AMX and repack buffers hold other layouts).
bool dequantizable(const Model& model, const ggml_tensor* w) {
  while (w->view_src != nullptr) w = w->view_src;
  return model.quantized_on_openblas() && w->buffer != nullptr && ggml_backend_buffer_is_host(w->buffer) &&
         ggml_get_type_traits(w->type)->to_float != nullptr;
}

// A Q8_0 weight's product of more rows than a step's (runtime::kGemvMaxRows, the
// few-row op's) on the int8 op (runtime/q8_gemm.h) where the model wants it; null
// otherwise (the caller decides). From 8 rows, not the op's kQ8GemmMinRows: that
// bound is against the few-row op, which takes a Qwen3-ASR product of at most 7
// rows; the 8-15 rows of a short prompt or a window's last chunk would otherwise
// go to ggml's int8 kernels, which the op outruns there too (8 rows: 275-280
// GFLOP/s against 176-196 on 2 Zen 5 cores, q8_gemm.h).
ggml_tensor* int8_product(const Model& model, ggml_context* ctx, ggml_tensor* w, ggml_tensor* x) noexcept {
  if (!model.int8_products() || x->ne[1] <= runtime::kGemvMaxRows || !runtime::q8_gemm_supports(w, x)) return nullptr;
  try {
    return runtime::q8_mul_mat(ctx, w, x);
  } catch (const std::exception&) {
    return nullptr;
  }
}

// A conv stem product on the int8 op against the model's Q8_0 copy of its kernel
// (Model::stem_q8), where the model holds one; null otherwise. The patched qwen3a
// graph (mtmd-qwen3a-stem.patch) multiplies each conv's im2col rows `w` [K, P] by
// the kernel flattened and cast to f32, `x` [K, OC]: the int8 op takes the kernel
// as the weight, [OC, P], transposed back to ggml_mul_mat(w, x)'s [P, OC]. conv_out
// comes as the kernel `w` [K, OC] times the chunk's rows `x` [K, 13].
ggml_tensor* stem_int8_product(const Model& model, ggml_context* ctx, ggml_tensor* w, ggml_tensor* x) noexcept {
  try {
    if (ggml_tensor* q = model.stem_q8(w); q != nullptr && w->ne[0] == q->ne[0] && w->ne[1] == q->ne[1]) {
      return runtime::q8_gemm_supports(q, x) ? runtime::q8_mul_mat(ctx, q, x) : nullptr;
    }
    if (x->op != GGML_OP_CPY || x->src[0] == nullptr) return nullptr;
    ggml_tensor* q = model.stem_q8(x->src[0]);
    if (q == nullptr || x->ne[0] != q->ne[0] || x->ne[1] != q->ne[1] || !runtime::q8_gemm_supports(q, w)) {
      return nullptr;
    }
    return ggml_cont(ctx, ggml_transpose(ctx, runtime::q8_mul_mat(ctx, q, w)));
  } catch (const std::exception&) {
    return nullptr;
  }
}

// The patched libmtmd's weight products (mtmd_context_params::mul_mat) on OpenBLAS:
// f32 activations against weights, both of at least 8 rows: every product of the
// qwen3a graph, conv1's 9 inputs too (ggml takes 50 ms for that one on an 8 s window
// at 0.6B, as 9-element dot products). Shapes runtime::blas_mul_mat refuses (not 2-D
// rows) stay with ggml. (Called from libmtmd's graph builder: nothing may throw
// through it.)
ggml_tensor* openblas_mul_mat(ggml_context* ctx, ggml_tensor* w, ggml_tensor* x, void* model) noexcept {
  if (ggml_tensor* y = stem_int8_product(*static_cast<const Model*>(model), ctx, w, x)) return y;
  if (ggml_tensor* y = int8_product(*static_cast<const Model*>(model), ctx, w, x)) return y;
  if (!static_cast<const Model*>(model)->on_openblas()) return nullptr;
  if (x->type != GGML_TYPE_F32 || w->ne[1] < 8 || x->ne[1] < 8) return nullptr;
  if (ggml_is_quantized(w->type) && !dequantizable(*static_cast<const Model*>(model), w)) return nullptr;
  try {
    return runtime::blas_mul_mat(ctx, w, x);
  } catch (const std::exception&) {
    return nullptr;  // ggml's product instead
  }
}

// libmtmd's unmasked attention (the patch's mtmd_context_params::attention) on
// OpenBLAS (runtime::blas_attention: exact softmax in f32, per head), where its scale
// is the 1 / sqrt(head_dim) that op applies; inputs that op refuses stay with ggml.
ggml_tensor* openblas_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, int n_head,
                                float kq_scale, void*) noexcept {
  if (n_head < 1) return nullptr;
  const float head_scale = 1.0f / std::sqrt(static_cast<float>(q->ne[0] / n_head));
  if (std::abs(kq_scale - head_scale) > 1e-6f * head_scale) return nullptr;
  try {
    return runtime::blas_attention(ctx, q, k, v, n_head);
  } catch (const std::exception&) {
    return nullptr;  // ggml's ops instead
  }
}

// The patched libllama's weight products (llama_context_params::mul_mat) where the
// text model's weights are float, which ggml multiplies at 0.4-0.5 of sgemm (it
// rounds the activations to f16 and takes f16 dot products): a prompt's rows on
// OpenBLAS (runtime::blas_mul_mat converts the weight to f32 in chunks as it goes
// and multiplies all the rows by each, so the weight is read once in its own type),
// a step's row or few by runtime::gemv_mul_mat (the weight streamed once, the
// activations kept in f32). Quantised weights stay with ggml's int8 kernels (on AMX
// they outrun sgemm).
ggml_tensor* openblas_text_mul_mat(ggml_context* ctx, ggml_tensor* w, ggml_tensor* x, void* model) noexcept {
  if (ggml_tensor* y = int8_product(*static_cast<const Model*>(model), ctx, w, x)) return y;
  if (x->type != GGML_TYPE_F32 || !static_cast<const Model*>(model)->on_openblas()) return nullptr;
  if (ggml_is_quantized(w->type)) {
    // A step's few rows of a Q8_0 weight: the few-row op (the weight read once, int8
    // dot products; 1.2x ggml's at one row on a Zen 5).
    if (x->ne[1] <= runtime::kGemvMaxRows) {
      if (w->type != GGML_TYPE_Q8_0 || !runtime::rows_supports(w, x)) return nullptr;
      try {
        return runtime::rows_mul_mat(ctx, w, x);
      } catch (const std::exception&) {
        return nullptr;
      }
    }
    // A prompt's rows, if dequantised products are wanted.
    if (!dequantizable(*static_cast<const Model*>(model), w)) return nullptr;
    try {
      return runtime::blas_mul_mat(ctx, w, x);
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  try {
    if (x->ne[1] <= runtime::kGemvMaxRows)
      return runtime::gemv_supports(w, x) ? runtime::gemv_mul_mat(ctx, w, x) : nullptr;
    return runtime::blas_mul_mat(ctx, w, x);
  } catch (const std::exception&) {
    return nullptr;  // ggml's product instead
  }
}

// The patched libllama's attention (llama_context_params::attention) over a prompt's
// rows on OpenBLAS (runtime::blas_masked_attention: the scores and values by sgemm,
// an exact f32 softmax), where ggml multiplies the f16 cache by f16-rounded queries.
constexpr int64_t kMinAttentionRows = 8;

// A step's few rows keep ggml's softmax node, named as libllama names it
// ("kq_soft_max-<layer>": AlignAtt reads the alignment heads' rows there), between
// earshot's cache ops (runtime/cache_attention.h): the keys' scores with the
// queries in f32 and the probabilities times the transposed values in f32, where
// ggml's products round both to f16 (and take 5 ops a layer to earshot's 3).
// The layer comes from the cache's name (libllama's "cache_k_l<layer>"); without
// it, or for operands the ops refuse, ggml's ops as upstream builds them.
ggml_tensor* step_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, bool v_trans,
                            ggml_tensor* kq_mask, float kq_scale) {
  const ggml_tensor* cache = k->view_src != nullptr ? k->view_src : k;
  int layer = -1;
  if (!v_trans || std::sscanf(ggml_get_name(cache), "cache_k_l%d", &layer) != 1 || layer < 0) return nullptr;
  if (!runtime::key_scores_supports(k, q)) return nullptr;
  ggml_tensor* kq = ggml_soft_max_ext(ctx, runtime::key_scores(ctx, k, q), kq_mask, kq_scale, 0.0f);
  ggml_format_name(kq, "kq_soft_max-%d", layer);
  return runtime::head_values_supports(v, kq) ? runtime::head_values(ctx, v, kq) : nullptr;
}

ggml_tensor* openblas_text_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, bool v_trans,
                                     ggml_tensor* kq_mask, float kq_scale, void*) noexcept {
  try {
    if (q->ne[1] < kMinAttentionRows) return step_attention(ctx, q, k, v, v_trans, kq_mask, kq_scale);
    return runtime::blas_masked_attention(ctx, q, k, v, v_trans, kq_mask, kq_scale);
  } catch (const std::exception&) {
    return nullptr;  // ggml's ops instead
  }
}

}  // namespace

std::shared_ptr<const Model> Model::load(const std::filesystem::path& text, const std::filesystem::path& mmproj,
                                         ModelOptions options) {
  if (options.mel_frames == MelFrames::kHf && !options.reference_audio_length) {
    throw Error(ErrorCode::kInvalidArgument, "Hugging Face's mel frame count goes with the reference audio length");
  }
  const TextHeader header = check_pair(text, mmproj);
  detail::init_backend();
  std::shared_ptr<Model> m(new Model());
  m->options_ = options;
  m->on_openblas_ = runtime::resolve_cpu_kernels(options.cpu_kernels, true) == runtime::CpuKernels::kOpenBlas;
  using QuantizedProducts = ModelOptions::QuantizedProducts;
  if (options.quantized_products == QuantizedProducts::kInt8 &&
      (options.cpu_kernels == runtime::CpuKernels::kGgml || !runtime::q8_gemm_available())) {
    throw Error(ErrorCode::kUnsupported,
                "int8 quantised products need earshot's kernels (not --cpu-kernels ggml) and a CPU with AVX512-VNNI; "
                "this one: " +
                    runtime::describe_cpu());
  }
  m->int8_products_ = options.cpu_kernels != runtime::CpuKernels::kGgml && runtime::q8_gemm_available() &&
                      (options.quantized_products == QuantizedProducts::kInt8 ||
                       options.quantized_products == QuantizedProducts::kAuto);
  m->quantized_on_openblas_ =
      m->on_openblas_ && (options.quantized_products == QuantizedProducts::kOpenBlas ||
                          (options.quantized_products != QuantizedProducts::kGgml && runtime::openblas_runs_avx512()));
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  // Float weights in plain CPU memory, where the OpenBLAS products read them: ggml's
  // extra buffer types (AMX) take F16 weights too, and only ggml's own product may
  // read a weight there.
  if (m->on_openblas_ && header.float_weights) mp.use_extra_bufts = false;
  m->model_ = llama_model_load_from_file(text.string().c_str(), mp);
  if (!m->model_) throw Error(ErrorCode::kInvalidModel, "libllama could not load " + text.string());
  if (llama_vocab_n_tokens(llama_model_get_vocab(m->model_)) != kVocabSize) {
    throw Error(ErrorCode::kInvalidModel, text.string() + ": not Qwen3-ASR's vocabulary of 151936 tokens");
  }
  m->text_path_ = text;
  m->token_embd_ = header.token_embd;
  if (m->token_embd_.ne[0] != llama_model_n_embd(m->model_) || m->token_embd_.ne[1] < kVocabSize) {
    throw Error(ErrorCode::kInvalidModel, text.string() + ": token_embd.weight is not n_embd x the vocabulary");
  }
  mtmd_context_params cp = mtmd_context_params_default();
  cp.use_gpu = false;
  cp.n_threads = options.n_threads;
  cp.print_timings = false;
  cp.warmup = false;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  // The model's own look at each window's mel (encode_windows), then the caller's.
  cp.cb_eval = &Model::encoder_node;
  cp.cb_eval_user_data = m.get();
  if (m->on_openblas_ || m->int8_products_) {
    cp.mul_mat = openblas_mul_mat;
    cp.mul_mat_user_data = m.get();
    // With the program's products the stem runs per chunk; a window keeps its
    // unchanged chunks' stems (audio_windows.h).
    cp.audio_stem = &Model::audio_stem;
    cp.audio_stem_user_data = m.get();
    m->stem_hook_ = true;
  }
  if (m->on_openblas_) cp.attention = openblas_attention;
  m->mtmd_ = mtmd_init_from_file(mmproj.string().c_str(), m->model_, cp);
  if (!m->mtmd_ || !mtmd_support_audio(m->mtmd_)) {
    throw Error(ErrorCode::kInvalidModel, "libmtmd could not load the audio encoder " + mmproj.string() + " for " +
                                              text.string() + " (do the two files belong together?)");
  }
  if (m->int8_products_ && m->stem_hook_) m->load_stem_q8(mmproj, header.stem_kernels);
  return m;
}

void Model::load_stem_q8(const std::filesystem::path& mmproj, const std::vector<runtime::GgufTensor>& kernels) {
  if (kernels.empty()) return;
  const ggml_init_params params{ggml_tensor_overhead() * kernels.size(), nullptr, /*no_alloc=*/true};
  stem_ctx_.reset(ggml_init(params));
  for (const runtime::GgufTensor& k : kernels) {
    ggml_tensor* q =
        ggml_new_tensor_2d(stem_ctx_.get(), GGML_TYPE_Q8_0, flattened_row(k), k.ne[static_cast<size_t>(k.n_dims - 1)]);
    ggml_set_name(q, k.name.c_str());
  }
  stem_buffer_.reset(ggml_backend_alloc_ctx_tensors_from_buft(stem_ctx_.get(), ggml_backend_cpu_buffer_type()));
  if (!stem_buffer_) throw Error(ErrorCode::kIo, "cannot allocate the audio encoder's Q8_0 conv stem kernels");
  std::ifstream file(mmproj, std::ios::binary);
  std::vector<char> bytes;
  std::vector<float> values;
  for (const runtime::GgufTensor& k : kernels) {
    ggml_tensor* q = ggml_get_tensor(stem_ctx_.get(), k.name.c_str());
    bytes.resize(k.n_bytes);
    file.seekg(static_cast<std::streamoff>(k.offset));
    file.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!file) throw Error(ErrorCode::kIo, "could not read " + k.name + " from " + mmproj.string());
    values.resize(static_cast<size_t>(q->ne[0] * q->ne[1]));
    if (k.type == GGML_TYPE_F32) {
      std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
    } else {
      ggml_get_type_traits(k.type)->to_float(bytes.data(), values.data(), static_cast<int64_t>(values.size()));
    }
    ggml_quantize_chunk(GGML_TYPE_Q8_0, values.data(), q->data, 0, q->ne[1], q->ne[0], nullptr);
    stem_q8_.push_back(q);
  }
}

ggml_tensor* Model::stem_q8(const ggml_tensor* t) const {
  while (t->view_src != nullptr) t = t->view_src;
  for (ggml_tensor* q : stem_q8_) {
    if (std::strcmp(q->name, t->name) == 0) return q;
  }
  return nullptr;
}

Model::~Model() {
  if (mtmd_) mtmd_free(mtmd_);
  if (model_) llama_model_free(model_);
}

int Model::n_layer() const { return llama_model_n_layer(model_); }
int Model::n_head() const { return llama_model_n_head(model_); }
int Model::n_embd() const { return llama_model_n_embd_inp(model_); }
int Model::n_vocab() const { return llama_vocab_n_tokens(llama_model_get_vocab(model_)); }

std::vector<int32_t> Model::tokenize(const std::string& text, bool parse_special) const {
  const llama_vocab* vocab = llama_model_get_vocab(model_);
  std::vector<llama_token> out(text.size() + 8);
  int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), out.data(),
                         static_cast<int32_t>(out.size()), false, parse_special);
  if (n < 0) {
    out.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), out.data(),
                       static_cast<int32_t>(out.size()), false, parse_special);
  }
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

std::string Model::piece(int32_t token) const {
  char buf[256];
  const int n = llama_token_to_piece(llama_model_get_vocab(model_), token, buf, sizeof buf, 0, true);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string Model::detokenize(std::span<const int32_t> tokens) const {
  std::string out;
  for (int32_t t : tokens) out += piece(t);
  return out;
}

bool Model::is_end(int32_t token) const { return token == kImEnd || token == kEndOfText; }

std::vector<float> Model::token_embeddings(std::span<const int32_t> tokens) const {
  const int64_t n_file = token_embd_.ne[0], n_inp = n_embd();
  const size_t row_bytes = ggml_row_size(token_embd_.type, n_file);
  std::vector<float> out(tokens.size() * static_cast<size_t>(n_inp), 0.0f);  // zeros past n_embd, as libllama pads
  std::ifstream file(text_path_, std::ios::binary);
  std::vector<char> row(row_bytes);
  const ggml_to_float_t to_float =
      token_embd_.type == GGML_TYPE_F32 ? nullptr : ggml_get_type_traits(token_embd_.type)->to_float;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= token_embd_.ne[1]) {
      throw Error(ErrorCode::kInvalidArgument, "token " + std::to_string(tokens[i]) + " is outside the vocabulary");
    }
    file.seekg(static_cast<std::streamoff>(token_embd_.offset + static_cast<uint64_t>(tokens[i]) * row_bytes));
    file.read(row.data(), static_cast<std::streamsize>(row_bytes));
    if (!file) throw Error(ErrorCode::kIo, "could not read the token embeddings from " + text_path_.string());
    float* dst = out.data() + i * static_cast<size_t>(n_inp);
    if (to_float) {
      to_float(row.data(), dst, n_file);
    } else {
      std::memcpy(dst, row.data(), row_bytes);  // f32 (ggml has no conversion for it)
    }
  }
  return out;
}

void check_alignment_heads(const std::vector<Head>& heads, int n_layer, int n_head) {
  for (const auto& [layer, head] : heads) {
    if (layer < 0 || layer >= n_layer || head < 0 || head >= n_head) {
      throw Error(ErrorCode::kInvalidArgument, "alignment head (" + std::to_string(layer) + ", " +
                                                   std::to_string(head) + ") is outside the model's " +
                                                   std::to_string(n_layer) + " layers x " + std::to_string(n_head) +
                                                   " heads");
    }
  }
}

namespace detail {

llama_context_params decoding_context_params(const Model& model, int n_ctx, int n_seq) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n_ctx);
  cp.n_batch = static_cast<uint32_t>(n_ctx / n_seq);
  cp.n_ubatch = cp.n_batch;
  cp.n_seq_max = static_cast<uint32_t>(n_seq);
  // Logits of one position per sequence per call (its last): without this the
  // context reserves n_batch x 151936 floats of output.
  cp.n_outputs_max = static_cast<uint32_t>(n_seq);
  cp.n_threads = model.options().n_threads;
  cp.n_threads_batch = model.options().n_threads;
  // kq_soft_max-<layer> exists only without flash attention.
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  if (model.options().f32_kv_cache) cp.type_k = cp.type_v = GGML_TYPE_F32;
  if (model.on_openblas() || model.int8_products()) {
    cp.mul_mat = openblas_text_mul_mat;
    cp.mul_mat_user_data = const_cast<Model*>(&model);
  }
  if (model.on_openblas()) cp.attention = openblas_text_attention;
  return cp;
}

}  // namespace detail

void check_alignment_heads(const std::vector<Head>& heads, const std::filesystem::path& text) {
  const runtime::GgufFile t = runtime::GgufFile::open(text);
  const auto n_layer = t.find_u32("qwen3vl.block_count"), n_head = t.find_u32("qwen3vl.attention.head_count");
  if (n_layer && n_head) check_alignment_heads(heads, static_cast<int>(*n_layer), static_cast<int>(*n_head));
}

Session::Session(std::shared_ptr<const Model> model, std::vector<Head> heads, int n_ctx,
                 std::shared_ptr<SharedContext> shared)
    : model_(std::move(model)), heads_(std::move(heads)), shared_(std::move(shared)) {
  const int n_layer = model_->n_layer(), n_head = model_->n_head();
  heads_by_layer_.assign(static_cast<size_t>(n_layer), {});
  check_alignment_heads(heads_, n_layer, n_head);
  for (const auto& [layer, head] : heads_) heads_by_layer_[static_cast<size_t>(layer)].push_back(head);
  if (shared_) slot_ = shared_->acquire();
  if (slot_ >= 0) {
    if (n_ctx > shared_->slot_tokens()) {
      shared_->release(slot_);
      slot_ = -1;
    } else {
      return;  // the shared context's slot
    }
  }
  llama_context_params cp = detail::decoding_context_params(*model_, n_ctx, 1);
  cp.cb_eval = capture_callback;
  cp.cb_eval_user_data = this;
  ctx_ = llama_init_from_model(model_->llama(), cp);
  if (!ctx_) throw Error(ErrorCode::kInternal, "libllama could not create a decoding context");
}

Session::~Session() {
  if (ctx_) llama_free(ctx_);
  if (slot_ >= 0) shared_->release(slot_);
}

int Session::encode(std::span<const float> pcm) {
  if (pcm.empty()) throw Error(ErrorCode::kInvalidArgument, "no audio to encode");
  if (slot_ >= 0) shared_->set_in_pass(slot_, true);  // a pass is under way until end_pass()
  // mtmd pads the last window to whole 100-frame chunks; the reference model has
  // no such tokens (mel frames: n_samples / 160 + 1 as mtmd counts them, or
  // n_samples / 160 as Hugging Face does). Only the last window is padded, so its
  // padding tokens (and the token HF's dropped frame alone makes) are the last ones.
  const int64_t n_frames =
      static_cast<int64_t>(pcm.size() / 160) + (model_->options().mel_frames == MelFrames::kHf ? 0 : 1);
  if (model_->options().reference_audio_length && reference_tokens(n_frames) == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                std::to_string(pcm.size()) + " samples make no audio token (at least 160 are needed)");
  }
  try {
    last_encode_ = model_->encode_windows(pcm, windows_, next_window_id_);
  } catch (...) {
    n_audio_ = 0;
    embd_.clear();
    audio_ids_.clear();
    throw;
  }
  int n_mtmd = 0;
  for (const EncodedWindow& w : windows_) n_mtmd += w.n_tokens;
  n_audio_ = model_->options().reference_audio_length ? std::min(n_mtmd, reference_tokens(n_frames)) : n_mtmd;
  const size_t n_embd = static_cast<size_t>(model_->n_embd());
  embd_.resize(static_cast<size_t>(n_audio_) * n_embd);
  audio_ids_.resize(static_cast<size_t>(n_audio_));
  size_t at = 0;
  for (const EncodedWindow& w : windows_) {
    const size_t n = std::min(static_cast<size_t>(w.n_tokens), static_cast<size_t>(n_audio_) - at);
    std::copy(w.embd.begin(), w.embd.begin() + static_cast<std::ptrdiff_t>(n * n_embd),
              embd_.begin() + static_cast<std::ptrdiff_t>(at * n_embd));
    for (size_t k = 0; k < n; ++k) audio_ids_[at + k] = w.id << 16 | k;
    at += n;
  }
  return n_audio_;
}

int32_t Session::argmax_logits() {
  const float* l = llama_get_logits_ith(ctx_, -1);
  if (!l) throw Error(ErrorCode::kInternal, "libllama returned no logits");
  logits_.assign(l, l + model_->n_vocab());
  return greedy();
}

int32_t Session::greedy() const {
  return static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
}

void Session::follow_pass_threads() {
  if (const int threads = pass_threads(); threads > 0) llama_set_n_threads(ctx_, threads, threads);
}

int32_t Session::decode_tokens(std::span<const int32_t> tokens) {
  if (tokens.empty()) return -1;
  if (slot_ >= 0) {
    // A slot's rows go as embeddings (a shared batch is all embeddings), text
    // positions (p, p, p, 0) as libllama gives a token.
    const std::vector<float> embd = model_->token_embeddings(tokens);
    const int rows = static_cast<int>(tokens.size());
    std::vector<int32_t> pos(static_cast<size_t>(rows) * 4);
    for (int r = 0; r < rows; ++r) {
      for (int sec = 0; sec < 4; ++sec) pos[static_cast<size_t>(sec * rows + r)] = sec < 3 ? n_past_ + r : 0;
    }
    const int32_t next = decode_shared(embd.data(), pos.data(), rows, n_past_);
    n_past_ += rows;
    for (int32_t t : tokens) kv_keys_.push_back(static_cast<uint32_t>(t));
    return next;
  }
  std::vector<llama_token> ids(tokens.begin(), tokens.end());
  std::vector<llama_pos> pos(ids.size());
  std::vector<int32_t> n_seq(ids.size(), 1);
  llama_seq_id seq0 = 0;
  std::vector<llama_seq_id*> seq(ids.size(), &seq0);
  std::vector<int8_t> logits(ids.size(), 0);
  logits.back() = 1;
  for (size_t i = 0; i < ids.size(); ++i) pos[i] = n_past_ + static_cast<int>(i);
  llama_batch b{
      static_cast<int32_t>(ids.size()), ids.data(), nullptr, pos.data(), n_seq.data(), seq.data(), logits.data()};
  follow_pass_threads();
  if (decode_lone(b) != 0) {
    kv_keys_.clear();
    throw Error(ErrorCode::kInternal, "libllama could not decode the tokens");
  }
  n_past_ += static_cast<int>(ids.size());
  for (int32_t t : tokens) kv_keys_.push_back(static_cast<uint32_t>(t));
  return argmax_logits();
}

int Session::decode_lone(const llama_batch& batch) {
  if (!model_->options().exclusive_compute) return llama_decode(ctx_, batch);
  std::lock_guard lock(model_->compute_mutex());
  return llama_decode(ctx_, batch);
}

int32_t Session::decode_shared(const float* embd, const int32_t* pos, int rows, int first_pos) {
  SharedContext::Request r;
  r.session = this;
  r.slot = slot_;
  r.first_pos = first_pos;
  r.rows = rows;
  r.embd = embd;
  r.pos = pos;
  r.capture = capture_;
  shared_->decode(r);
  if (r.error) {
    kv_keys_.clear();  // what the slot holds is unknown: the next prefill starts afresh
    std::rethrow_exception(r.error);
  }
  logits_ = std::move(r.logits);
  return greedy();
}

void Session::end_pass() {
  if (slot_ >= 0) shared_->set_in_pass(slot_, false);
}

int32_t Session::prefill(const PromptSpec& p) {
  if (n_audio_ == 0) throw Error(ErrorCode::kInternal, "prefill before any audio was encoded");
  capture_ = false;
  std::string before = "<|im_start|>system\n" + p.context + "<|im_end|>\n<|im_start|>user\n<|audio_start|>";
  std::string after = "<|audio_end|><|im_end|>\n<|im_start|>assistant\n";
  if (!p.language.empty()) after += "language " + p.language + "<asr_text>";
  const std::vector<int32_t> head = model_->tokenize(before, true);
  std::vector<int32_t> tail = model_->tokenize(after, true);
  tail.insert(tail.end(), p.prefix_tokens.begin(), p.prefix_tokens.end());
  audio_begin_ = static_cast<int>(head.size());
  const int audio_end = audio_begin_ + n_audio_;
  const int n = audio_end + static_cast<int>(tail.size());

  // What each position holds; the KV rows of the longest prefix the cache holds
  // already are kept (the prompt is causal: a row depends on the positions before
  // it only). At least the last position is decoded: its logits are the answer.
  std::vector<uint64_t> keys;
  keys.reserve(static_cast<size_t>(n));
  for (int32_t t : head) keys.push_back(static_cast<uint32_t>(t));
  for (uint64_t id : audio_ids_) keys.push_back(kAudioKey | id);
  for (int32_t t : tail) keys.push_back(static_cast<uint32_t>(t));
  int from = 0;
  if (model_->options().reuse_prompt_kv) {
    const auto diverge = std::mismatch(keys.begin(), keys.end(), kv_keys_.begin(), kv_keys_.end()).first;
    from = std::min(static_cast<int>(diverge - keys.begin()), n - 1);
  }
  if (slot_ < 0 && (from == 0 || !llama_memory_seq_rm(llama_get_memory(ctx_), 0, from, -1))) {
    llama_memory_clear(llama_get_memory(ctx_), true);
    from = 0;
  }
  kv_keys_.resize(static_cast<size_t>(from));
  n_past_ = from;

  // The prompt from `from` on as one batch of embeddings (a batch is tokens or
  // embeddings, and three calls would read every weight three times, two of them
  // for a few rows): the text tokens' rows of token_embd (what libllama's get_rows
  // takes, zero-padded to n_embd_inp) around the audio's. M-RoPE positions as
  // libllama gives them: text tokens (p, p, p, 0), the audio all four sections at p.
  const size_t n_embd = static_cast<size_t>(model_->n_embd());
  std::vector<int32_t> text;  // the text tokens' rows in one read of the file
  for (int i = from; i < audio_begin_; ++i) text.push_back(head[static_cast<size_t>(i)]);
  const size_t n_head_rows = text.size();
  text.insert(text.end(), tail.begin() + std::max(0, from - audio_end), tail.end());
  std::vector<float> embd = model_->token_embeddings(text);
  if (from < audio_end) {
    const int audio_from = std::max(0, from - audio_begin_);
    embd.insert(embd.begin() + static_cast<std::ptrdiff_t>(n_head_rows * n_embd),
                embd_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(audio_from) * n_embd), embd_.end());
  }
  const int rows = n - from;
  if (embd.size() != static_cast<size_t>(rows) * n_embd) throw Error(ErrorCode::kInternal, "prompt rows miscounted");
  std::vector<llama_pos> pos(static_cast<size_t>(rows) * 4);
  for (int r = 0; r < rows; ++r) {
    const int i = from + r;
    const bool audio = i >= audio_begin_ && i < audio_end;
    for (int s = 0; s < 4; ++s) pos[static_cast<size_t>(s * rows + r)] = s < 3 || audio ? i : 0;
  }
  int32_t first = -1;
  if (slot_ >= 0) {
    first = decode_shared(embd.data(), pos.data(), rows, from);  // the slot's cells from `from` on go first
  } else {
    std::vector<int32_t> n_seq(static_cast<size_t>(rows), 1);
    llama_seq_id seq0 = 0;
    std::vector<llama_seq_id*> seq(static_cast<size_t>(rows), &seq0);
    std::vector<int8_t> logits(static_cast<size_t>(rows), 0);
    logits.back() = 1;
    llama_batch b{rows, nullptr, embd.data(), pos.data(), n_seq.data(), seq.data(), logits.data()};
    follow_pass_threads();
    if (decode_lone(b) != 0) {
      kv_keys_.clear();  // what the cache holds is unknown: the next prefill starts afresh
      throw Error(ErrorCode::kInternal, "libllama could not decode the prompt");
    }
  }
  n_past_ = n;
  kv_keys_ = std::move(keys);
  last_prefill_ = {n, from, rows};

  prompt_tokens_ = head;
  prompt_tokens_.insert(prompt_tokens_.end(), static_cast<size_t>(n_audio_), kAudioPad);
  prompt_tokens_.insert(prompt_tokens_.end(), tail.begin(), tail.end());
  return slot_ >= 0 ? first : argmax_logits();
}

int32_t Session::step(int32_t token) {
  frames_.assign(heads_.size(), -1);
  rows_.assign(heads_.size(), {});
  capture_ = true;
  const int32_t next = decode_tokens(std::span<const int32_t>(&token, 1));
  capture_ = false;
  return next;
}

void Session::truncate(int pos) {
  if (pos < audio_begin_ + n_audio_) throw Error(ErrorCode::kInternal, "truncating into the prompt");
  if (pos >= n_past_) return;
  // A slot's cells from its next call's first position on go with that call.
  if (slot_ < 0 && !llama_memory_seq_rm(llama_get_memory(ctx_), 0, pos, -1)) {
    kv_keys_.clear();
    throw Error(ErrorCode::kInternal, "libllama could not remove the KV suffix");
  }
  n_past_ = pos;
  kv_keys_.resize(static_cast<size_t>(pos));
}

bool Session::on_node(ggml_tensor* t, bool ask) {
  const ModelOptions& o = model_->options();
  if (o.decoder_eval_callback == nullptr) return on_stream_node(t, ask, 0);
  if (ask) {
    outer_asked_ = o.decoder_eval_callback(t, true, o.decoder_eval_data);
    return on_stream_node(t, true, 0) || outer_asked_;
  }
  const bool go_on = on_stream_node(t, false, 0);
  return (outer_asked_ ? o.decoder_eval_callback(t, false, o.decoder_eval_data) : true) && go_on;
}

bool Session::on_stream_node(ggml_tensor* t, bool ask, int stream) {
  static constexpr char kName[] = "kq_soft_max-";
  if (!capture_ || std::strncmp(t->name, kName, sizeof kName - 1) != 0) return ask ? false : true;
  const int layer = std::atoi(t->name + sizeof kName - 1);
  if (layer < 0 || layer >= static_cast<int>(heads_by_layer_.size()) || heads_by_layer_[layer].empty()) {
    return ask ? false : true;
  }
  if (ask) return true;
  // [n_kv, n_tokens, n_head, n_stream], F32: element (cell j, token t, head h,
  // stream s) at j + t*n_kv + h*n_kv*n_tokens + s*n_kv*n_tokens*n_head. One token
  // per step, one sequence per stream whose suffixes only are removed: cell = position.
  const int64_t n_kv = t->ne[0], n_tokens = t->ne[1], n_head = t->ne[2];
  if (t->type != GGML_TYPE_F32 || n_tokens != 1 || stream >= t->ne[3] || n_kv < audio_begin_ + n_audio_) return true;
  for (size_t k = 0; k < heads_.size(); ++k) {
    if (heads_[k].first != layer) continue;
    std::vector<float> row(static_cast<size_t>(n_kv));
    const size_t offset =
        (static_cast<size_t>(stream) * static_cast<size_t>(n_head) + static_cast<size_t>(heads_[k].second)) *
        static_cast<size_t>(n_kv) * sizeof(float);
    ggml_backend_tensor_get(t, row.data(), offset, row.size() * sizeof(float));
    const auto span = row.begin() + audio_begin_;
    frames_[k] = static_cast<int>(std::max_element(span, span + n_audio_) - span);
    rows_[k] = std::move(row);
  }
  return true;
}

}  // namespace earshot::qwen3asr
