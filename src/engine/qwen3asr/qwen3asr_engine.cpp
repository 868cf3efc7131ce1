#include "engine/qwen3asr/qwen3asr_engine.h"

#include <algorithm>

#include "common/error.h"
#include "model/qwen3asr/model_writer.h"
#include "model/qwen3asr/prompted_decoder.h"
#include "model/timed_prompted_decoder.h"

namespace earshot::engine {
namespace {

constexpr const char* kCodes[] = {"zh", "en", "yue", "ar", "de", "fr", "es", "pt", "id", "it",
                                  "ko", "ru", "th",  "vi", "ja", "tr", "hi", "ms", "nl", "sv",
                                  "da", "fi", "pl",  "cs", "fa", "el", "hu", "mk", "ro"};

}  // namespace

Qwen3AsrEngine::Qwen3AsrEngine(std::shared_ptr<const qwen3asr::Model> model, const ModelSpec& spec)
    : model_(std::move(model)), options_(spec.options<Qwen3AsrOptions>()), policies_(spec.policies) {
  policy::validate_policies<PromptedAsrDecoder>(policies_);
  heads_ = options_.alignment_heads.empty() ? qwen3asr::default_alignment_heads(model_->n_layer(), model_->n_head(), 20)
                                            : qwen3asr::load_alignment_heads(options_.alignment_heads, 20);
  qwen3asr::Session check(model_, heads_, 16);  // heads outside the model fail at load, not at the first stream
  if (const int batch = spec.runtime.batch_streams; batch > 0) {
    shared_ = std::make_shared<qwen3asr::SharedContext>(model_, batch, options_.n_ctx);
    capabilities_.batch_streams = batch;
  }
  capabilities_.family = "qwen3asr";
  capabilities_.model_name = "qwen3-asr-" + spec.path.stem().string();
  capabilities_.multilingual = true;
  capabilities_.languages.assign(std::begin(kCodes), std::end(kCodes));
  capabilities_.frames_per_second = 12.5;
  capabilities_.serial_passes = true;  // one libmtmd context encodes every stream's audio, one at a time
  capabilities_.policies = policy::policy_names<PromptedAsrDecoder>();
}

std::unique_ptr<OnlineProcessor> Qwen3AsrEngine::open_stream(const StreamRequest& request) const {
  const std::string policy = resolve_policy(request.policy);
  if (const std::string problem = language_problem(request.language); !problem.empty()) {
    throw Error(ErrorCode::kInvalidArgument, problem);
  }
  std::unique_ptr<PromptedAsrDecoder> decoder =
      std::make_unique<qwen3asr::PromptedDecoder>(model_, heads_, options_.n_ctx, shared_);
  if (request.on_pass) decoder = std::make_unique<TimedPromptedDecoder>(std::move(decoder), request.on_pass);
  if (request.wrap_prompted_decoder) decoder = request.wrap_prompted_decoder(std::move(decoder));
  // The stream's keyterms are the system context Qwen3-ASR is prompted with (policy/registry.cpp).
  return policy::open_policy(policy, std::move(decoder), policies_, policy_context(request));
}

std::filesystem::path find_mmproj(const std::filesystem::path& model, const std::filesystem::path& given) {
  if (!given.empty()) return given;
  const std::filesystem::path dir = model.parent_path();
  for (const std::filesystem::path& candidate :
       {dir / (model.stem().string() + "-mmproj.gguf"), dir / ("mmproj-" + model.filename().string())}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  }
  return {};
}

std::shared_ptr<const Engine> load_qwen3asr_engine(const ModelSpec& spec) {
  const Qwen3AsrOptions own = spec.options<Qwen3AsrOptions>();
  qwen3asr::ModelOptions options;
  options.n_threads = spec.runtime.threads;
  options.mel_frames = own.hf_mel_frames ? qwen3asr::MelFrames::kHf : qwen3asr::MelFrames::kMtmd;
  options.cpu_kernels = spec.runtime.cpu_kernels;
  options.reuse_encoder_windows = options.reuse_prompt_kv = own.reuse;
  options.quantized_products = own.quantized_products;
  // Several workers run the streams' passes (the serve plan's N): one computation at a time.
  options.exclusive_compute =
      check_batch_streams(spec.runtime, kMaxQwen3BatchStreams, "Qwen3-ASR streams per llama context") > 0;
  // A bad heads file fails before the pair is read (seconds for the real models).
  if (!own.alignment_heads.empty()) {
    qwen3asr::check_alignment_heads(qwen3asr::load_alignment_heads(own.alignment_heads, 20), spec.path);
  }
  return std::make_shared<Qwen3AsrEngine>(qwen3asr::Model::load(spec.path, find_mmproj(spec.path, own.mmproj), options),
                                          spec);
}

}  // namespace earshot::engine
