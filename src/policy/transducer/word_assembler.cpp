#include "policy/transducer/word_assembler.h"

#include <algorithm>
#include <cmath>

namespace earshot::policy {

WordAssembler WordAssembler::for_stream(const TransducerStream& stream, const std::string& language) {
  WordAssembler words;
  words.pieces = &stream.pieces();
  words.frame_seconds = stream.frame_seconds();
  words.language = language == "auto" ? "" : language;
  return words;
}

void WordAssembler::add(const std::vector<TokenEmission>& emissions, double time_origin, std::vector<Word>& out,
                        double audio_end) {
  for (const TokenEmission& e : emissions) {
    // A language tag (Nemotron 3.5: "<de-DE>") is not a word: it sets the
    // language of the word in progress and of those after it (completed words
    // keep theirs). "<auto>" says nothing.
    if (const std::string tag = pieces->language_tag(e.token); !tag.empty()) {
      if (tag != "auto") {
        language = tag.substr(0, tag.find('-'));
        if (!pending.text.empty()) pending.language = language;
      }
      continue;
    }
    if (pieces->starts_word(e.token) && !pending.text.empty()) flush(out);
    const std::string text = pieces->text(e.token, !stream_has_words && pending.text.empty());
    if (text.empty()) continue;
    const double start = std::min(audio_end, time_origin + e.frame * frame_seconds);
    const double end =
        std::max(start, std::min(audio_end, time_origin + (e.frame + std::max(e.duration, 1)) * frame_seconds));
    if (pending.text.empty()) {
      pending.text = text;
      pending.start = start;
      pending.probability = 1.0f;
      pending.language = language;
      stream_has_words = true;
    } else {
      pending.text += text;
    }
    pending.end = std::max(pending.end, end);
    pending.probability *= std::exp(e.log_prob);
  }
}

void WordAssembler::flush(std::vector<Word>& out) {
  if (pending.text.empty()) return;
  out.push_back(std::move(pending));
  pending = Word{};
}

}  // namespace earshot::policy
