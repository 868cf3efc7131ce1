#include "stages/translation/engine.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "common/error.h"

namespace earshot::stages::translation {

namespace {

// Hunyuan's placeholder tokens: no_2 ends an assistant turn in its chat
// template, and the model sometimes emits one mid-output and hallucinates after
// it; any of them ends generation.
constexpr std::string_view kPlaceholderPrefix = "<\xEF\xBD\x9Chy_place\xE2\x96\x81holder\xE2\x96\x81no\xE2\x96\x81";
constexpr std::string_view kPlaceholderSuffix = "\xEF\xBD\x9C>";
constexpr int kPlaceholderCount = 16;
constexpr size_t kRollingWindow = 16;  // longer fragmentations keep only the text fallback

bool ends_with(const std::vector<llm::Token>& v, const std::vector<llm::Token>& tail) {
  return tail.size() <= v.size() && std::equal(tail.begin(), tail.end(), v.end() - static_cast<long>(tail.size()));
}

}  // namespace

size_t complete_utf8_prefix(const std::string& bytes) {
  size_t i = 0, complete = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (i + len > bytes.size()) break;
    i += len;
    complete = i;
  }
  return complete;
}

std::string language_name(const std::string& code) {
  static const std::map<std::string, std::string> names = {
      {"en", "English"}, {"zh", "Chinese"},    {"ja", "Japanese"}, {"ko", "Korean"},     {"de", "German"},
      {"fr", "French"},  {"es", "Spanish"},    {"it", "Italian"},  {"pt", "Portuguese"}, {"ru", "Russian"},
      {"ar", "Arabic"},  {"nl", "Dutch"},      {"pl", "Polish"},   {"tr", "Turkish"},    {"vi", "Vietnamese"},
      {"th", "Thai"},    {"id", "Indonesian"}, {"hi", "Hindi"},    {"uk", "Ukrainian"},  {"cs", "Czech"}};
  auto it = names.find(code);
  return it != names.end() ? it->second : code;
}

PromptTemplate prompt_template(const std::string& architecture, const std::string& source_language,
                               const std::string& target_language) {
  // Hy-MT's published instruction (its Chinese wording for Chinese targets).
  std::string instruction;
  if (target_language == "zh")
    instruction =
        "\xE5\xB0\x86\xE4\xBB\xA5\xE4\xB8\x8B\xE6\x96\x87\xE6\x9C\xAC\xE7\xBF\xBB\xE8\xAF\x91\xE4\xB8\xBA"
        "\xE4\xB8\xAD\xE6\x96\x87\xEF\xBC\x8C\xE6\xB3\xA8\xE6\x84\x8F\xE5\x8F\xAA\xE9\x9C\x80\xE8\xA6\x81"
        "\xE8\xBE\x93\xE5\x87\xBA\xE7\xBF\xBB\xE8\xAF\x91\xE5\x90\x8E\xE7\x9A\x84\xE7\xBB\x93\xE6\x9E\x9C"
        "\xEF\xBC\x8C\xE4\xB8\x8D\xE8\xA6\x81\xE9\xA2\x9D\xE5\xA4\x96\xE8\xA7\xA3\xE9\x87\x8A\xEF\xBC\x9A\n\n";
  else
    instruction = "Translate the following segment into " + language_name(target_language) +
                  ", without additional explanation.\n\n";
  (void)source_language;  // Hy-MT's instruction names the target only
  if (architecture == "hunyuan-dense")
    return {"<\xEF\xBD\x9Chy_User\xEF\xBD\x9C>" + instruction, "<\xEF\xBD\x9Chy_Assistant\xEF\xBD\x9C>"};
  if (architecture.starts_with("qwen"))
    return {"<|im_start|>user\n" + instruction, "<|im_end|>\n<|im_start|>assistant\n"};
  return {instruction, "\n\n"};
}

struct TranslationEngine::Draft {
  std::string source;                // committed + tail when drafted
  std::vector<size_t> source_ends;   // byte end (in `source`) of each source token
  size_t source_offset = 0;          // bytes the tokenizer put before the source (a prefix space)
  std::vector<llm::Token> target;    // generated after the committed target prefix
  std::vector<TokenAttention> rows;  // per generated token
  int accepted = 0;                  // generated tokens committed so far
};

TranslationEngine::TranslationEngine(const llm::LlmModel& model, EngineOptions options)
    : model_(model), options_(std::move(options)) {
  template_ = prompt_template(model_.architecture(), options_.source_language, options_.target_language);
  prompt_before_ = model_.tokenize(template_.before_source, true);
  prompt_after_ = model_.tokenize(template_.after_source, true);
  for (int n = 0; n < kPlaceholderCount; ++n) {
    const std::string text = std::string(kPlaceholderPrefix) + std::to_string(n) + std::string(kPlaceholderSuffix);
    std::vector<llm::Token> single = model_.find_tokens(text);
    if (single.size() == 1) {
      stop_ids_.push_back(single.front());
      continue;
    }
    std::vector<llm::Token> pieces = model_.tokenize(text, true);
    if (pieces.size() == 1)
      stop_ids_.push_back(pieces.front());
    else if (!pieces.empty() && pieces.size() <= kRollingWindow)
      stop_sequences_.push_back(std::move(pieces));
  }
  const llm::ModelShape shape = model_.shape();
  for (const llm::AttentionHead& h : options_.heads)
    if (h.layer < 0 || h.head < 0 || (shape.n_layer > 0 && h.layer >= shape.n_layer) ||
        (shape.n_head > 0 && h.head >= shape.n_head))
      throw Error(ErrorCode::kInvalidArgument, "calibrated head (" + std::to_string(h.layer) + "," +
                                                   std::to_string(h.head) + ") does not exist in " + model_.id());
  llm::SessionOptions so;
  so.context_tokens = options_.context_tokens;
  so.threads = options_.threads;
  session_ = model_.open_session(so);
}

TranslationEngine::~TranslationEngine() = default;

bool TranslationEngine::is_stop(llm::Token token) const {
  return model_.is_end_of_generation(token) || std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end();
}

std::string TranslationEngine::bytes_of(const std::vector<llm::Token>& tokens, size_t from) const {
  std::string out;
  for (size_t i = from; i < tokens.size(); ++i) out += model_.token_bytes(tokens[i]);
  return out;
}

void TranslationEngine::cut_placeholders(Generation& g) const {
  // Fallback for placeholders the vocabulary splits beyond the rolling window:
  // cut at the first token whose text reaches into one.
  std::string text;
  for (size_t i = 0; i < g.tokens.size(); ++i) {
    text += model_.token_bytes(g.tokens[i]);
    const size_t at = text.find("<\xEF\xBD\x9Chy_place");
    if (at != std::string::npos) {
      // Keep the tokens that end before the placeholder starts.
      size_t keep = i + 1, end = text.size();
      while (keep > 0 && end > at) {
        --keep;
        end -= model_.token_bytes(g.tokens[keep]).size();
      }
      g.tokens.resize(keep);
      if (g.rows.size() > keep) g.rows.resize(keep);
      return;
    }
  }
}

TranslationEngine::Generation TranslationEngine::generate(const std::vector<llm::Token>& prompt, bool capture,
                                                          int source_begin, int source_end, int max_tokens,
                                                          std::span<const llm::Token> proposal) {
  ++stats_.model_calls;
  Generation g;
  if (prompt.empty()) return g;
  const int room = options_.context_tokens - static_cast<int>(prompt.size()) - 1;
  if (room <= 0)
    throw Error(ErrorCode::kInvalidArgument, "the translation prompt (" + std::to_string(prompt.size()) +
                                                 " tokens) does not fit the translation context");
  const int limit = std::max(1, std::min(max_tokens, room));
  // A greedy loop follows: a batching backend may wait for its next step
  // (llm_backend.h); cleared on every way out.
  struct Stepping {
    llm::LlmSession& session;
    explicit Stepping(llm::LlmSession& s) : session(s) { session.set_stepping(true); }
    ~Stepping() { session.set_stepping(false); }
    Stepping(const Stepping&) = delete;
    Stepping& operator=(const Stepping&) = delete;
  } stepping(*session_);
  // Reuse the KV prefix the session already holds; the last prompt token is
  // always decoded again, since its attention row is the first token's.
  size_t common = 0;
  while (common < kv_tokens_.size() && common < prompt.size() && kv_tokens_[common] == prompt[common]) ++common;
  common = std::min(common, prompt.size() - 1);
  session_->remove_suffix(static_cast<int>(common));
  kv_tokens_.resize(common);
  if (capture)
    session_->set_attention_capture(options_.heads, source_begin, source_end);
  else
    session_->set_attention_capture({}, 0, 0);
  // The row of token `index` of a decode's tokens: the attention of the step
  // that predicts the next target token.
  auto take_row = [&](const llm::AttentionRows& rows, int index) {
    if (!capture) return;
    if (rows.n_tokens <= index || rows.n_heads != static_cast<int>(options_.heads.size()) ||
        rows.column_begin != source_begin || rows.column_end != source_end)
      throw Error(ErrorCode::kInternal, "the model returned attention rows of the wrong shape");
    TokenAttention a;
    a.n_heads = rows.n_heads;
    a.n_source = rows.n_columns();
    a.values.resize(static_cast<size_t>(a.n_heads) * a.n_source);
    for (int h = 0; h < a.n_heads; ++h)
      for (int c = 0; c < a.n_source; ++c)
        a.values[static_cast<size_t>(h) * a.n_source + c] = rows.at(index, h, source_begin + c);
    g.rows.push_back(std::move(a));
  };
  // Speculative verification: the proposal goes into the prompt's batch, with
  // the greedy choice read after the last prompt token and every proposed one. Generated token k is the choice
  // after the last prompt token and proposal[0..k), exactly what a step would
  // compute, as long as proposal[0..k) are the tokens generated so far; from
  // the first token that differs the proposal's cells are dropped and the rest
  // is stepped. At most limit - 1 proposed tokens: the last generated token is
  // never decoded (so the batch fits the context: limit <= room). The attention
  // rows come from the same batch (one per token).
  // Rounding: libllama evaluates a batch with other kernels than one token
  // (ggml's CPU repacked Q4_0/Q8_0 weights switch from GEMV to GEMM at 4 rows),
  // so batch logits may differ from a step's in the last bits; the prompt's own
  // prefill already does, with any KV reuse. The tests pin identity of the
  // greedy output on random models (F32 and quantised weights).
  const size_t rest_size = prompt.size() - common;
  const size_t n_proposed =
      options_.verify_drafts ? std::min(proposal.size(), static_cast<size_t>(std::max(0, limit - 1))) : 0;
  std::vector<llm::Token> batch(prompt.begin() + static_cast<long>(common), prompt.end());
  batch.insert(batch.end(), proposal.begin(), proposal.begin() + static_cast<long>(n_proposed));
  std::vector<llm::Token> predicted;
  const int offset = static_cast<int>(rest_size) - 1;  // the last prompt token in the batch
  llm::AttentionRows rows = n_proposed > 0 ? session_->decode_each(batch, offset, predicted) : session_->decode(batch);
  kv_tokens_.insert(kv_tokens_.end(), batch.begin(), batch.end());
  stats_.prompt_decoded += static_cast<long>(rest_size);
  stats_.prompt_reused += static_cast<long>(common);
  stats_.proposed += static_cast<long>(n_proposed);
  take_row(rows, offset);
  bool on_proposal = n_proposed > 0;
  while (static_cast<int>(g.tokens.size()) < limit) {
    const size_t k = g.tokens.size();
    const llm::Token t = on_proposal ? predicted[k] : session_->greedy();
    if (is_stop(t)) break;
    g.tokens.push_back(t);
    bool stopped = false;
    for (const auto& seq : stop_sequences_) {
      if (ends_with(g.tokens, seq)) {
        g.tokens.resize(g.tokens.size() - seq.size());
        stopped = true;
        break;
      }
    }
    if (stopped) break;
    if (static_cast<int>(g.tokens.size()) >= limit) break;
    if (on_proposal && k < n_proposed && proposal[k] == t) {  // verified: its cells and next choice are in the batch
      ++stats_.accepted;
      take_row(rows, offset + static_cast<int>(k) + 1);
      continue;
    }
    if (on_proposal) {  // the proposal's rest is not the model's: forget its cells
      const size_t keep = prompt.size() + k;
      session_->remove_suffix(static_cast<int>(keep));
      kv_tokens_.resize(keep);
      on_proposal = false;
    }
    const llm::Token one[1] = {t};
    llm::AttentionRows step = session_->decode(one);
    ++stats_.stepped;
    kv_tokens_.push_back(t);
    take_row(step, 0);
  }
  if (capture) g.rows.resize(std::min(g.rows.size(), g.tokens.size()));
  cut_placeholders(g);
  stats_.generated += static_cast<long>(g.tokens.size());
  return g;
}

std::span<const llm::Token> TranslationEngine::draft_rest() const {
  if (!draft_) return {};
  return std::span<const llm::Token>(draft_->target).subspan(static_cast<size_t>(draft_->accepted));
}

void TranslationEngine::make_draft(const std::string& source) {
  auto d = std::make_unique<Draft>();
  d->source = source;
  const std::vector<llm::Token> src = model_.tokenize(source, false);
  std::string pieces;
  for (llm::Token t : src) {
    pieces += model_.token_bytes(t);
    d->source_ends.push_back(pieces.size());
  }
  // A tokenizer may put a space before the text: map positions past it.
  if (pieces.size() >= source.size() && pieces.ends_with(source)) d->source_offset = pieces.size() - source.size();
  std::vector<llm::Token> prompt = prompt_before_;
  const int source_begin = static_cast<int>(prompt.size());
  prompt.insert(prompt.end(), src.begin(), src.end());
  const int source_end = static_cast<int>(prompt.size());
  prompt.insert(prompt.end(), prompt_after_.begin(), prompt_after_.end());
  // The committed target is forced: the new draft continues it, never rewrites it.
  prompt.insert(prompt.end(), committed_tokens_.begin(), committed_tokens_.end());
  // The budget: what the source still untranslated may need (engine.h).
  int budget = options_.max_new_tokens;
  if (options_.draft_tokens_per_source > 0) {
    const double whole =
        options_.draft_tokens_per_source * static_cast<double>(src.size()) + options_.draft_token_slack;
    budget = std::clamp(static_cast<int>(std::ceil(whole)) - static_cast<int>(committed_tokens_.size()), 1, budget);
  }
  Generation g = src.empty() ? Generation{} : generate(prompt, true, source_begin, source_end, budget, draft_rest());
  ++stats_.drafts;
  d->target = std::move(g.tokens);
  d->rows = std::move(g.rows);
  draft_ = std::move(d);
}

int TranslationEngine::source_tokens_within(size_t bytes) const {
  const size_t limit = draft_->source_offset + bytes;
  int k = 0;
  while (k < static_cast<int>(draft_->source_ends.size()) && draft_->source_ends[static_cast<size_t>(k)] <= limit) ++k;
  return k;
}

int TranslationEngine::frontier_for(const std::string& committed) const {
  if (!draft_ || !draft_->source.starts_with(committed)) return -1;
  return source_tokens_within(committed.size());
}

int TranslationEngine::frontier_within(const std::string& committed) const {
  if (!draft_) return -1;
  const auto common = std::mismatch(draft_->source.begin(), draft_->source.end(), committed.begin(), committed.end());
  return source_tokens_within(static_cast<size_t>(common.first - draft_->source.begin()));
}

EngineUpdate TranslationEngine::commit_from_draft(int frontier, bool called_model) {
  EngineUpdate out;
  out.called_model = called_model;
  Draft& d = *draft_;
  int accepted = accepted_prefix(d.rows, d.accepted, std::max(0, frontier), options_.commit);
  accepted = std::min(accepted, static_cast<int>(d.target.size()));
  // Commit whole characters only: a token ending inside one waits for the next.
  while (accepted > d.accepted) {
    std::string bytes = bytes_of(committed_tokens_) +
                        bytes_of(std::vector<llm::Token>(d.target.begin() + d.accepted, d.target.begin() + accepted));
    if (complete_utf8_prefix(bytes) == bytes.size()) break;
    --accepted;
  }
  if (accepted > d.accepted) {
    if (!called_model) ++stats_.releases;
    committed_tokens_.insert(committed_tokens_.end(), d.target.begin() + d.accepted, d.target.begin() + accepted);
    d.accepted = accepted;
  }
  const std::string all = bytes_of(committed_tokens_);
  const size_t complete = complete_utf8_prefix(all);
  if (complete > committed_bytes_sent_) {
    out.committed = all.substr(committed_bytes_sent_, complete - committed_bytes_sent_);
    committed_bytes_sent_ = complete;
  }
  std::string rest = bytes_of(d.target, static_cast<size_t>(d.accepted));
  rest.resize(complete_utf8_prefix(rest));
  out.draft = rest;
  out.draft_changed = rest != last_draft_;
  last_draft_ = rest;
  return out;
}

EngineUpdate TranslationEngine::update(const std::string& committed_source, const std::string& tail,
                                       const std::function<void(const EngineUpdate&)>& early) {
  EngineUpdate out;
  if (!simultaneous()) return out;
  std::string t = tail;
  // A stale tail (text the committed source already ends with) would double the source.
  {
    std::string trimmed = t;
    while (!trimmed.empty() && trimmed.front() == ' ') trimmed.erase(trimmed.begin());
    if (!trimmed.empty() && committed_source.ends_with(trimmed)) t.clear();
  }
  const std::string source = committed_source + t;
  if (source.empty()) return out;
  bool need = !draft_ || !draft_->source.starts_with(committed_source);
  if (!need && source != draft_->source) {
    const int now = static_cast<int>(model_.tokenize(source, false).size());
    need = now - static_cast<int>(draft_->source_ends.size()) >= options_.redraft_source_tokens;
  }
  if (need && early && draft_) {
    // What the cached draft covers of the newly committed source goes out now,
    // not after the call (the new draft continues it: committed target is forced).
    EngineUpdate released = commit_from_draft(frontier_within(committed_source), false);
    if (!released.committed.empty() || released.draft_changed) early(released);
  }
  if (need) make_draft(source);
  return commit_from_draft(frontier_for(committed_source), need);
}

std::string TranslationEngine::translate(const std::string& source) {
  if (source.empty()) return "";
  std::vector<llm::Token> prompt = prompt_before_;
  const std::vector<llm::Token> src = model_.tokenize(source, false);
  prompt.insert(prompt.end(), src.begin(), src.end());
  prompt.insert(prompt.end(), prompt_after_.begin(), prompt_after_.end());
  // The segment's last draft (committed target and the rest) is the final's
  // likely start: verified, not regenerated.
  std::vector<llm::Token> guess = committed_tokens_;
  const std::span<const llm::Token> rest = draft_rest();
  guess.insert(guess.end(), rest.begin(), rest.end());
  Generation g = generate(prompt, false, 0, 0, options_.max_new_tokens, guess);
  std::string text = bytes_of(g.tokens);
  text.resize(complete_utf8_prefix(text));
  return text;
}

void TranslationEngine::reset() {
  draft_.reset();
  committed_tokens_.clear();
  committed_bytes_sent_ = 0;
  last_draft_.clear();
}

std::string TranslationEngine::committed_text() const {
  std::string all = bytes_of(committed_tokens_);
  all.resize(complete_utf8_prefix(all));
  return all;
}

}  // namespace earshot::stages::translation
