// Translation on the stage registry (stages/registry.cpp): its options on serve
// (--target-language), transcribe and bench (--translate-to), and the stage each
// stream gets.
#pragma once

#include "stages/registry.h"
#include "stages/translation/options.h"

namespace earshot::stages::translation {

// The registry entry.
StageDefinition stage_definition();

// The loaded translation (the model, its workers), shared by every stream. A live
// stream is translated when its protocol sends target_language (an empty value
// means the command's --target-language); a stream whose protocol has no such
// parameter is not. A file (transcribe, bench) is translated into
// target_language or else the command's target, synchronously.
class LoadedTranslation : public LoadedStage {
 public:
  explicit LoadedTranslation(TranslationSetup setup) : setup_(std::move(setup)) {}
  std::unique_ptr<Stage> open(const StreamRequest& request) const override;
  // For bench's translation figures (its counts, its options).
  const TranslationSetup& setup() const { return setup_; }

 private:
  TranslationSetup setup_;
};

}  // namespace earshot::stages::translation
