// A scripted LlmModel for the translation tests: a toy tokenizer (words with
// their leading space, CJK characters one by one or byte-split in two) and a
// "translation" the test scripts as a function of the source pieces, with the
// attention of every target token over the source span. Thread-safe like a
// real model: the model is shared, each session is one stream's.
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "model/llm/llm_backend.h"

namespace earshot::testing {

struct ScriptToken {
  std::string piece;
  std::vector<std::vector<float>> attention;  // [head][source column]; empty = uniform
};
using Script = std::function<std::vector<ScriptToken>(const std::vector<std::string>& source)>;

// One peaked row: `peak` at column `at` (clamped), the rest spread evenly.
inline std::vector<float> peaked(int n, int at, float peak = 0.9f) {
  std::vector<float> row(static_cast<size_t>(n), n > 1 ? (1.0f - peak) / static_cast<float>(n - 1) : 1.0f);
  if (n > 0) row[static_cast<size_t>(std::clamp(at, 0, n - 1))] = n > 1 ? peak : 1.0f;
  return row;
}

inline std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The default script: source piece i -> its upper-case form, every head peaked on i.
inline Script word_for_word(int n_heads) {
  return [n_heads](const std::vector<std::string>& source) {
    std::vector<ScriptToken> out;
    for (size_t i = 0; i < source.size(); ++i) {
      ScriptToken t{upper(source[i]), {}};
      for (int h = 0; h < n_heads; ++h)
        t.attention.push_back(peaked(static_cast<int>(source.size()), static_cast<int>(i)));
      out.push_back(std::move(t));
    }
    return out;
  };
}

// Like word_for_word, with each head's attention a smooth bump (sigma 2 source
// tokens) around its source token: the shape the paper's median filter keeps.
inline Script smooth_word_for_word(int n_heads) {
  return [n_heads](const std::vector<std::string>& source) {
    std::vector<ScriptToken> out;
    const int n = static_cast<int>(source.size());
    for (int i = 0; i < n; ++i) {
      std::vector<float> row(static_cast<size_t>(n));
      float sum = 0;
      for (int c = 0; c < n; ++c)
        sum += row[static_cast<size_t>(c)] = std::exp(-0.125f * static_cast<float>((c - i) * (c - i)));
      for (float& v : row) v /= sum;
      ScriptToken t{upper(source[static_cast<size_t>(i)]), {}};
      for (int h = 0; h < n_heads; ++h) t.attention.push_back(row);
      out.push_back(std::move(t));
    }
    return out;
  };
}

enum class PlaceholderMode { kNone, kSingle, kFragmented };

class FakeModel : public llm::LlmModel {
 public:
  inline static const std::string kPlaceholder =
      "<\xEF\xBD\x9Chy_place\xE2\x96\x81holder\xE2\x96\x81no\xE2\x96\x81"
      "2\xEF\xBD\x9C>";
  inline static const std::vector<std::string> kPlaceholderPieces = {
      "<\xEF\xBD\x9C", "hy_place", "\xE2\x96\x81holder\xE2\x96\x81no\xE2\x96\x81", "2\xEF\xBD\x9C>"};

  explicit FakeModel(Script script, int n_heads = 2) : script_(std::move(script)), n_heads_(n_heads) {
    id("<|im_start|>");
    id("<|im_end|>");
    id("<|endoftext|>");
  }

  bool byte_split_cjk = false;  // a 3-byte character as two tokens (2 + 1 bytes)
  PlaceholderMode placeholder = PlaceholderMode::kNone;
  std::function<void()> on_decode;  // called at the start of every decode (a gate for slow-model tests)
  std::string model_id = "tencent/Hy-MT2-1.8B-GGUF/Hy-MT2-1.8B-Q8_0.gguf";
  mutable std::atomic<int> decode_calls{0};
  mutable std::atomic<int> prompt_decodes{0};  // decode calls of more than one token (a new draft or final)
  mutable std::atomic<int> verify_decodes{0};  // of which decode_each calls (a proposal verified in the batch)
  // set_attention_capture calls with heads (drafting) and without (a full translation).
  mutable std::atomic<int> captures_with_heads{0};
  mutable std::atomic<int> captures_without_heads{0};

  std::string id() const override { return model_id; }
  std::string architecture() const override { return "qwen3"; }
  llm::ModelShape shape() const override { return {32, 16, 4, 100000, 4096}; }

  std::vector<llm::Token> tokenize(std::string_view text, bool parse_special) const override {
    std::vector<llm::Token> out;
    size_t i = 0;
    std::string piece;
    auto flush = [&] {
      if (!piece.empty()) out.push_back(id(piece));
      piece.clear();
    };
    while (i < text.size()) {
      if (parse_special && text.substr(i).starts_with(kPlaceholder) && placeholder != PlaceholderMode::kNone) {
        flush();
        if (placeholder == PlaceholderMode::kSingle)
          out.push_back(id(kPlaceholder));
        else
          for (const std::string& p : kPlaceholderPieces) out.push_back(id(p));
        i += kPlaceholder.size();
        continue;
      }
      if (parse_special && text.substr(i).starts_with("<|")) {
        const size_t close = text.find("|>", i);
        if (close != std::string::npos) {
          flush();
          out.push_back(id(std::string(text.substr(i, close + 2 - i))));
          i = close + 2;
          continue;
        }
      }
      const auto c = static_cast<unsigned char>(text[i]);
      if (c >= 0xE0 && c < 0xF0 && i + 3 <= text.size()) {  // a CJK character: its own token(s)
        flush();
        if (byte_split_cjk) {
          out.push_back(id(std::string(text.substr(i, 2))));
          out.push_back(id(std::string(text.substr(i + 2, 1))));
        } else {
          out.push_back(id(std::string(text.substr(i, 3))));
        }
        i += 3;
        continue;
      }
      if (c == ' ' && !piece.empty() && piece.back() != '\n') flush();
      piece += text[i];
      if (c == '\n' && (i + 1 >= text.size() || text[i + 1] != '\n')) flush();
      ++i;
    }
    flush();
    return out;
  }

  std::string token_bytes(llm::Token token) const override {
    std::lock_guard lock(mutex_);
    return pieces_.at(static_cast<size_t>(token));
  }
  std::vector<llm::Token> find_tokens(std::string_view text) const override {
    if (text == kPlaceholder && placeholder == PlaceholderMode::kSingle) return {id(kPlaceholder)};
    return {};
  }
  bool is_end_of_generation(llm::Token token) const override {
    return token == id("<|endoftext|>") || token == id("<|im_end|>");
  }
  std::unique_ptr<llm::LlmSession> open_session(const llm::SessionOptions& options) const override;

  llm::Token id(const std::string& piece) const {
    std::lock_guard lock(mutex_);
    auto it = ids_.find(piece);
    if (it != ids_.end()) return it->second;
    const auto t = static_cast<llm::Token>(pieces_.size());
    pieces_.push_back(piece);
    ids_[piece] = t;
    return t;
  }
  const Script& script() const { return script_; }
  int n_heads() const { return n_heads_; }

 private:
  Script script_;
  int n_heads_;
  mutable std::mutex mutex_;
  mutable std::vector<std::string> pieces_;
  mutable std::map<std::string, llm::Token> ids_;
};

class FakeSession : public llm::LlmSession {
 public:
  FakeSession(const FakeModel& model, int context) : model_(model), context_(context) {}

  void set_attention_capture(std::vector<llm::AttentionHead> heads, int begin, int end) override {
    ++(heads.empty() ? model_.captures_without_heads : model_.captures_with_heads);
    heads_ = std::move(heads);
    begin_ = begin;
    end_ = end;
  }

  llm::AttentionRows decode(std::span<const llm::Token> tokens) override {
    if (static_cast<int>(tokens_.size() + tokens.size()) > context_)
      throw Error(ErrorCode::kInvalidArgument, "fake context full");
    if (model_.on_decode) model_.on_decode();
    ++model_.decode_calls;
    if (tokens.size() > 1) ++model_.prompt_decodes;
    const int first = static_cast<int>(tokens_.size());
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    locate();
    llm::AttentionRows rows;
    if (heads_.empty()) return rows;
    rows.n_tokens = static_cast<int>(tokens.size());
    rows.n_heads = static_cast<int>(heads_.size());
    rows.column_begin = begin_;
    rows.column_end = end_;
    const int n = end_ - begin_;
    for (int p = first; p < static_cast<int>(tokens_.size()); ++p) {
      const int k = p + 1 - target_start_;  // the target token this position predicts
      for (int h = 0; h < rows.n_heads; ++h) {
        std::vector<float> row(static_cast<size_t>(n), n > 0 ? 1.0f / static_cast<float>(n) : 0.0f);
        if (k >= 0 && k < static_cast<int>(script_.size()) &&
            h < static_cast<int>(script_[static_cast<size_t>(k)].attention.size()))
          row = script_[static_cast<size_t>(k)].attention[static_cast<size_t>(h)];
        row.resize(static_cast<size_t>(n), 0.0f);
        rows.values.insert(rows.values.end(), row.begin(), row.end());
      }
    }
    return rows;
  }

  // One call, as LlamaSession batches it; the scripted choice after each token.
  llm::AttentionRows decode_each(std::span<const llm::Token> tokens, int first,
                                 std::vector<llm::Token>& greedy_after) override {
    llm::AttentionRows rows = decode(tokens);
    ++model_.verify_decodes;
    greedy_after.clear();
    for (size_t i = static_cast<size_t>(std::max(first, 0)); i < tokens.size(); ++i)
      greedy_after.push_back(greedy_at(static_cast<int>(tokens_.size() - tokens.size() + i + 1)));
    return rows;
  }

  llm::Token greedy() const override { return greedy_at(static_cast<int>(tokens_.size())); }

  // The scripted choice after the first `length` tokens.
  llm::Token greedy_at(int length) const {
    const int k = length - target_start_;
    if (target_start_ < 0 || k < 0 || k >= static_cast<int>(script_.size())) return model_.id("<|im_end|>");
    return model_.id(script_[static_cast<size_t>(k)].piece);
  }
  std::vector<float> last_log_probs() const override { return {}; }
  int position() const override { return static_cast<int>(tokens_.size()); }
  void remove_suffix(int from) override {
    tokens_.resize(static_cast<size_t>(std::clamp(from, 0, static_cast<int>(tokens_.size()))));
    locate();
  }

 private:
  // The source is what lies between the instruction's blank line and <|im_end|>;
  // the target starts after "<|im_start|>" "assistant\n".
  void locate() {
    target_start_ = -1;
    const llm::Token end = model_.id("<|im_end|>"), start = model_.id("<|im_start|>");
    int src_begin = -1, src_end = -1;
    for (int i = 0; i < static_cast<int>(tokens_.size()); ++i) {
      const std::string p = model_.token_bytes(tokens_[static_cast<size_t>(i)]);
      if (src_begin < 0 && p.ends_with("\n\n")) src_begin = i + 1;
      if (src_begin >= 0 && src_end < 0 && tokens_[static_cast<size_t>(i)] == end) src_end = i;
      if (src_end >= 0 && tokens_[static_cast<size_t>(i)] == start && i > src_end) target_start_ = i + 2;
    }
    if (src_begin < 0 || src_end < 0 || target_start_ < 0 || target_start_ > static_cast<int>(tokens_.size())) {
      target_start_ = -1;
      return;
    }
    std::vector<std::string> source;
    for (int i = src_begin; i < src_end; ++i) source.push_back(model_.token_bytes(tokens_[static_cast<size_t>(i)]));
    if (source != source_) {
      source_ = source;
      script_ = model_.script()(source_);
    }
  }

  const FakeModel& model_;
  int context_;
  std::vector<llm::Token> tokens_;
  std::vector<llm::AttentionHead> heads_;
  int begin_ = 0, end_ = 0;
  int target_start_ = -1;
  std::vector<std::string> source_;
  std::vector<ScriptToken> script_;
};

inline std::unique_ptr<llm::LlmSession> FakeModel::open_session(const llm::SessionOptions& options) const {
  return std::make_unique<FakeSession>(*this, options.context_tokens);
}

}  // namespace earshot::testing
