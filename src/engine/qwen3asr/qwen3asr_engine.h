// The Qwen3-ASR family behind the engine boundary: a text GGUF of arch qwen3vl
// plus its mmproj (audio projector qwen3a), run by libllama + libmtmd
// (model/qwen3asr). With --batch-decode N, N streams decode on the slots of one
// shared llama context (qwen3asr/shared_context.h: their steps and prompts
// evaluated together) and every model computation runs one at a time (the serve
// plan's N workers then never share the cores). Each stream is a prompted
// decoder (PromptedAsrDecoder) under the policies registered for one
// (policy/registry.h): AlignAtt (WhisperLiveKit's
// qwen3_simul, the default) or rolling (the window re-decoded every ~2 s through
// the stable/unstable commit layer).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_spec.h"
#include "engine/qwen3asr/options.h"
#include "model/qwen3asr/model.h"
#include "model/qwen3asr/shared_context.h"

namespace earshot::engine {

// The largest --batch-decode: streams whose decodes share one llama context.
inline constexpr int kMaxQwen3BatchStreams = qwen3asr::kMaxSharedStreams;

class Qwen3AsrEngine : public Engine {
 public:
  Qwen3AsrEngine(std::shared_ptr<const qwen3asr::Model> model, const ModelSpec& spec);

  const Capabilities& capabilities() const override { return capabilities_; }
  std::unique_ptr<OnlineProcessor> open_stream(const StreamRequest& request) const override;

 private:
  std::shared_ptr<const qwen3asr::Model> model_;
  std::vector<qwen3asr::Head> heads_;
  std::shared_ptr<qwen3asr::SharedContext> shared_;  // --batch-decode N: N streams' decodes batched
  Qwen3AsrOptions options_;
  policy::Settings policies_;
  Capabilities capabilities_;
};

// The mmproj for `model`: `given` when set, else PREFIX-mmproj.gguf or mmproj-NAME.gguf beside it; "" when none.
std::filesystem::path find_mmproj(const std::filesystem::path& model, const std::filesystem::path& given);

// Loads spec.path + its mmproj (engine/qwen3asr/registration.cpp registers this).
std::shared_ptr<const Engine> load_qwen3asr_engine(const ModelSpec& spec);

}  // namespace earshot::engine
