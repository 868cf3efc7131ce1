#include "bench/translation_reference.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "stages/translation/engine.h"

namespace earshot::bench {

namespace {

// Where the prompt's parts lie in a session's tokens.
struct Layout {
  std::size_t source_begin = 0, source_end = 0, target_begin = 0;
};

// The first `after` behind `before` at the start; false when the tokens hold
// no whole prompt.
bool find_layout(const std::vector<llm::Token>& tokens, const TranslationReferenceOptions& o, Layout& out) {
  const std::size_t nb = o.prompt_before.size(), na = o.prompt_after.size();
  if (tokens.size() < nb + na || !std::equal(o.prompt_before.begin(), o.prompt_before.end(), tokens.begin()))
    return false;
  const auto it =
      std::search(tokens.begin() + static_cast<long>(nb), tokens.end(), o.prompt_after.begin(), o.prompt_after.end());
  if (it == tokens.end()) return false;
  out.source_begin = nb;
  out.source_end = static_cast<std::size_t>(it - tokens.begin());
  out.target_begin = out.source_end + na;
  return true;
}

class ReferenceSession final : public llm::LlmSession {
 public:
  ReferenceSession(std::unique_ptr<llm::LlmSession> inner, const TranslationReferenceOptions& options, llm::Token end)
      : inner_(std::move(inner)), options_(options), end_(end) {}

  void set_attention_capture(std::vector<llm::AttentionHead> heads, int column_begin, int column_end) override {
    inner_->set_attention_capture(std::move(heads), column_begin, column_end);
  }

  llm::AttentionRows decode(std::span<const llm::Token> tokens) override {
    const std::size_t first = tokens_.size();
    llm::AttentionRows rows = inner_->decode(tokens);
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    align(rows, first);
    return rows;
  }

  llm::AttentionRows decode_each(std::span<const llm::Token> tokens, int first,
                                 std::vector<llm::Token>& greedy_after) override {
    const std::size_t at = tokens_.size();
    llm::AttentionRows rows = inner_->decode_each(tokens, first, greedy_after);  // the real batch, logits and all
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    align(rows, at);
    const std::size_t from = at + static_cast<std::size_t>(std::max(first, 0));
    for (std::size_t i = 0; i < greedy_after.size(); ++i) greedy_after[i] = choice_after(from + i + 1);
    return rows;
  }

  llm::Token greedy() const override { return choice_after(tokens_.size()); }
  std::vector<float> last_log_probs() const override { return inner_->last_log_probs(); }
  void set_stepping(bool on) override { inner_->set_stepping(on); }
  int position() const override { return inner_->position(); }
  void remove_suffix(int from) override {
    inner_->remove_suffix(from);
    tokens_.resize(std::min(tokens_.size(), static_cast<std::size_t>(std::max(from, 0))));
  }

 private:
  // The choice after the first `n` tokens.
  llm::Token choice_after(std::size_t n) const {
    const std::vector<llm::Token> head(tokens_.begin(), tokens_.begin() + static_cast<long>(n));
    const llm::Token t = reference_next(head, options_, end_);
    return t < 0 ? end_ : t;
  }

  // Rows of tokens decoded at positions first.. that predict a target token:
  // the row at position p predicts target j = p + 1 - target_begin and peaks
  // at source token j (the last source token for the end of generation).
  void align(llm::AttentionRows& rows, std::size_t first) const {
    Layout l;
    if (rows.n_tokens == 0 || rows.n_heads == 0 || rows.n_columns() <= 0 || !find_layout(tokens_, options_, l)) return;
    const int n_source = static_cast<int>(l.source_end - l.source_begin);
    if (n_source == 0) return;
    std::vector<double> bump(static_cast<std::size_t>(rows.n_columns()));
    for (int r = 0; r < rows.n_tokens; ++r) {
      const long j = static_cast<long>(first) + r + 1 - static_cast<long>(l.target_begin);
      if (j < 0) continue;  // a prompt row: no target token follows it
      const double centre = static_cast<double>(l.source_begin) + static_cast<double>(std::min<long>(j, n_source - 1));
      double total = 0;
      for (int c = 0; c < rows.n_columns(); ++c) {
        const double d = (rows.column_begin + c - centre) / options_.spread;
        bump[static_cast<std::size_t>(c)] = std::exp(-0.5 * d * d);
        total += bump[static_cast<std::size_t>(c)];
      }
      for (int h = 0; h < rows.n_heads; ++h)
        for (int c = 0; c < rows.n_columns(); ++c)
          rows.values[(static_cast<std::size_t>(r) * rows.n_heads + h) * rows.n_columns() + c] =
              total > 0 ? static_cast<float>(bump[static_cast<std::size_t>(c)] / total) : 0.0f;
    }
  }

  std::unique_ptr<llm::LlmSession> inner_;
  const TranslationReferenceOptions& options_;
  llm::Token end_;
  std::vector<llm::Token> tokens_;  // what the session holds, position by position
};

class ReferenceModel final : public llm::LlmModel {
 public:
  ReferenceModel(std::shared_ptr<const llm::LlmModel> inner, TranslationReferenceOptions options)
      : inner_(std::move(inner)), options_(std::move(options)) {
    if (options_.prompt_after.empty())
      throw Error(ErrorCode::kInvalidArgument, "reference translation: the prompt has no part after the source");
    if (!(options_.spread > 0))
      throw Error(ErrorCode::kInvalidArgument, "reference translation: the attention spread must be > 0");
    const int n_vocab = inner_->shape().n_vocab;
    for (llm::Token t = 0; t < n_vocab; ++t)
      if (inner_->is_end_of_generation(t)) {
        end_ = t;
        break;
      }
    if (end_ < 0)
      throw Error(ErrorCode::kInvalidArgument,
                  "reference translation: " + inner_->id() + "'s vocabulary marks no end-of-generation token");
  }

  std::string id() const override { return inner_->id(); }
  std::string architecture() const override { return inner_->architecture(); }
  llm::ModelShape shape() const override { return inner_->shape(); }
  std::vector<llm::Token> tokenize(std::string_view text, bool parse_special) const override {
    return inner_->tokenize(text, parse_special);
  }
  std::string token_bytes(llm::Token token) const override { return inner_->token_bytes(token); }
  std::vector<llm::Token> find_tokens(std::string_view text) const override { return inner_->find_tokens(text); }
  bool is_end_of_generation(llm::Token token) const override { return inner_->is_end_of_generation(token); }
  std::unique_ptr<llm::LlmSession> open_session(const llm::SessionOptions& options) const override {
    return std::make_unique<ReferenceSession>(inner_->open_session(options), options_, end_);
  }

 private:
  std::shared_ptr<const llm::LlmModel> inner_;
  TranslationReferenceOptions options_;
  llm::Token end_ = -1;
};

}  // namespace

TranslationReferenceOptions translation_reference_prompt(const llm::LlmModel& model, const std::string& source_language,
                                                         const std::string& target_language) {
  const stages::translation::PromptTemplate t =
      stages::translation::prompt_template(model.architecture(), source_language, target_language);
  TranslationReferenceOptions o;
  o.prompt_before = model.tokenize(t.before_source, true);
  o.prompt_after = model.tokenize(t.after_source, true);
  return o;
}

llm::Token reference_next(const std::vector<llm::Token>& tokens, const TranslationReferenceOptions& options,
                          llm::Token end) {
  Layout l;
  if (!find_layout(tokens, options, l)) return -1;
  const std::size_t n_source = l.source_end - l.source_begin, n_target = tokens.size() - l.target_begin;
  if (n_target >= n_source) return end;
  const auto source = tokens.begin() + static_cast<long>(l.source_begin);
  if (!std::equal(tokens.begin() + static_cast<long>(l.target_begin), tokens.end(), source)) return end;
  return source[static_cast<long>(n_target)];
}

std::shared_ptr<const llm::LlmModel> reference_translation_model(std::shared_ptr<const llm::LlmModel> model,
                                                                 TranslationReferenceOptions options) {
  return std::make_shared<ReferenceModel>(std::move(model), std::move(options));
}

}  // namespace earshot::bench
