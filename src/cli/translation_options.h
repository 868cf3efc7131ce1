// The translation options of serve and transcribe, declared and read in one
// place: --target-language / --translate-to, --translation-model,
// --translation-soft-max, --translation-hard-max, --commit-mode,
// --translation-calibration, --translation-workers, --translation-batch,
// --translation-attention, --translation-record.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/command_line.h"
#include "model/llm/attention_capture.h"
#include "model/llm/llm_backend.h"
#include "stages/translation/record.h"
#include "stages/translation/translation_stage.h"

namespace earshot::cli {

// `target_flag` is "target-language" (serve) or "translate-to" (transcribe).
void declare_translation_options(Args& args, const std::string& target_flag);

struct TranslationSetup {
  std::shared_ptr<stages::translation::TranslationService> service;
  std::string default_target;  // "" = only where a client asks (serve's ?target_language=)
  std::shared_ptr<stages::translation::InputRecorder> recorder;
};

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

}  // namespace earshot::cli
