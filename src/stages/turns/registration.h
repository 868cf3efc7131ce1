// Turn detection on the stage registry. Options, on serve and bench:
//   --turn-detection on|off       every stream's turn events (default on; a stream's
//                                 protocol may turn them off: turn_stage.h's `turns`)
//   --eot-threshold X             0.5..1.0: the confidence that ends a turn (default 0.7)
//   --eager-eot-threshold X       0.3..0.9: TurnEndLikely for every stream (default: off)
//   --eot-timeout-ms MS           silence that ends a turn whatever the confidence (5000)
//   --turn-model PATH             a semantic end-of-turn model (a small chat GGUF, off by default)
//   --turn-model-prompt T         its prompt, {text} for the turn's text (llm_scorer.h)
//   --turn-model-end-token TOK    the token whose probability is the score (<|im_end|>)
// A stream's own thresholds (Deepgram Flux's query, OpenAI's turn_detection) override
// the server's (turn_stage.h).
#pragma once

#include <memory>

#include "stages/registry.h"
#include "stages/turns/llm_scorer.h"
#include "stages/turns/turn_stage.h"

namespace earshot::stages::turns {

StageDefinition stage_definition();

class LoadedTurns : public LoadedStage {
 public:
  LoadedTurns(TurnSettings defaults, std::shared_ptr<const SemanticTurnModel> semantic);
  // Null when the request turns turns off; throws Error(kInvalidArgument) for a bad parameter.
  std::unique_ptr<Stage> open(const StreamRequest& request) const override;
  std::vector<Metric> metrics() const override;
  const TurnSettings& defaults() const { return defaults_; }

 private:
  TurnSettings defaults_;
  std::shared_ptr<const SemanticTurnModel> semantic_;
};

}  // namespace earshot::stages::turns
