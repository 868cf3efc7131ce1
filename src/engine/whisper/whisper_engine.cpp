#include "engine/whisper/whisper_engine.h"

#include "common/error.h"
#include "engine/whisper/options.h"
#include "model/runtime/device.h"
#include "model/timed_decoder.h"
#include "model/whisper/batch_decoder.h"
#include "model/whisper/session.h"

namespace earshot::engine {

WhisperEngine::WhisperEngine(std::shared_ptr<const whisper::Model> model, const ModelSpec& spec)
    : model_(std::move(model)), text_(whisper::WhisperText::for_model(*model_)), policies_(spec.policies) {
  session_options_.n_threads = spec.runtime.threads;
  session_options_.flash_attention = spec.runtime.flash_attention;
  session_options_.cpu_kernels = spec.runtime.cpu_kernels;
  session_options_.encoder_input = spec.options<WhisperOptions>().encoder_input;
  session_options_.text = text_;
  if (const int batch = check_batch_streams(spec.runtime, kMaxBatchDecode, "streams per decoder graph"); batch > 0) {
    session_options_.batcher = std::make_shared<whisper::DecodeBatcher>(model_, batch, session_options_.n_threads,
                                                                        session_options_.cpu_kernels);
    capabilities_.batch_streams = batch;
  }
  policy::validate_policies<AsrDecoder>(policies_);  // settings errors surface at load, not at the first stream

  const whisper::Hparams& hp = model_->hparams();
  capabilities_.family = "whisper";
  capabilities_.model_name =
      "whisper-" + (model_->size_name().empty() ? model_->path().stem().string() : model_->size_name());
  capabilities_.multilingual = hp.is_multilingual();
  if (capabilities_.multilingual) {
    for (int i = 0; i < text_->n_languages(); ++i) capabilities_.languages.push_back(text_->language_code(i));
  } else {
    capabilities_.languages = {"en"};
  }
  capabilities_.frames_per_second = 50;
  capabilities_.policies = policy::policy_names<AsrDecoder>();
}

std::unique_ptr<OnlineProcessor> WhisperEngine::open_stream(const StreamRequest& request) const {
  const std::string policy = resolve_policy(request.policy);
  std::unique_ptr<AsrDecoder> decoder = std::make_unique<whisper::Session>(model_, session_options_);
  if (request.on_pass) decoder = std::make_unique<TimedDecoder>(std::move(decoder), request.on_pass);
  if (request.wrap_decoder) decoder = request.wrap_decoder(std::move(decoder));
  return policy::open_policy(policy, std::move(decoder), policies_, policy_context(request));
}

std::optional<BatchCounts> WhisperEngine::batch_counts() const {
  if (!session_options_.batcher) return std::nullopt;
  const whisper::DecodeBatcher::Counts c = session_options_.batcher->counts();
  return BatchCounts{c.requests, c.graphs, 0};
}

std::shared_ptr<const Engine> load_whisper_engine(const ModelSpec& spec) {
  whisper::LoadOptions load;
  load.alignment_heads = spec.options<WhisperOptions>().alignment_heads;
  load.backend = spec.runtime.device;
  load.amx = runtime::amx_wanted(spec.runtime.cpu_kernels, runtime::resolve_device(spec.runtime.device));
  return std::make_shared<WhisperEngine>(whisper::Model::load(spec.path, load), spec);
}

}  // namespace earshot::engine
