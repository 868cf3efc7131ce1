#include "model/whisper/asr_text.h"

#include <algorithm>

#include "common/error.h"

namespace earshot::whisper {

WhisperText::WhisperText(std::shared_ptr<const Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {
  if (!tokenizer_) throw Error(ErrorCode::kInternal, "WhisperText needs a tokenizer");
  const SpecialTokens& sp = tokenizer_->special();
  suppressed_ = {sp.transcribe, sp.translate, sp.sot, sp.sot_prev, sp.sot_lm, sp.no_timestamps, sp.no_speech};
  for (int32_t i = 0; i < sp.n_languages; ++i) suppressed_.push_back(sp.first_language + i);
  // Timestamps mean nothing in no-timestamps mode and would split words oddly.
  for (int32_t t = sp.timestamp_begin; t < tokenizer_->n_vocab(); ++t) suppressed_.push_back(t);
  blank_ = tokenizer_->encode(" ");
  blank_.push_back(sp.eot);
}

std::shared_ptr<const WhisperText> WhisperText::for_model(const Model& model) {
  const Hparams& hp = model.hparams();
  const size_t eot = hp.is_multilingual() ? 50257 : 50256;
  const auto& vocab = model.vocabulary();
  std::vector<std::string> text(vocab.begin(),
                                vocab.begin() + static_cast<std::ptrdiff_t>(std::min(eot, vocab.size())));
  return std::make_shared<const WhisperText>(std::make_shared<const Tokenizer>(std::move(text), hp.n_vocab));
}

bool WhisperText::has_language(std::string_view code) const {
  if (!tokenizer_->is_multilingual()) return code == "en";
  return tokenizer_->language_token(code).has_value();
}

std::string WhisperText::language_code(int index) const {
  const auto all = languages();
  if (index < 0 || index >= n_languages() || index >= static_cast<int>(all.size())) return "";
  return std::string(all[static_cast<size_t>(index)].code);
}

std::vector<AsrText::Unit> WhisperText::split_to_words(std::span<const int32_t> tokens,
                                                       std::string_view language) const {
  std::vector<Unit> units;
  for (Tokenizer::Word& w : tokenizer_->split_to_words(tokens, language)) {
    units.push_back({std::move(w.text), std::move(w.tokens)});
  }
  return units;
}

std::vector<int32_t> WhisperText::context_prompt(std::span<const int32_t> context) const {
  if (context.empty()) return {};
  std::vector<int32_t> prompt = {tokenizer_->special().sot_prev};
  prompt.insert(prompt.end(), context.begin(), context.end());
  return prompt;
}

std::vector<int32_t> WhisperText::start_sequence(std::string_view language, Task task) const {
  std::vector<int32_t> sequence = tokenizer_->sot_sequence(language, task);
  sequence.push_back(tokenizer_->special().no_timestamps);
  return sequence;
}

}  // namespace earshot::whisper
