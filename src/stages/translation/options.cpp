#include "stages/translation/options.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "common/error.h"
#include "model/llm/batched_llama.h"
#include "model/llm/llama_backend.h"
#include "model/registry.h"

namespace earshot::stages::translation {

namespace tr = stages::translation;

void declare_translation_options(Args& args, const std::string& target_flag) {
  args.option(target_flag, "translate into this language (a code: en, zh, de...); needs --translation-model", "")
      .option("translation-model",
              "translation LLM: a GGUF path or a name `earshot pull` knows (hy-mt2-1.8b-q8_0); its calibration decides "
              "simultaneous mode",
              "")
      .option("translation-soft-max", "seconds after which punctuation closes a translation segment", "4")
      .option("translation-hard-max", "seconds after which a translation segment always closes", "20")
      .option("commit-mode", "when drafted target words commit: paper, argmax or mass", "paper")
      .option("translation-calibration",
              "extra calibration entries (JSON: model, source, target, heads [[layer, head]...], disabled_quants)", "")
      .option("translation-workers", "translation model calls that run at the same time", "1")
      .option("translation-batch",
              "evaluate the model calls of up to N sessions that run at the same time as one batch (weights read "
              "once per step; each session's output as unbatched, to rounding); raises --translation-workers to N. "
              "0 = off",
              "0")
      .option(
          "translation-attention",
          "how attention is read: softmax (flash attention off) or qk (recomputed from Q and K, flash attention on)",
          "softmax")
      .option("translation-record",
              "record the translation stage's input events to this JSONL file (replay-translation)", "");
}

std::shared_ptr<const llm::LlmModel> load_translation_model(const std::string& name_or_path, int threads,
                                                            llm::AttentionRoute route) {
  // A catalogue name (`earshot pull hy-mt2-1.8b-q8_0`) is the cached file.
  std::string path;
  try {
    path = models::resolve_translation_model(name_or_path, translation_catalogue()).string();
  } catch (const Error& e) {
    throw Error(e.code(), std::string("--translation-model: ") + e.what());
  }
  llm::LlamaModelOptions options;
  options.threads = threads;
  options.attention_route = route;
  try {
    return llm::LlamaModel::load(path, options);
  } catch (const Error& e) {
    throw Error(e.code(), "--translation-model " + path + ": " + e.what());
  }
}

std::optional<TranslationSettings> parse_translation_options(const Args& args, const std::string& target_flag,
                                                             double pause_seconds) {
  TranslationSettings s;
  tr::TranslationOptions& o = s.options;
  o.target_language = args.get(target_flag);
  o.soft_max_seconds = args.get_double("translation-soft-max");
  o.hard_max_seconds = args.get_double("translation-hard-max");
  o.commit.mode = tr::parse_commit_mode(args.get("commit-mode"));
  o.pause_seconds = pause_seconds;
  if (!(o.soft_max_seconds > 0) || !(o.hard_max_seconds >= o.soft_max_seconds))
    throw Error(ErrorCode::kInvalidArgument, "--translation-hard-max must be >= --translation-soft-max > 0");
  long workers = args.get_int("translation-workers");
  if (workers < 1) throw Error(ErrorCode::kInvalidArgument, "--translation-workers must be >= 1");
  const long batch = args.get_int("translation-batch");
  if (batch < 0 || batch > 64) throw Error(ErrorCode::kInvalidArgument, "--translation-batch must be 0 (off) or 1..64");
  s.batch = static_cast<int>(batch);
  s.workers = static_cast<int>(std::max(workers, batch));
  try {
    s.route = llm::parse_attention_route(args.get("translation-attention"));
  } catch (const Error& e) {
    throw Error(e.code(), std::string("--translation-attention: ") + e.what());
  }
  s.model = args.get("translation-model");
  if (s.model.empty()) {
    if (!o.target_language.empty())
      throw Error(ErrorCode::kInvalidArgument, "--" + target_flag + " needs --translation-model PATH (a GGUF LLM)");
    return std::nullopt;
  }
  s.calibration_file = args.get("translation-calibration");
  s.record_file = args.get("translation-record");
  return s;
}

int translation_threads(int workers, unsigned cores) {
  const int all = static_cast<int>(std::clamp(cores, 1u, 4u));  // libllama backend's default for one call
  return std::max(1, all / std::max(1, workers));
}

TranslationSetup load_translation(const TranslationSettings& s) {
  tr::CalibrationRegistry registry = tr::CalibrationRegistry::builtin();
  if (!s.calibration_file.empty()) registry.load_file(s.calibration_file);
  TranslationSetup setup;
  if (!s.record_file.empty()) setup.recorder = std::make_shared<tr::InputRecorder>(s.record_file);
  // Unbatched, the pool's workers run their calls at the same time: they share the cores.
  const int threads = s.batch > 0 ? 0 : translation_threads(s.workers, std::thread::hardware_concurrency());
  std::shared_ptr<const llm::LlmModel> model = load_translation_model(s.model, threads, s.route);
  if (s.batch > 0) {
    // Slots of the model's shared batch context; sessions beyond N run on their own.
    auto loaded = std::dynamic_pointer_cast<const llm::LlamaModel>(model);
    if (loaded)
      model = std::make_shared<llm::BatchedLlamaModel>(
          loaded, llm::LlamaBatchOptions{.max_sessions = s.batch, .context_tokens = s.options.context_tokens});
  }
  setup.default_target = s.options.target_language;
  setup.service = std::make_shared<tr::TranslationService>(model, std::move(registry), s.workers, s.options);
  if (setup.recorder) setup.service->set_input_observer([r = setup.recorder](const events::Event& e) { r->record(e); });
  return setup;
}

std::optional<TranslationSetup> read_translation_options(const Args& args, const std::string& target_flag,
                                                         double pause_seconds) {
  std::optional<TranslationSettings> settings = parse_translation_options(args, target_flag, pause_seconds);
  if (!settings) return std::nullopt;
  return load_translation(*settings);
}

}  // namespace earshot::stages::translation
