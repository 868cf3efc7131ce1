// The Whisper family behind the engine boundary: whisper.cpp's ggml .bin files,
// earshot's own encoder/decoder graphs (model/whisper); each stream's Session is
// an attention decoder (AsrDecoder) under the policies registered for one
// (policy/registry.h: AlignAtt, the default, and LocalAgreement-2).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_spec.h"
#include "model/whisper/asr_text.h"
#include "model/whisper/model.h"
#include "model/whisper/session.h"

namespace earshot::engine {

// The largest --batch-decode: beyond it a graph's per-stream attention nodes outweigh
// the shared weight reads saved.
inline constexpr int kMaxBatchDecode = 64;

class WhisperEngine : public Engine {
 public:
  WhisperEngine(std::shared_ptr<const whisper::Model> model, const ModelSpec& spec);

  const Capabilities& capabilities() const override { return capabilities_; }
  std::optional<BatchCounts> batch_counts() const override;
  std::unique_ptr<OnlineProcessor> open_stream(const StreamRequest& request) const override;

  const whisper::Model& model() const { return *model_; }

 private:
  std::shared_ptr<const whisper::Model> model_;
  std::shared_ptr<const whisper::WhisperText> text_;  // one vocabulary for every stream
  whisper::SessionOptions session_options_;
  policy::Settings policies_;
  Capabilities capabilities_;
};

// Loads spec.path as a Whisper model (engine/whisper/registration.cpp registers this).
std::shared_ptr<const Engine> load_whisper_engine(const ModelSpec& spec);

}  // namespace earshot::engine
