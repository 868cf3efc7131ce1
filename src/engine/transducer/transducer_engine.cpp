#include "engine/transducer/transducer_engine.h"

#include "common/error.h"
#include "model/fastconformer/transducer_streams.h"
#include "model/runtime/device.h"
#include "policy/transducer/phrase_boost.h"

namespace earshot::engine {

namespace {

// The request's decoding on a stream: the family's beam, and the request's
// keyterms as boosted phrases over the stream's pieces (none: the model's own
// choices). A phrase no pieces spell is named in a warning.
template <class Stream>
std::unique_ptr<Stream> with_decoding(std::unique_ptr<Stream> stream, const TransducerOptions& own, float bonus,
                                      const StreamRequest& request) {
  TransducerDecoding decoding;
  decoding.beam = own.beams;
  decoding.boost = policy::PhraseBoost::for_keyterms(request.keyterms, stream->pieces(), bonus, request.on_warning);
  if (decoding.beam > 1 || decoding.boost) stream->set_decoding(std::move(decoding));
  return stream;
}

}  // namespace

TransducerEngine::TransducerEngine(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec)
    : model_(std::move(model)), spec_(spec) {
  const TransducerOptions own = spec.options<TransducerOptions>();
  const int lookahead_ms = own.lookahead_ms;
  if (!(own.window_seconds >= 1 && own.window_seconds <= 120))
    throw Error(ErrorCode::kInvalidArgument, "the transducer window must be 1 to 120 s");
  const fastconformer::Hparams& hp = model_->hparams();
  const int frame_ms = 1000 * hp.hop_length * hp.subsampling_factor / hp.sample_rate;
  if (hp.streaming()) {
    right_context_ = hp.att_right;
    if (lookahead_ms != 0) {
      if (lookahead_ms % frame_ms != 0)
        throw Error(ErrorCode::kInvalidArgument, "--lookahead-ms " + std::to_string(lookahead_ms) +
                                                     " is not a whole number of " + std::to_string(frame_ms) +
                                                     " ms encoder frames");
      right_context_ = lookahead_ms / frame_ms - 1;
    }
    fastconformer::check_streaming(hp, right_context_, "--lookahead-ms " + std::to_string(lookahead_ms));
    if (const int batch = check_batch_streams(spec.runtime, kMaxBatchStreams, "streams per graph"); batch > 0) {
      batcher_ = std::make_shared<fastconformer::StreamingBatcher>(model_, batch, spec.runtime.threads,
                                                                   spec.runtime.cpu_kernels);
      capabilities_.batch_streams = batch;
    }
  } else if (lookahead_ms != 0) {
    throw Error(ErrorCode::kInvalidArgument, "--lookahead-ms applies to cache-aware streaming transducers; " +
                                                 spec.path.filename().string() + " is an offline model");
  }
  capabilities_.family = "transducer";
  capabilities_.model_name = spec.path.stem().string();
  if (capabilities_.model_name.starts_with("ggml-")) capabilities_.model_name.erase(0, 5);
  // Parakeet-TDT v3 transcribes 25 European languages without being told which:
  // a code only labels the words.
  capabilities_.multilingual = true;
  capabilities_.languages = {"bg", "hr", "cs", "da", "nl", "en", "et", "fi", "fr", "de", "el", "hu", "it",
                             "lv", "lt", "mt", "pl", "pt", "ro", "sk", "sl", "es", "sv", "ru", "uk"};
  if (hp.n_prompts > 0) {
    // Nemotron 3.5: the languages of its prompt dictionary, each locale and its bare code.
    capabilities_.multilingual = true;
    capabilities_.languages = fastconformer::prompt_languages(hp);
  } else if (right_context_ >= 0) {
    // nemotron-speech-streaming-en: English only.
    capabilities_.multilingual = false;
    capabilities_.languages = {"en"};
  }
  capabilities_.frames_per_second = static_cast<double>(hp.sample_rate) / (hp.hop_length * hp.subsampling_factor);
  if (right_context_ >= 0) {
    capabilities_.policies = policy::policy_names<StreamingTransducer>();
    policy::validate_policies<StreamingTransducer>(spec_.policies);
  } else {
    capabilities_.policies = policy::policy_names<OfflineTransducer>();
    policy::validate_policies<OfflineTransducer>(spec_.policies);
  }
}

std::unique_ptr<OnlineProcessor> TransducerEngine::open_stream(const StreamRequest& request) const {
  const std::string policy = resolve_policy(request.policy);
  const int threads = spec_.runtime.threads;
  const TransducerOptions own = spec_.options<TransducerOptions>();
  const float bonus = static_cast<float>(spec_.policies.keyterm_bonus);
  policy::StreamContext context = policy_context(request);
  if (right_context_ >= 0) {
    return policy::open_policy<StreamingTransducer>(
        policy,
        with_decoding(fastconformer::open_streaming_stream(model_, threads, spec_.runtime.cpu_kernels, right_context_,
                                                           batcher_, request.language, own.mel_frames, request.on_pass,
                                                           request.steer_transducer),
                      own, bonus, request),
        spec_.policies, context);
  }
  context.window_seconds = own.window_seconds;
  return policy::open_policy<OfflineTransducer>(
      policy,
      with_decoding(fastconformer::open_offline_stream(model_, threads, spec_.runtime.cpu_kernels, request.language,
                                                       own.mel_frames, request.on_pass),
                    own, bonus, request),
      spec_.policies, context);
}

std::optional<BatchCounts> TransducerEngine::batch_counts() const {
  if (!batcher_) return std::nullopt;
  const fastconformer::StreamingBatcher::Counts c = batcher_->counts();
  return BatchCounts{c.steps, c.graphs, c.max_batch};
}

std::shared_ptr<const Engine> load_transducer_engine(const ModelSpec& spec) {
  ggml_backend_dev_t device = runtime::resolve_device(spec.runtime.device);
  return std::make_shared<TransducerEngine>(
      fastconformer::Model::load(spec.path, device, runtime::amx_wanted(spec.runtime.cpu_kernels, device)), spec);
}

}  // namespace earshot::engine
