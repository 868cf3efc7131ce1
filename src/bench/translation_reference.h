// The translation benchmarks' `--workload reference`: a real translation LLM
// whose every graph runs (prompts, verification batches, greedy steps, KV
// cache, attention capture), but whose choices follow a reference translation,
// as bench/reference_workload.h does for the ASR decoder.
//
// Why: random weights never stop generating and never repeat themselves, so a
// re-draft's verification of the previous draft accepts nothing and every call
// steps to its token budget. A real translator's new draft mostly repeats the
// last one and ends near its source's length; the engine's verification, its
// budget and its commit rule were built for that, and only a model that
// behaves so shows what they cost.
//
// The reference: the translation of a source is the source itself, token for
// token, then the end of generation (a monotone "translation" as long as its
// source: en->zh with Qwen2's vocabulary is close to one target token per
// source token). The decorator reads the source from the session's own tokens:
// the prompt is [before][source][after][target so far], the engine's template
// (prompt_template(), tokenized as the engine does). The greedy choice after a
// target that is a prefix of the source is the next source token (the end of
// generation after the whole source); after anything else (a prompt that is not
// the engine's, a target off the reference) the end of generation.
//
// Attention: every captured row that predicts target token j peaks at source
// token j (a bump of `spread` tokens, the same on every head), so the commit
// policy's own rule (paper, argmax, mass) commits target j once source j is
// accessible, as with a real model's monotone alignment.
//
// What it models: how many tokens each call decodes, verifies, accepts and
// steps, and when target tokens commit. What it does not: reordering between
// languages (target j reads source j), a real model's changes of mind between
// drafts beyond what a changed source implies, its errors, or lengths that
// differ from the source's.
#pragma once

#include <memory>
#include <vector>

#include "model/llm/llm_backend.h"

namespace earshot::bench {

struct TranslationReferenceOptions {
  std::vector<llm::Token> prompt_before;  // the engine's prompt before the source (tokenized as it does)
  std::vector<llm::Token> prompt_after;   // between the source and the target
  double spread = 1.5;                    // the attention bump's standard deviation, in source tokens
};

// The prompt around the source as the translation engine builds it for `model`.
TranslationReferenceOptions translation_reference_prompt(const llm::LlmModel& model, const std::string& source_language,
                                                         const std::string& target_language);

// Wraps `model`: sessions run the real ones and overwrite their choices and
// captured rows as above. Throws Error(kInvalidArgument) when the model's
// vocabulary has no end-of-generation token or prompt_after is empty.
std::shared_ptr<const llm::LlmModel> reference_translation_model(std::shared_ptr<const llm::LlmModel> model,
                                                                 TranslationReferenceOptions options);

// The reference's choice after `tokens` (a session's KV contents), exposed for
// tests: the next source token while the target is a prefix of the source,
// else `end`. -1 when `tokens` holds no whole prompt yet.
llm::Token reference_next(const std::vector<llm::Token>& tokens, const TranslationReferenceOptions& options,
                          llm::Token end);

}  // namespace earshot::bench
