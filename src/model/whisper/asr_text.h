// Whisper's vocabulary and prompt conventions behind the model-neutral text
// interface the policies use (model/asr_text.h): <|startofprev|> before context,
// <|startoftranscript|> [<|lang|> <|task|>] <|notimestamps|> before the text,
// control tokens, language tags and timestamps suppressed.
#pragma once

#include <memory>

#include "model/asr_text.h"
#include "model/whisper/model.h"
#include "model/whisper/tokenizer.h"

namespace earshot::whisper {

class WhisperText : public AsrText {
 public:
  explicit WhisperText(std::shared_ptr<const Tokenizer> tokenizer);
  // The text interface of a loaded model's vocabulary (one per model: sessions share it).
  static std::shared_ptr<const WhisperText> for_model(const Model& model);

  int32_t n_vocab() const override { return tokenizer_->n_vocab(); }
  bool is_multilingual() const override { return tokenizer_->is_multilingual(); }
  bool has_language(std::string_view code) const override;
  bool can_translate() const override { return tokenizer_->is_multilingual(); }
  std::string language_code(int index) const override;
  int n_languages() const override { return tokenizer_->special().n_languages; }

  std::vector<int32_t> encode(std::string_view utf8) const override { return tokenizer_->encode(utf8); }
  std::string decode(std::span<const int32_t> tokens) const override { return tokenizer_->decode(tokens); }
  bool is_special(int32_t token) const override { return tokenizer_->is_special(token); }
  std::vector<Unit> split_to_words(std::span<const int32_t> tokens, std::string_view language) const override;

  int32_t end_token() const override { return tokenizer_->special().eot; }
  std::vector<int32_t> context_prompt(std::span<const int32_t> context) const override;
  std::vector<int32_t> start_sequence(std::string_view language, Task task) const override;
  std::vector<int32_t> suppressed_tokens() const override { return suppressed_; }
  std::vector<int32_t> blank_tokens() const override { return blank_; }
  int32_t text_vocabulary_end() const override { return tokenizer_->special().timestamp_begin; }
  int32_t no_speech_token() const override { return tokenizer_->special().no_speech; }

  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<int32_t> suppressed_;
  std::vector<int32_t> blank_;
};

}  // namespace earshot::whisper
