#include "model/whisper/session.h"

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/error.h"
#include "common/pass_threads.h"
#include "features/mel.h"
#include "model/runtime/device.h"
#include "model/runtime/graph_runner.h"
#include "model/runtime/kv_cache.h"
#include "model/whisper/batch_decoder.h"
#include "model/whisper/graph.h"

namespace earshot::whisper {
namespace {

// A beam search never needs more; the bound keeps a client from asking for absurd caches.
constexpr int kMaxSequences = 64;
constexpr int kEncoderPlan = 0, kDecoderPlan = 1;  // the runner's plans

}  // namespace

struct Session::Impl {
  ggml_backend_t backend = nullptr;
  // Cross K/V: fixed size (the full audio context); self KV: grows with the sequence count.
  ggml_context* cross_ctx = nullptr;
  ggml_backend_buffer_t cross_buf = nullptr;
  std::unique_ptr<runtime::KvCache> kv;  // made by cache() on first use
  runtime::KvCacheShape kv_shape;
  detail::StateTensors state;
  // The encoder's and the decoder's graphs, each family with its plan.
  std::unique_ptr<runtime::GraphRunner> runner;
  // Every sequence holds the same cache (true after reset, after a shared prompt and
  // after a reorder from one source): a reorder is then a no-op, and tokens appended
  // alike to all may be computed once (SessionOptions::share_prompt).
  bool identical = true;
  features::Mel mel;
  std::vector<float> mel_input;
  bool encoded = false;
  int reserved_sequences = 0;
  int reserved_audio_ctx = 0;
  int checked_encoder_ctx = 0;   // encoder graph shape already checked by check_supported
  bool fused_attention = false;  // options.flash_attention, where the backend has the fused op
  bool openblas = false;         // options.cpu_kernels resolved
  bool int8 = false;             // and Q8_0 weights' encoder products on the int8 op

  ~Impl() {
    runner.reset();  // before the backend
    kv.reset();      // before the backend it borrows
    if (cross_buf) ggml_backend_buffer_free(cross_buf);
    if (cross_ctx) ggml_free(cross_ctx);
    if (backend) ggml_backend_free(backend);
  }

  // Whether the backend runs the encoder's fused attention (a CUDA build without its
  // FlashAttention kernels does not): asked with the encoder's own shapes and types.
  bool supports_fused_attention(const Hparams& hp) {
    const runtime::GraphRunner::Graph g = runner->begin(8);
    ggml_context* ctx = g.ctx();
    const int head_dim = hp.n_audio_state / hp.n_audio_head;
    ggml_tensor* q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, head_dim, hp.n_audio_ctx, hp.n_audio_head);
    ggml_tensor* k = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, head_dim, hp.n_audio_ctx, hp.n_audio_head);
    ggml_tensor* v = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, head_dim, hp.n_audio_ctx, hp.n_audio_head);
    return ggml_backend_supports_op(backend, ggml_flash_attn_ext(ctx, q, k, v, nullptr, 1.0f, 0.0f, 0.0f));
  }

  // The self-attention cache, allocated on first use (the first encode, reset or
  // language detection) rather than with the session: a stream nobody speaks into never
  // makes a model pass, and the cache, cleared when allocated, is most of an idle
  // session's memory (base: 448 positions x 512 x 6 layers x K and V in f16, 5.5 MB).
  runtime::KvCache& cache() {
    if (!kv) {
      kv = std::make_unique<runtime::KvCache>(backend, kv_shape, 1);
      state.self_kv = kv.get();
    }
    return *kv;
  }

  DecodeResult step(const Model& model, const detail::DecoderGraphSpec& spec, runtime::CpuKernels kernels);
};

Session::Session(std::shared_ptr<const Model> model, SessionOptions options)
    : model_(std::move(model)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  if (!model_) throw Error(ErrorCode::kInvalidArgument, "whisper::Session needs a loaded model, got null");
  if (options_.n_threads < 1) {
    throw Error(ErrorCode::kInvalidArgument, "threads must be >= 1, got " + std::to_string(options_.n_threads));
  }
  if (options_.audio_bucket_frames < 2 || options_.audio_bucket_frames % 2 != 0) {
    throw Error(ErrorCode::kInvalidArgument, "audio bucket must be a positive even number of mel frames, got " +
                                                 std::to_string(options_.audio_bucket_frames));
  }
  if (options_.audio_pad_frames < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "audio padding must be >= 0 mel frames, got " + std::to_string(options_.audio_pad_frames));
  }
  text_ = options_.text ? options_.text : WhisperText::for_model(*model_);
  const Hparams& hp = model_->hparams();

  // The session computes where the model's weights are (CPU, or a GPU in a CUDA build).
  impl_->backend = runtime::create_backend(model_->device(), options_.n_threads).release();
  impl_->runner =
      std::make_unique<runtime::GraphRunner>(impl_->backend, std::vector<std::string>{"encoder", "decoder"});
  impl_->fused_attention = options_.flash_attention && impl_->supports_fused_attention(hp);
  const runtime::MatMul products = runtime::encoder_products(options_.cpu_kernels, runtime::is_cpu(model_->device()));
  impl_->openblas = products.openblas;
  impl_->int8 = products.int8;

  ggml_init_params params{2 * ggml_tensor_overhead(), nullptr, true};
  impl_->cross_ctx = ggml_init(params);
  const int64_t n_cross = static_cast<int64_t>(hp.n_text_layer) * hp.n_audio_ctx * hp.n_text_state;
  impl_->state.cross_k = ggml_new_tensor_1d(impl_->cross_ctx, GGML_TYPE_F16, n_cross);
  impl_->state.cross_v = ggml_new_tensor_1d(impl_->cross_ctx, GGML_TYPE_F16, n_cross);
  impl_->cross_buf = ggml_backend_alloc_ctx_tensors(impl_->cross_ctx, impl_->backend);
  if (!impl_->cross_buf) throw Error(ErrorCode::kInternal, "cannot allocate the cross-attention K/V");
  runtime::KvCacheShape& kv_shape = impl_->kv_shape;
  kv_shape.n_layer = hp.n_text_layer;
  kv_shape.n_embd = hp.n_text_state;
  kv_shape.n_ctx = hp.n_text_ctx;
  kv_shape.type = GGML_TYPE_F16;
  kv_shape.n_scratch = 1;  // language detection's one position
}

Session::~Session() = default;

int Session::n_text_ctx() const { return model_->hparams().n_text_ctx; }
int Session::n_alignment_heads() const { return static_cast<int>(model_->alignment_heads().size()); }
int Session::max_samples() const { return model_->hparams().n_audio_ctx * 2 * features::kHopLength; }

bool Session::fused_attention() const { return impl_->fused_attention; }
bool Session::openblas_encoder() const { return impl_->openblas; }

void Session::set_n_threads(int n_threads) {
  if (n_threads < 1) throw Error(ErrorCode::kInvalidArgument, "threads must be >= 1, got " + std::to_string(n_threads));
  options_.n_threads = n_threads;
  runtime::set_threads(impl_->backend, n_threads);
}

const features::Mel& Session::last_mel() const { return impl_->mel; }

int Session::encode(std::span<const float> pcm) {
  if (static_cast<int64_t>(pcm.size()) > max_samples()) {
    throw Error(ErrorCode::kInvalidArgument, "encode() got " + std::to_string(pcm.size()) +
                                                 " samples; one encoder pass takes at most " +
                                                 std::to_string(max_samples()) + " (30 s at 16 kHz)");
  }
  const Hparams& hp = model_->hparams();
  const MelFilters& filters = model_->mel_filters();
  std::vector<float> computed;
  std::span<const float> filter_data = filters.data;
  if (filters.n_mel != hp.n_mels || filters.data.empty()) {
    computed = features::mel_filter_bank(hp.n_mels);
    filter_data = computed;
  }
  // The pass's threads when a scheduler decides them per pass (common/pass_threads.h).
  const int threads = pass_threads() > 0 ? pass_threads() : options_.n_threads;
  impl_->mel = features::log_mel_spectrogram(pcm, filter_data, hp.n_mels,
                                             features::kChunkSeconds * features::kSampleRate, threads);
  const int content_frames = static_cast<int>(pcm.size() / features::kHopLength);
  return encode_mel(impl_->mel, content_frames);
}

int Session::encode_mel(const features::Mel& mel, int content_frames) {
  const Hparams& hp = model_->hparams();
  if (mel.n_mel != hp.n_mels || mel.data.size() != static_cast<size_t>(mel.n_mel) * mel.n_frames) {
    throw Error(ErrorCode::kInvalidArgument, "mel spectrogram has " + std::to_string(mel.n_mel) +
                                                 " bins; the model expects " + std::to_string(hp.n_mels));
  }
  const int max_mel_frames = 2 * hp.n_audio_ctx;
  content_frames = std::clamp(content_frames, 0, max_mel_frames);
  int mel_frames = max_mel_frames;
  if (options_.encoder_input == EncoderInput::kAudioOnly) {
    const int bucket = options_.audio_bucket_frames;
    const int wanted = content_frames + options_.audio_pad_frames;
    mel_frames = std::clamp((wanted + bucket - 1) / bucket * bucket, bucket, max_mel_frames);
    mel_frames -= mel_frames % 2;
  }
  const int n_ctx = mel_frames / 2;

  // Input [n_mels][mel_frames]: the spectrogram's first frames, zeros where it ends early.
  impl_->mel_input.assign(static_cast<size_t>(hp.n_mels) * mel_frames, 0.0f);
  const int copy = std::min(mel_frames, mel.n_frames);
  for (int m = 0; m < hp.n_mels; ++m) {
    std::copy_n(mel.data.data() + static_cast<size_t>(m) * mel.n_frames, copy,
                impl_->mel_input.data() + static_cast<size_t>(m) * mel_frames);
  }

  runtime::GraphRunner& runner = *impl_->runner;
  const runtime::GraphRunner::Graph graph = runner.begin(detail::kMaxGraphNodes, kEncoderPlan);
  detail::EncoderGraph g = detail::build_encoder(graph.ctx(), graph.graph(), *model_, impl_->state, n_ctx,
                                                 impl_->openblas          ? detail::EncoderKernels::kOpenBlas
                                                 : impl_->fused_attention ? detail::EncoderKernels::kGgmlFlash
                                                                          : detail::EncoderKernels::kGgml,
                                                 impl_->int8);
  if (impl_->checked_encoder_ctx != n_ctx) {  // once per graph shape
    runner.check_supported(graph);
    impl_->checked_encoder_ctx = n_ctx;
  }
  runner.allocate(graph, std::to_string(n_ctx) + " frames");
  runtime::set_input(g.mel, impl_->mel_input);
  impl_->encoded = false;  // until the pass completes: it may be stopped (common/pass_stop.h)
  runner.compute(graph);

  n_audio_ctx_ = n_ctx;
  impl_->encoded = true;
  n_past_ = 0;
  impl_->cache().clear();
  impl_->identical = true;
  if (impl_->reserved_audio_ctx != n_ctx || impl_->reserved_sequences != n_sequences_) reset(n_sequences_);
  return std::min(n_ctx, (content_frames + 1) / 2);
}

void Session::reset(int n_sequences) {
  if (n_sequences < 1 || n_sequences > kMaxSequences) {
    throw Error(ErrorCode::kInvalidArgument, "number of sequences must be in 1.." + std::to_string(kMaxSequences) +
                                                 ", got " + std::to_string(n_sequences));
  }
  const Hparams& hp = model_->hparams();
  impl_->cache().reserve(n_sequences);  // grows (and checks the device's copies) once per size
  impl_->cache().clear();
  impl_->identical = true;
  n_sequences_ = n_sequences;
  n_past_ = 0;
  if (!impl_->encoded) return;
  if (impl_->reserved_sequences == n_sequences && impl_->reserved_audio_ctx == n_audio_ctx_) return;
  // Reserve the decoder buffer for the largest single-token step once, so that
  // growing KV lengths never reallocate it.
  runtime::GraphRunner& runner = *impl_->runner;
  const runtime::GraphRunner::Graph graph = runner.begin(detail::kMaxGraphNodes, kDecoderPlan);
  detail::DecoderGraphSpec spec;
  spec.n_sequences = n_sequences;
  spec.n_tokens = 1;
  spec.n_past = hp.n_text_ctx - 1;
  spec.n_audio_ctx = n_audio_ctx_;
  spec.logits_positions = {0};
  spec.want_attention = true;
  detail::build_batched_decoder(graph.ctx(), graph.graph(), *model_, {{&impl_->state, &spec}}, options_.cpu_kernels);
  runner.check_supported(graph);
  runner.reserve(graph);
  impl_->reserved_sequences = n_sequences;
  impl_->reserved_audio_ctx = n_audio_ctx_;
}

void Session::rollback(int n_past) {
  if (n_past < 0 || n_past > n_past_) {
    throw Error(ErrorCode::kInvalidArgument,
                "rollback to " + std::to_string(n_past) + " tokens, but the cache holds " + std::to_string(n_past_));
  }
  for (int s = 0; s < n_sequences_; ++s) impl_->cache().remove_suffix(s, n_past);
  n_past_ = n_past;
}

void Session::reorder(std::span<const int> source) {
  if (static_cast<int>(source.size()) != n_sequences_) {
    throw Error(ErrorCode::kInvalidArgument, "reorder() got " + std::to_string(source.size()) + " sources for " +
                                                 std::to_string(n_sequences_) + " sequences");
  }
  bool identity = true;
  for (int i = 0; i < n_sequences_; ++i) {
    if (source[i] < 0 || source[i] >= n_sequences_) {
      throw Error(ErrorCode::kInvalidArgument, "reorder() source " + std::to_string(source[i]) +
                                                   " is not a sequence (0.." + std::to_string(n_sequences_ - 1) + ")");
    }
    identity = identity && source[i] == i;
  }
  // Identical sequences (a shared prompt, before the beams diverge) need no copies.
  if (identity || n_past_ == 0 || impl_->identical) return;
  impl_->cache().reorder(source);
  impl_->identical = std::all_of(source.begin(), source.end(), [&](int s) { return s == source[0]; });
}

detail::PreparedStep Session::prepare_decode(const DecodeRequest& request) {
  const Hparams& hp = model_->hparams();
  if (!impl_->encoded) throw Error(ErrorCode::kInvalidArgument, "decode() called before encode()");
  if (static_cast<int>(request.tokens.size()) != n_sequences_) {
    throw Error(ErrorCode::kInvalidArgument, "decode() got tokens for " + std::to_string(request.tokens.size()) +
                                                 " sequences; the session has " + std::to_string(n_sequences_) +
                                                 " (see reset())");
  }
  const int n_tokens = static_cast<int>(request.tokens[0].size());
  if (n_tokens == 0) throw Error(ErrorCode::kInvalidArgument, "decode() got no tokens");
  for (const auto& seq : request.tokens) {
    if (static_cast<int>(seq.size()) != n_tokens) {
      throw Error(ErrorCode::kInvalidArgument, "decode() needs the same number of tokens for every sequence");
    }
    for (int32_t t : seq) {
      if (t < 0 || t >= hp.n_vocab) {
        throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(t) + " outside the vocabulary (0.." +
                                                     std::to_string(hp.n_vocab - 1) + ")");
      }
    }
  }
  if (n_past_ + n_tokens > hp.n_text_ctx) {
    throw Error(ErrorCode::kInvalidArgument, "decoding " + std::to_string(n_tokens) + " tokens after " +
                                                 std::to_string(n_past_) + " exceeds the text context of " +
                                                 std::to_string(hp.n_text_ctx) + " tokens");
  }
  detail::PreparedStep step;
  detail::DecoderGraphSpec& spec = step.spec;
  spec.n_sequences = n_sequences_;
  spec.n_tokens = n_tokens;
  spec.n_past = n_past_;
  spec.n_audio_ctx = n_audio_ctx_;
  spec.want_attention = request.want_attention && !model_->alignment_heads().empty();
  spec.logits_positions = request.logits_positions;
  if (spec.logits_positions.empty()) spec.logits_positions = {n_tokens - 1};
  if (request.vocabulary_limit < 0 || request.vocabulary_limit > hp.n_vocab) {
    throw Error(ErrorCode::kInvalidArgument, "vocabulary limit " + std::to_string(request.vocabulary_limit) +
                                                 " outside 0.." + std::to_string(hp.n_vocab));
  }
  spec.n_vocab_logits = request.vocabulary_limit > 0 ? request.vocabulary_limit : hp.n_vocab;
  for (int p : spec.logits_positions) {
    if (p < 0 || p >= n_tokens) {
      throw Error(ErrorCode::kInvalidArgument, "logits position " + std::to_string(p) + " outside the " +
                                                   std::to_string(n_tokens) + " appended tokens");
    }
  }

  // The same tokens appended to identical sequences (AlignAtt's prompt with beams):
  // computed once for sequence 0, whose cache and outputs are then copied to the others.
  step.share = options_.share_prompt && n_sequences_ > 1 && impl_->identical &&
               std::all_of(request.tokens.begin(), request.tokens.end(),
                           [&](const std::vector<int32_t>& seq) { return seq == request.tokens[0]; });
  if (step.share) {
    spec.n_sequences = 1;
    spec.tokens = request.tokens[0];
  } else {
    spec.tokens.reserve(static_cast<size_t>(n_sequences_) * n_tokens);
    for (const auto& seq : request.tokens) spec.tokens.insert(spec.tokens.end(), seq.begin(), seq.end());
  }
  return step;
}

DecodeResult Session::decode(const DecodeRequest& request) {
  if (options_.batcher) return options_.batcher->decode(*this, request);
  const detail::PreparedStep step = prepare_decode(request);
  return finish_decode(step, run_step(step));
}

DecodeResult Session::run_step(const detail::PreparedStep& step) {
  return impl_->step(*model_, step.spec, options_.cpu_kernels);
}

const detail::StateTensors& Session::state() const { return impl_->state; }

DecodeResult Session::finish_decode(const detail::PreparedStep& step, DecodeResult result) {
  n_past_ += step.spec.n_tokens;
  for (int s = 0; s < step.spec.n_sequences; ++s) impl_->cache().set_length(s, n_past_);
  if (!step.share) {
    impl_->identical = n_sequences_ == 1;
    return result;
  }
  impl_->cache().reorder(std::vector<int>(n_sequences_, 0));
  // Outputs are sequence-major: sequence 0's block, repeated.
  auto repeat = [n = n_sequences_](std::vector<float>& v) {
    const size_t block = v.size();
    v.resize(block * n);
    for (int s = 1; s < n; ++s) std::copy_n(v.begin(), block, v.begin() + static_cast<std::ptrdiff_t>(s * block));
  };
  repeat(result.logits);
  repeat(result.attention);
  result.n_sequences = n_sequences_;
  return result;
}

DecodeResult Session::Impl::step(const Model& model, const detail::DecoderGraphSpec& spec,
                                 runtime::CpuKernels kernels) {
  // The batched decoder's graph with this session as its one part.
  const runtime::GraphRunner::Graph graph = runner->begin(detail::kMaxGraphNodes, kDecoderPlan);
  const detail::BatchedDecoderGraph g =
      detail::build_batched_decoder(graph.ctx(), graph.graph(), model, {{&state, &spec}}, kernels);
  runner->allocate(graph);
  runtime::set_input(g.indices, g.index_values);
  if (g.masks) runtime::set_input(g.masks, g.mask_values);
  runner->compute(graph);
  const detail::BatchedDecoderGraph::Part& part = g.parts[0];
  return detail::read_step_outputs(backend, model, spec, part.logits, part.logits_offset, part.cross_attention);
}

std::vector<float> Session::detect_language() {
  if (!tokenizer().is_multilingual()) {
    throw Error(ErrorCode::kUnsupported, "language detection needs a multilingual model; this one is English-only");
  }
  if (!impl_->encoded) throw Error(ErrorCode::kInvalidArgument, "detect_language() called before encode()");
  const Hparams& hp = model_->hparams();
  detail::DecoderGraphSpec spec;
  spec.n_sequences = 1;
  spec.n_tokens = 1;
  spec.n_past = 0;
  spec.n_audio_ctx = n_audio_ctx_;
  spec.logits_positions = {0};
  spec.n_vocab_logits = hp.n_vocab;
  spec.tokens = {tokenizer().special().sot};
  // The step writes position 0 of sequence 0: saved to the scratch sequence and put
  // back (copies on the backend), so the caller's cache is left as it was.
  runtime::KvCache& kv = impl_->cache();
  const bool save = kv.length(0) > 0;
  if (save) kv.save_to_scratch(0, 0, 1);
  DecodeResult result;
  try {
    result = impl_->step(*model_, spec, options_.cpu_kernels);
  } catch (...) {
    if (save) kv.restore_from_scratch(0, 0, 1);
    throw;
  }
  if (save) kv.restore_from_scratch(0, 0, 1);
  return language_probabilities(std::span<const float>(result.logits.data(), hp.n_vocab), tokenizer());
}

float no_speech_probability(std::span<const float> logits, const Tokenizer& tokenizer) {
  const int32_t no_speech = tokenizer.special().no_speech;
  if (no_speech < 0 || no_speech >= static_cast<int32_t>(logits.size())) {
    throw Error(ErrorCode::kInvalidArgument, "logits do not cover the <|nospeech|> token");
  }
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  return static_cast<float>(std::exp(static_cast<double>(logits[no_speech]) - max) / sum);
}

std::vector<float> language_probabilities(std::span<const float> logits, const Tokenizer& tokenizer) {
  const SpecialTokens& sp = tokenizer.special();
  if (sp.n_languages <= 0 || sp.first_language + sp.n_languages > static_cast<int32_t>(logits.size())) {
    throw Error(ErrorCode::kInvalidArgument, "logits do not cover the language tokens");
  }
  std::span<const float> lang = logits.subspan(sp.first_language, sp.n_languages);
  const float max = *std::max_element(lang.begin(), lang.end());
  std::vector<float> probs(lang.size());
  double sum = 0.0;
  for (size_t i = 0; i < lang.size(); ++i) {
    probs[i] = std::exp(lang[i] - max);
    sum += probs[i];
  }
  for (float& p : probs) p = static_cast<float>(p / sum);
  return probs;
}

}  // namespace earshot::whisper
