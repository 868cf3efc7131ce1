// One stream's simultaneous translation over an LlmModel (WhisperLiveKit #426): the
// segment's committed source and the ASR's unstable tail go into one prompt
// (tail = inaccessible source), the model drafts greedily with the calibrated
// heads' attention captured over the source span, and target tokens commit
// while they depend only on committed source (commit_policy.h). When the ASR
// commits more of a source the cached draft already covers, held tokens are
// released from the cached attention without a new model call. Pure logic over
// the LlmModel / LlmSession interface; one engine per stream, the model shared.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/llm/llm_backend.h"
#include "stages/translation/commit_policy.h"

namespace earshot::stages::translation {

struct EngineOptions {
  std::string source_language;  // a code ("zh"); "" or "auto": the prompt names none
  std::string target_language;  // a code ("en")
  // Calibrated heads; empty = no drafts (cascaded: whole segments only).
  std::vector<llm::AttentionHead> heads;
  CommitOptions commit;
  // A new draft while the cached one still holds the committed source waits for
  // this many new source tokens (MT-call hysteresis, in the model's own tokens).
  int redraft_source_tokens = 2;
  int max_new_tokens = 256;  // per call, also bounded by the context
  // A draft's token budget fitted to the source still untranslated: at most
  // draft_tokens_per_source x (source tokens) + draft_token_slack target tokens
  // in all (committed target included), within max_new_tokens. A translation
  // rarely runs longer than its source by that much; random weights (and a
  // model that loops) never stop, and every token beyond it is wasted work.
  // 0 turns the fitting off (max_new_tokens only). Finals keep max_new_tokens.
  double draft_tokens_per_source = 2.0;
  int draft_token_slack = 6;
  // Re-drafts (and the final of a segment with a draft) verify the cached
  // draft's tokens in one batch and step only from the first token the model
  // no longer predicts (speculative verification; same greedy output).
  bool verify_drafts = true;
  int context_tokens = 4096;
  int threads = 0;
};

// What one update produced.
struct EngineUpdate {
  std::string committed;       // target text newly committed (whole UTF-8 characters)
  std::string draft;           // the uncommitted rest of the draft now
  bool draft_changed = false;  // draft differs from the last update's (identical drafts are not re-sent)
  bool called_model = false;   // a new draft was generated (else released from the cached one)
};

struct EngineStats {
  int model_calls = 0;  // drafts and full translations
  int drafts = 0;
  int releases = 0;  // updates that committed from the cached draft without a call
  // Tokens by how the calls evaluated them (all calls together): prompt tokens
  // decoded and those whose KV cells were reused from the previous call;
  // proposed (the cached draft fed as one verification batch) and of those
  // accepted (still the model's greedy choice); target tokens generated in all
  // and stepped (decoded one per model evaluation).
  long prompt_decoded = 0;
  long prompt_reused = 0;
  long proposed = 0;
  long accepted = 0;
  long generated = 0;
  long stepped = 0;
};

// The prompt around the source, by architecture: Hunyuan-dense's and ChatML
// (qwen2/qwen3) chat turns as llama.cpp's templates write them, else plain text.
struct PromptTemplate {
  std::string before_source;  // control tokens written as text (parsed as special)
  std::string after_source;
};
PromptTemplate prompt_template(const std::string& architecture, const std::string& source_language,
                               const std::string& target_language);
// "en" -> "English"; an unknown code is returned as it is.
std::string language_name(const std::string& code);

// Bytes of `bytes` up to the end of its last complete UTF-8 character.
size_t complete_utf8_prefix(const std::string& bytes);

class TranslationEngine {
 public:
  TranslationEngine(const llm::LlmModel& model, EngineOptions options);
  ~TranslationEngine();

  bool simultaneous() const { return !options_.heads.empty(); }
  const EngineOptions& options() const { return options_; }

  // The open segment's committed source and the ASR tail now. Without heads
  // nothing is drafted (the final comes from translate()).
  // With `early`, an update that re-drafts first commits what the cached
  // draft already allows for `committed_source` and hands that to `early`
  // before the model call: the draft's tokens that attend only to source it
  // shares with `committed_source` (their common prefix, so a committed source
  // that went past the drafted one still releases what the draft covered).
  // Target the old draft covered (its tail, now committed) then goes out at
  // once; the new draft continues from it (committed target is forced).
  // Without `early`, commits come from the new draft only (WhisperLiveKit #426's order).
  EngineUpdate update(const std::string& committed_source, const std::string& tail,
                      const std::function<void(const EngineUpdate&)>& early = {});
  // A full-quality translation of a whole source (a closed segment's final):
  // its own greedy pass over the complete source, no capture.
  std::string translate(const std::string& source);
  // Closes the segment: the draft cache and the committed target are forgotten.
  void reset();

  // Everything committed in the open segment (text).
  std::string committed_text() const;
  EngineStats stats() const { return stats_; }

  // Number of accessible source tokens of the cached draft for `committed`
  // (exposed for tests): tokens wholly inside it, rounding down at a token that
  // straddles its end (byte-split characters included). -1 without a draft or
  // when `committed` is not a prefix of the drafted source.
  int frontier_for(const std::string& committed) const;

 private:
  struct Draft;
  // Accessible source tokens of the cached draft for `committed` when it need
  // not be a prefix: tokens wholly inside the common prefix. -1 without a draft.
  int frontier_within(const std::string& committed) const;
  // The cached draft's source tokens wholly inside its first `bytes` bytes (the
  // tokenizer's prefix space aside): both frontiers' count.
  int source_tokens_within(size_t bytes) const;
  struct Generation {
    std::vector<llm::Token> tokens;
    std::vector<TokenAttention> rows;
  };
  // Decodes `prompt` (reusing the session's KV prefix) and generates greedily
  // until a stop token, a placeholder, `limit` tokens or the context's end.
  // `proposal` (a guess of the output, e.g. the cached draft) is verified in the
  // prompt's batch: the result is the same greedy output, with fewer steps.
  Generation generate(const std::vector<llm::Token>& prompt, bool capture, int source_begin, int source_end, int limit,
                      std::span<const llm::Token> proposal);
  // The target tokens of the open segment's draft beyond the committed ones.
  std::span<const llm::Token> draft_rest() const;
  void make_draft(const std::string& source);
  // Commits the cached draft's tokens the policy accepts with `frontier`
  // accessible source tokens; the update to send.
  EngineUpdate commit_from_draft(int frontier, bool called_model);
  bool is_stop(llm::Token token) const;
  // Truncates tokens at a placeholder sequence or (fallback) placeholder text.
  void cut_placeholders(Generation& g) const;
  std::string bytes_of(const std::vector<llm::Token>& tokens, size_t from = 0) const;

  const llm::LlmModel& model_;
  EngineOptions options_;
  PromptTemplate template_;
  std::unique_ptr<llm::LlmSession> session_;
  std::vector<llm::Token> kv_tokens_;  // what the session holds, position by position
  std::vector<llm::Token> prompt_before_, prompt_after_;
  std::vector<llm::Token> stop_ids_;                     // single-id placeholders
  std::vector<std::vector<llm::Token>> stop_sequences_;  // fragmented placeholders (rolling window)
  std::unique_ptr<Draft> draft_;
  std::vector<llm::Token> committed_tokens_;  // target tokens committed in the open segment
  size_t committed_bytes_sent_ = 0;
  std::string last_draft_;
  EngineStats stats_;
};

}  // namespace earshot::stages::translation
