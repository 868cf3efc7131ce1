#include "policy/processor_base.h"

#include <algorithm>

#include "common/error.h"

namespace earshot::policy {

std::vector<Word> ProcessorBase::hypothesis() const {
  std::vector<Word> all = committed_;
  all.insert(all.end(), provisional_.begin(), provisional_.end());
  return all;
}

void ProcessorBase::check_language(const AsrText& text, const std::string& language, Task task) {
  if (!text.is_multilingual()) {
    if (language != "auto" && language != "en") {
      throw Error(ErrorCode::kInvalidArgument,
                  "language '" + language + "' needs a multilingual model; this model is English-only");
    }
    if (task == Task::kTranslate) {
      throw Error(ErrorCode::kInvalidArgument, "the translate task needs a multilingual model");
    }
  } else if (language != "auto" && !text.has_language(language)) {
    throw Error(ErrorCode::kInvalidArgument, "unknown language code '" + language + "' (use e.g. en, de, or auto)");
  }
}

std::string ProcessorBase::most_likely_language(AsrDecoder& asr) {
  const std::vector<float> probs = asr.detect_language();
  const size_t n = std::min(probs.size(), static_cast<size_t>(std::max(0, asr.text().n_languages())));
  if (n == 0) throw Error(ErrorCode::kInternal, "language detection returned no probabilities");
  const size_t best = std::max_element(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(n)) - probs.begin();
  return asr.text().language_code(static_cast<int>(best));
}

}  // namespace earshot::policy
