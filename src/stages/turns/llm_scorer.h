// A semantic end-of-turn model on any decoder-only LLM (llm::LlmModel; libllama
// loads the GGUF): the turn's text is put in a prompt as an unfinished user
// message, and the score is the probability the model gives the end-of-turn
// token next, as LiveKit's and Pipecat's turn detectors score a small chat model.
// The default prompt is ChatML's (Qwen, SmolLM...):
//   "<|im_start|>user\n{text}"  scored on "<|im_end|>"
// where {text} is the turn's committed text (trimmed, its last max_text_tokens
// tokens). The template's parts around {text} are tokenised with control tokens,
// the text without (a speaker cannot inject one).
#pragma once

#include <memory>
#include <string>

#include "model/llm/llm_backend.h"
#include "stages/turns/turn_detector.h"

namespace earshot::stages::turns {

struct ScorerPrompt {
  std::string before = "<|im_start|>user\n";
  std::string after;
  std::string end_token = "<|im_end|>";
  int max_text_tokens = 128;
};

// A template holding {text} once. Throws Error(kInvalidArgument) naming --turn-model-prompt.
ScorerPrompt parse_scorer_prompt(const std::string& text_template, const std::string& end_token);

// What every stream's scorer shares: the model, the prompt and the end token's id.
class SemanticTurnModel {
 public:
  // Throws Error(kInvalidArgument) naming --turn-model-end-token when the model has
  // no single token for it.
  SemanticTurnModel(std::shared_ptr<const llm::LlmModel> model, ScorerPrompt prompt, int threads);
  const llm::LlmModel& model() const { return *model_; }
  llm::Token end_token() const { return end_token_; }

 private:
  friend class LlmTurnScorer;
  std::shared_ptr<const llm::LlmModel> model_;
  ScorerPrompt prompt_;
  llm::Token end_token_ = 0;
  std::vector<llm::Token> before_, after_;
  int threads_ = 1;
};

// One stream's scorer (its own LLM session) over the shared model.
std::unique_ptr<TurnScorer> open_scorer(std::shared_ptr<const SemanticTurnModel> model);

}  // namespace earshot::stages::turns
