#include "stages/turns/llm_scorer.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace earshot::stages::turns {

ScorerPrompt parse_scorer_prompt(const std::string& text_template, const std::string& end_token) {
  const size_t at = text_template.find("{text}");
  if (at == std::string::npos || text_template.find("{text}", at + 1) != std::string::npos)
    throw Error(ErrorCode::kInvalidArgument, "--turn-model-prompt must hold {text} exactly once");
  if (end_token.empty()) throw Error(ErrorCode::kInvalidArgument, "--turn-model-end-token must not be empty");
  ScorerPrompt p;
  p.before = text_template.substr(0, at);
  p.after = text_template.substr(at + 6);
  p.end_token = end_token;
  return p;
}

class LlmTurnScorer : public TurnScorer {
 public:
  explicit LlmTurnScorer(std::shared_ptr<const SemanticTurnModel> model)
      : owner_(std::move(model)),
        shared_(*owner_),
        session_(shared_.model_->open_session({.context_tokens = 512, .threads = shared_.threads_})) {}

  double end_of_turn_probability(const std::string& text) override {
    std::string trimmed = text;
    while (!trimmed.empty() && trimmed.front() == ' ') trimmed.erase(trimmed.begin());
    std::vector<llm::Token> body = shared_.model_->tokenize(trimmed, /*parse_special=*/false);
    const size_t keep = static_cast<size_t>(std::max(1, shared_.prompt_.max_text_tokens));
    if (body.size() > keep) body.erase(body.begin(), body.end() - static_cast<std::ptrdiff_t>(keep));
    std::vector<llm::Token> prompt = shared_.before_;
    prompt.insert(prompt.end(), body.begin(), body.end());
    prompt.insert(prompt.end(), shared_.after_.begin(), shared_.after_.end());
    if (prompt.empty()) return -1;
    session_->remove_suffix(0);
    session_->decode(prompt);
    const std::vector<float> log_probs = session_->last_log_probs();
    const auto id = static_cast<size_t>(shared_.end_token_);
    if (id >= log_probs.size()) return -1;
    return std::exp(static_cast<double>(log_probs[id]));
  }

 private:
  std::shared_ptr<const SemanticTurnModel> owner_;
  const SemanticTurnModel& shared_;
  std::unique_ptr<llm::LlmSession> session_;
};

SemanticTurnModel::SemanticTurnModel(std::shared_ptr<const llm::LlmModel> model, ScorerPrompt prompt, int threads)
    : model_(std::move(model)), prompt_(std::move(prompt)), threads_(std::max(1, threads)) {
  std::vector<llm::Token> ids = model_->find_tokens(prompt_.end_token);
  if (ids.empty()) ids = model_->tokenize(prompt_.end_token, /*parse_special=*/true);
  if (ids.size() != 1)
    throw Error(ErrorCode::kInvalidArgument, "--turn-model-end-token '" + prompt_.end_token + "': the model " +
                                                 model_->id() + " has no single token for it (" +
                                                 std::to_string(ids.size()) + " tokens)");
  end_token_ = ids.front();
  before_ = model_->tokenize(prompt_.before, /*parse_special=*/true);
  after_ = model_->tokenize(prompt_.after, /*parse_special=*/true);
}

std::unique_ptr<TurnScorer> open_scorer(std::shared_ptr<const SemanticTurnModel> model) {
  return std::make_unique<LlmTurnScorer>(std::move(model));
}

}  // namespace earshot::stages::turns
