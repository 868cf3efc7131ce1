#include "engine/voxtral/voxtral_engine.h"

#include "common/error.h"
#include "engine/voxtral/options.h"
#include "model/runtime/device.h"
#include "model/voxtral/stream.h"
#include "policy/transducer/phrase_boost.h"

namespace earshot::engine {

VoxtralEngine::VoxtralEngine(std::shared_ptr<const voxtral::Model> model, const ModelSpec& spec)
    : model_(std::move(model)), spec_(spec) {
  const voxtral::Hparams& hp = model_->hparams();
  slot_ms_ = static_cast<int>(hp.slot_seconds() * 1000 + 0.5);
  const int delay_ms = spec.options<VoxtralOptions>().delay_ms;
  delay_ = hp.default_delay;
  if (delay_ms != 0) {
    if (const std::string problem = delay_problem(delay_ms); !problem.empty())
      throw Error(ErrorCode::kInvalidArgument, "--delay-ms " + problem);
    delay_ = delay_ms / slot_ms_;
  }
  if (const int batch = check_batch_streams(spec.runtime, kMaxVoxtralBatchStreams, "streams per decoder step");
      batch > 0) {
    batcher_ = std::make_shared<voxtral::StepBatcher>(model_, batch, spec.runtime.threads, rows_decoder());
    capabilities_.batch_streams = batch;
  }
  capabilities_.family = "voxtral";
  capabilities_.model_name = model_->name().empty() ? spec.path.stem().string() : model_->name();
  // The model card's languages. The model is told none: it transcribes what it
  // hears, and a code only labels the words.
  capabilities_.multilingual = true;
  capabilities_.languages = {"en", "fr", "es", "de", "ru", "zh", "ja", "it", "pt", "nl", "ar", "hi", "ko"};
  capabilities_.frames_per_second = 1.0 / hp.slot_seconds();
  capabilities_.policies = policy::policy_names<StreamingTransducer>();
  capabilities_.stream_delay = true;
}

std::string VoxtralEngine::delay_problem(int delay_ms) const {
  if (delay_ms == 0) return "";
  if (delay_ms > 0 && delay_ms % slot_ms_ == 0 && voxtral::is_published_delay(delay_ms / slot_ms_)) return "";
  return std::to_string(delay_ms) +
         " is not a delay Voxtral Realtime was trained with: " + voxtral::published_delays_text();
}

std::unique_ptr<OnlineProcessor> VoxtralEngine::open_stream(const StreamRequest& request) const {
  const std::string policy = resolve_policy(request.policy);
  voxtral::StreamOptions options;
  options.threads = spec_.runtime.threads;
  options.delay = delay_;
  if (request.delay_ms != 0) {
    if (const std::string problem = delay_problem(request.delay_ms); !problem.empty())
      throw Error(ErrorCode::kInvalidArgument, "delay_ms " + problem);
    options.delay = request.delay_ms / slot_ms_;
  }
  options.on_pass = request.on_pass;
  options.batcher = batcher_;
  options.context_starts = context_starts_;
  options.rows_decoder = rows_decoder();
  auto stream = std::make_unique<voxtral::Stream>(model_, options);
  // Keyterms as the transducers take them: phrases boosted while each slot's token is chosen.
  if (auto boost = policy::PhraseBoost::for_keyterms(
          request.keyterms, stream->pieces(), static_cast<float>(spec_.policies.keyterm_bonus), request.on_warning))
    stream->set_decoding({1, std::move(boost)});
  return policy::open_policy<StreamingTransducer>(policy, std::move(stream), spec_.policies, policy_context(request));
}

std::optional<BatchCounts> VoxtralEngine::batch_counts() const {
  if (!batcher_) return std::nullopt;
  const voxtral::StepBatcher::Counts c = batcher_->counts();
  return BatchCounts{c.steps, c.graphs, c.max_batch};
}

std::shared_ptr<const Engine> load_voxtral_engine(const ModelSpec& spec) {
  // --cpu-kernels ggml keeps a k-quant file's encoder on ggml's kernels.
  voxtral::LoadOptions options;
  options.int8_encoder = spec.runtime.cpu_kernels == runtime::CpuKernels::kAuto;
  return std::make_shared<VoxtralEngine>(
      voxtral::Model::load(spec.path, runtime::resolve_device(spec.runtime.device), options), spec);
}

}  // namespace earshot::engine
