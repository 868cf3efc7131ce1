// Translation on the stage registry (stages/registry.cpp): its options on serve
// (--target-language), transcribe and bench (--translate-to), and the stage each
// stream gets.
#pragma once

#include "stages/registry.h"
#include "stages/translation/options.h"

namespace earshot::stages::translation {

// The registry entry.
StageDefinition stage_definition();

// The loaded translation (the model, its workers), shared by every stream. On
// serve a stream is translated when its protocol sends target_language (an empty
// value means --target-language); a stream whose protocol has no such parameter
// (Deepgram's, the file routes') is not. transcribe and bench translate every
// file into their target, synchronously (in order, every draft).
class LoadedTranslation : public LoadedStage {
 public:
  explicit LoadedTranslation(TranslationSetup setup, Command command = Command::kServe)
      : setup_(std::move(setup)), command_(command) {}
  std::unique_ptr<Stage> open(const StreamRequest& request) const override;
  // For bench's translation figures (its counts, its options).
  const TranslationSetup& setup() const { return setup_; }

 private:
  TranslationSetup setup_;
  Command command_;
};

}  // namespace earshot::stages::translation
