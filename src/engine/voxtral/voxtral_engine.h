// The Voxtral Realtime family behind the engine boundary: Mistral's natively
// streaming audio LLM (model/voxtral), one token per 80 ms slot `delay` slots
// after its audio. Its stream has the streaming transducers' interface
// (StreamingTransducer: tokens with slots and the vocabulary's word structure),
// so the policy is theirs: native, each word committed as the next one starts
// (policy/transducer/), words timed by their slots. With --batch-decode N the
// streams' decoder steps (one per slot) run up to N in one graph
// (model/voxtral/step_batch.h). The engine only wires.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_spec.h"
#include "model/voxtral/model.h"
#include "model/voxtral/step_batch.h"
#include "model/voxtral/stream.h"

namespace earshot::engine {

class VoxtralEngine : public Engine {
 public:
  // Throws Error(kInvalidArgument) for a --delay-ms the model was not trained with.
  VoxtralEngine(std::shared_ptr<const voxtral::Model> model, const ModelSpec& spec);

  const Capabilities& capabilities() const override { return capabilities_; }
  // A request's delay_ms (when not 0) replaces --delay-ms for its stream; the
  // delays taken are the ones the model was trained with (delay_problem).
  std::unique_ptr<OnlineProcessor> open_stream(const StreamRequest& request) const override;
  std::string delay_problem(int delay_ms) const override;
  std::optional<BatchCounts> batch_counts() const override;

  int delay_slots() const { return delay_; }
  // The decoder's products on the few-row op (voxtral::GraphKernels::rows), unless
  // --cpu-kernels ggml keeps them on ggml's kernels for the file's types.
  bool rows_decoder() const { return spec_.runtime.cpu_kernels != runtime::CpuKernels::kGgml; }

 private:
  std::shared_ptr<const voxtral::Model> model_;
  ModelSpec spec_;
  Capabilities capabilities_;
  int slot_ms_;                                    // one slot's audio (80 ms)
  int delay_;                                      // slots: --delay-ms, else the file's default
  std::shared_ptr<voxtral::StepBatcher> batcher_;  // --batch-decode N; null: each step alone
  // Each context start (the silence in front, per delay) computed once for every stream.
  std::shared_ptr<voxtral::ContextStarts> context_starts_ = std::make_shared<voxtral::ContextStarts>();
};

// The most streams one batched decoder step takes (--batch-decode).
inline constexpr int kMaxVoxtralBatchStreams = 64;

// Loads spec.path as a Voxtral Realtime GGUF (engine/voxtral/registration.cpp registers this).
std::shared_ptr<const Engine> load_voxtral_engine(const ModelSpec& spec);

}  // namespace earshot::engine
