// The translation options of serve, transcribe and bench, declared and read in
// one place (registration.cpp puts them on the stage registry): --target-language / --translate-to,
// --translation-model,
// --translation-soft-max, --translation-hard-max, --commit-mode,
// --translation-calibration, --translation-workers, --translation-batch,
// --translation-attention, --translation-record.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "model/llm/attention_capture.h"
#include "model/llm/llm_backend.h"
#include "model/registry.h"
#include "stages/translation/record.h"
#include "stages/translation/translation_stage.h"

namespace earshot::stages::translation {

// `target_flag` is "target-language" (serve) or "translate-to" (transcribe).
void declare_translation_options(Args& args, const std::string& target_flag);

struct TranslationSetup {
  std::shared_ptr<TranslationService> service;
  std::string default_target;  // "" = only where a client asks (serve's ?target_language=)
  std::shared_ptr<InputRecorder> recorder;
};

// The options read and validated, nothing loaded.
struct TranslationSettings {
  TranslationOptions options;  // target_language: the command's target flag ("" = none)
  std::string model;           // --translation-model
  std::string calibration_file;
  std::string record_file;
  int workers = 1;
  int batch = 0;
  llm::AttentionRoute route = llm::AttentionRoute::kSoftmax;
};

// Validates every option; nothing when --translation-model is not given (a target
// language without a model is an error).
std::optional<TranslationSettings> parse_translation_options(const Args& args, const std::string& target_flag,
                                                             double pause_seconds);
// Threads of one translation model call: the backend's default for a lone call
// (the cores, at most 4) divided among `workers` calls that run at the same
// time, at least 1 (2 workers on 2 cores: one thread each). With
// --translation-batch the batch context keeps the default.
int translation_threads(int workers, unsigned cores);

// Loads the model and the calibrations of validated settings.
TranslationSetup load_translation(const TranslationSettings& settings);

// Loads the model and the calibrations when --translation-model is given;
// nothing otherwise (a target language without a model is an error).
// Validates every option first, so a bad value fails before any load.
std::optional<TranslationSetup> read_translation_options(const Args& args, const std::string& target_flag,
                                                         double pause_seconds);

// The LLM behind --translation-model: a GGUF path, or a registry name resolved
// to the model cache. Throws Error(kUnsupported) in a build without the libllama
// backend, Error(kIo) naming `earshot pull NAME` for a known name not downloaded.
// `route`: how attention is captured (--translation-attention).
std::shared_ptr<const llm::LlmModel> load_translation_model(const std::string& name_or_path, int threads,
                                                            llm::AttentionRoute route = llm::AttentionRoute::kSoftmax);

// The translation models `earshot pull` fetches by name and --translation-model
// takes (the stage's catalogue; catalogue.cpp).
std::vector<models::ModelInfo> translation_catalogue();

}  // namespace earshot::stages::translation
