#include "policy/processor_base.h"

#include <algorithm>

#include "common/error.h"

namespace earshot::policy {

std::vector<Word> ProcessorBase::hypothesis() const {
  std::vector<Word> all = committed_;
  all.insert(all.end(), provisional_.begin(), provisional_.end());
  return all;
}

void ProcessorBase::check_language(const whisper::Tokenizer& tokenizer, const std::string& language,
                                   whisper::Task task) {
  if (!tokenizer.is_multilingual()) {
    if (language != "auto" && language != "en") {
      throw Error(ErrorCode::kInvalidArgument,
                  "language '" + language + "' needs a multilingual model; this model is English-only");
    }
    if (task == whisper::Task::kTranslate) {
      throw Error(ErrorCode::kInvalidArgument, "the translate task needs a multilingual model");
    }
  } else if (language != "auto" && !tokenizer.language_token(language)) {
    throw Error(ErrorCode::kInvalidArgument, "unknown language code '" + language + "' (use e.g. en, de, or auto)");
  }
}

std::string ProcessorBase::most_likely_language(AsrDecoder& asr) {
  const std::vector<float> probs = asr.detect_language();
  const auto languages = whisper::languages();
  const size_t n =
      std::min({probs.size(), languages.size(), static_cast<size_t>(asr.tokenizer().special().n_languages)});
  if (n == 0) throw Error(ErrorCode::kInternal, "language detection returned no probabilities");
  const size_t best = std::max_element(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(n)) - probs.begin();
  return std::string(languages[best].code);
}

}  // namespace earshot::policy
