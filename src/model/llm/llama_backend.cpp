#include "model/llm/llama_backend.h"

#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "model/runtime/gguf_file.h"

namespace earshot::llm {

namespace {

// libllama logs through one process-wide callback; this keeps its warnings and
// errors (whole lines) and the last error line, for load failures' messages.
struct LogState {
  std::mutex mutex;
  std::function<void(const std::string&)> sink;
  ggml_log_level level = GGML_LOG_LEVEL_NONE;
  std::string line;
  std::string last_error;
};

LogState& log_state() {
  static LogState state;
  return state;
}

void on_llama_log(ggml_log_level level, const char* text, void*) {
  LogState& s = log_state();
  std::lock_guard lock(s.mutex);
  if (level != GGML_LOG_LEVEL_CONT) s.level = level;
  if (s.level != GGML_LOG_LEVEL_WARN && s.level != GGML_LOG_LEVEL_ERROR) return;
  s.line += text;
  if (s.line.empty() || s.line.back() != '\n') return;
  s.line.pop_back();
  if (s.level == GGML_LOG_LEVEL_ERROR) s.last_error = s.line;
  if (s.sink) {
    s.sink(s.line);
  } else {
    std::fprintf(stderr, "earshot: llama: %s\n", s.line.c_str());
  }
  s.line.clear();
}

void init_llama_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(on_llama_log, nullptr);
    llama_backend_init();
  });
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

}  // namespace

namespace detail {
std::string take_last_llama_error() {
  LogState& s = log_state();
  std::lock_guard lock(s.mutex);
  std::string e = std::move(s.last_error);
  s.last_error.clear();
  return e;
}

int default_threads(const LlamaModelOptions& options) {
  if (options.threads > 0) return options.threads;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
}

void check_capture_heads(const LlamaModel& model, const std::vector<AttentionHead>& heads) {
  const LlamaModelOptions& mo = model.options();
  if (!heads.empty() && mo.flash_attention && mo.attention_route == AttentionRoute::kSoftmax) {
    throw Error(ErrorCode::kUnsupported,
                "attention capture from the softmax needs flash attention off (LlamaModelOptions.flash_attention = "
                "false), or the Q/K route (attention_route = kQk, --translation-attention qk)");
  }
  const ModelShape shape = model.shape();
  for (const AttentionHead& h : heads) {
    if (h.layer >= shape.n_layer || h.head >= shape.n_head) {
      throw Error(ErrorCode::kInvalidArgument, "attention head (" + std::to_string(h.layer) + ", " +
                                                   std::to_string(h.head) + ") is outside the model's " +
                                                   std::to_string(shape.n_layer) + " layers x " +
                                                   std::to_string(shape.n_head) + " heads");
    }
  }
}
}  // namespace detail

using detail::default_threads;
using detail::take_last_llama_error;

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> names = {"hunyuan-dense", "qwen3",  "qwen2",   "gemma",
                                                 "gemma2",        "gemma3", "gemma3n", "gemma4"};
  return names;
}

void set_llama_log_sink(std::function<void(const std::string&)> sink) {
  init_llama_once();
  LogState& s = log_state();
  std::lock_guard lock(s.mutex);
  s.sink = std::move(sink);
}

std::shared_ptr<const LlamaModel> LlamaModel::load(const std::filesystem::path& path,
                                                   const LlamaModelOptions& options) {
  init_llama_once();
  // earshot's reader names what is wrong with a missing, foreign or truncated
  // file far better than libllama's loader does.
  const runtime::GgufFile file = runtime::GgufFile::open(path);
  const auto& supported = supported_architectures();
  if (std::find(supported.begin(), supported.end(), file.architecture()) == supported.end()) {
    throw Error(ErrorCode::kUnsupported, file.label() + " is not a supported LLM: architecture '" +
                                             file.architecture() + "'; supported: " + joined(supported));
  }

  std::shared_ptr<LlamaModel> model(new LlamaModel());
  model->options_ = options;
  model->architecture_ = file.architecture();
  model->id_ = path.stem().string();

  llama_model_params params = llama_model_default_params();
  params.n_gpu_layers = options.gpu_layers < 0 ? 999 : options.gpu_layers;
  take_last_llama_error();
  model->model_ = llama_model_load_from_file(path.string().c_str(), params);
  if (model->model_ == nullptr) {
    const std::string why = take_last_llama_error();
    throw Error(ErrorCode::kInvalidModel,
                "libllama could not load " + file.label() + (why.empty() ? std::string() : ": " + why));
  }
  model->vocab_ = llama_model_get_vocab(model->model_);
  model->shape_ = {llama_model_n_layer(model->model_), llama_model_n_head(model->model_),
                   llama_model_n_head_kv(model->model_), llama_vocab_n_tokens(model->vocab_),
                   llama_model_n_ctx_train(model->model_)};
  model->ids_by_bytes_.reserve(static_cast<std::size_t>(model->shape_.n_vocab));
  for (Token id = 0; id < model->shape_.n_vocab; ++id) model->ids_by_bytes_.emplace(model->token_bytes(id), id);

  if (options.warm_up) {
    auto session = model->open_session({.context_tokens = 16, .threads = 0});
    const Token first = 0;
    session->decode(std::span(&first, 1));
  }
  return model;
}

LlamaModel::~LlamaModel() {
  if (model_ != nullptr) llama_model_free(model_);
}

std::vector<Token> LlamaModel::tokenize(std::string_view text, bool parse_special) const {
  std::vector<Token> tokens(text.size() + 4);
  int n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                         static_cast<int32_t>(tokens.size()), /*add_special=*/false, parse_special);
  if (n < 0) {
    tokens.resize(static_cast<std::size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                       static_cast<int32_t>(tokens.size()), false, parse_special);
  }
  tokens.resize(static_cast<std::size_t>(std::max(n, 0)));
  return tokens;
}

std::string LlamaModel::token_bytes(Token token) const {
  if (token < 0 || token >= shape_.n_vocab) {
    throw Error(ErrorCode::kInvalidArgument,
                "token " + std::to_string(token) + " is outside the vocabulary of " + std::to_string(shape_.n_vocab));
  }
  std::string piece(32, '\0');
  int n = llama_token_to_piece(vocab_, token, piece.data(), static_cast<int32_t>(piece.size()), 0, /*special=*/true);
  if (n < 0) {
    piece.resize(static_cast<std::size_t>(-n));
    n = llama_token_to_piece(vocab_, token, piece.data(), static_cast<int32_t>(piece.size()), 0, true);
  }
  piece.resize(static_cast<std::size_t>(std::max(n, 0)));
  return piece;
}

std::vector<Token> LlamaModel::find_tokens(std::string_view text) const {
  std::vector<Token> ids;
  const auto [begin, end] = ids_by_bytes_.equal_range(std::string(text));
  for (auto it = begin; it != end; ++it) ids.push_back(it->second);
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool LlamaModel::is_end_of_generation(Token token) const { return llama_vocab_is_eog(vocab_, token); }

std::unique_ptr<LlmSession> LlamaModel::open_session(const SessionOptions& options) const {
  return std::make_unique<LlamaSession>(shared_from_this(), options);
}

LlamaSession::LlamaSession(std::shared_ptr<const LlamaModel> model, const SessionOptions& options)
    : model_(std::move(model)), capture_(std::make_unique<AttentionCapture>(model_->options().attention_route)) {
  if (options.context_tokens <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "an LLM session needs a positive context, got " + std::to_string(options.context_tokens) + " tokens");
  }
  const LlamaModelOptions& mo = model_->options();
  const int threads = options.threads > 0 ? options.threads : default_threads(mo);
  context_tokens_ = options.context_tokens;
  // Prompts go in whole (split into ubatches by libllama); longer decodes are
  // split here, so n_batch only bounds one llama_decode call.
  batch_tokens_ = std::min(context_tokens_, 2048);
  llama_context_params p = llama_context_default_params();
  p.n_ctx = static_cast<uint32_t>(context_tokens_);
  p.n_batch = static_cast<uint32_t>(batch_tokens_);
  p.n_ubatch = static_cast<uint32_t>(std::min(batch_tokens_, 512));
  p.n_seq_max = 1;
  p.n_threads = threads;
  p.n_threads_batch = threads;
  const bool flash = mo.flash_attention || mo.attention_route == AttentionRoute::kQk;
  p.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  p.type_k = mo.cache_type;
  p.type_v = mo.cache_type;
  p.cb_eval = &AttentionCapture::eval_callback;
  p.cb_eval_user_data = capture_.get();
  p.no_perf = true;
  ctx_ = llama_init_from_model(model_->raw(), p);
  if (ctx_ == nullptr) {
    const std::string why = take_last_llama_error();
    throw Error(ErrorCode::kInvalidArgument, "libllama could not create a context of " +
                                                 std::to_string(context_tokens_) + " tokens for " + model_->id() +
                                                 (why.empty() ? std::string() : ": " + why));
  }
}

LlamaSession::~LlamaSession() {
  if (ctx_ != nullptr) llama_free(ctx_);
}

void LlamaSession::set_attention_capture(std::vector<AttentionHead> heads, int column_begin, int column_end) {
  detail::check_capture_heads(*model_, heads);
  capture_->set(std::move(heads), column_begin, column_end);
}

AttentionRows LlamaSession::decode(std::span<const Token> tokens) { return decode_tokens(tokens, 0, nullptr); }

AttentionRows LlamaSession::decode_each(std::span<const Token> tokens, int first, std::vector<Token>& greedy_after) {
  greedy_after.clear();
  return decode_tokens(tokens, std::max(first, 0), &greedy_after);
}

AttentionRows LlamaSession::decode_tokens(std::span<const Token> tokens, int first, std::vector<Token>* greedy_after) {
  if (tokens.empty()) return {};
  const int n = static_cast<int>(tokens.size());
  if (position_ + n > context_tokens_) {
    throw Error(ErrorCode::kInvalidArgument, "LLM context full: " + std::to_string(position_) + " + " +
                                                 std::to_string(n) + " tokens exceed the session's " +
                                                 std::to_string(context_tokens_));
  }
  const int n_vocab = model_->shape().n_vocab;
  for (Token t : tokens) {
    if (t < 0 || t >= n_vocab) {
      throw Error(ErrorCode::kInvalidArgument,
                  "token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(n_vocab));
    }
  }
  has_logits_ = false;
  capture_->begin_decode(position_, n);
  llama_batch batch = llama_batch_init(batch_tokens_, 0, 1);
  int done = 0;
  int status = 0;
  while (done < n && status == 0) {
    const int count = std::min(batch_tokens_, n - done);
    batch.n_tokens = count;
    for (int i = 0; i < count; ++i) {
      batch.token[i] = tokens[static_cast<std::size_t>(done + i)];
      batch.pos[i] = position_ + done + i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = (greedy_after != nullptr && done + i >= first) || done + i == n - 1;
    }
    status = llama_decode(ctx_, batch);
    if (status == 0 && greedy_after != nullptr) {
      for (int i = std::max(0, first - done); i < count; ++i) {
        const float* logits = llama_get_logits_ith(ctx_, i);
        if (logits == nullptr) {
          status = -100;  // reported below as a failed decode
          break;
        }
        greedy_after->push_back(static_cast<Token>(std::max_element(logits, logits + n_vocab) - logits));
      }
    }
    if (status == 0) done += count;
  }
  llama_batch_free(batch);
  if (status != 0) {
    // A failed decode may have stored part of the batch: drop it, so the
    // session stays at its last consistent position.
    llama_memory_seq_rm(llama_get_memory(ctx_), 0, position_, -1);
    const std::string why = take_last_llama_error();
    throw Error(ErrorCode::kInternal, "llama_decode failed (" + std::to_string(status) + ") at position " +
                                          std::to_string(position_ + done) +
                                          (why.empty() ? std::string() : ": " + why));
  }
  position_ += n;
  has_logits_ = true;
  return capture_->finish();
}

std::span<const float> LlamaSession::last_logits() const {
  if (!has_logits_) {
    throw Error(ErrorCode::kInvalidArgument, "no logits: decode tokens first (remove_suffix drops them)");
  }
  const float* logits = llama_get_logits_ith(ctx_, -1);
  if (logits == nullptr) throw Error(ErrorCode::kInternal, "libllama returned no logits for the last token");
  return {logits, static_cast<std::size_t>(model_->shape().n_vocab)};
}

Token argmax_token(std::span<const float> logits) {
  return static_cast<Token>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<float> log_probabilities(std::span<const float> logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
  const double log_sum = max + std::log(sum);
  std::vector<float> out(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(logits[i] - log_sum);
  return out;
}

Token LlamaSession::greedy() const { return argmax_token(last_logits()); }

std::vector<float> LlamaSession::last_log_probs() const { return log_probabilities(last_logits()); }

void LlamaSession::remove_suffix(int from) {
  if (from < 0 || from > position_) {
    throw Error(ErrorCode::kInvalidArgument, "remove_suffix(" + std::to_string(from) +
                                                 ") outside the session's positions [0, " + std::to_string(position_) +
                                                 "]");
  }
  if (from == position_) return;
  if (!llama_memory_seq_rm(llama_get_memory(ctx_), 0, from, -1)) {
    throw Error(ErrorCode::kInternal, "libllama could not remove KV positions from " + std::to_string(from));
  }
  position_ = from;
  has_logits_ = false;
}

}  // namespace earshot::llm
