// What the streaming policies need of an attention ASR model's vocabulary and
// prompt conventions, without knowing which model family it is: decoding tokens
// to bytes, splitting them into words, the special ids a pass needs, how a
// prompt is built, which ids are never chosen, and language codes. Whisper
// implements it (model/whisper/asr_text.h); other families bring their own, so
// the policies compile without any model engine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace earshot {

enum class Task { kTranscribe, kTranslate };

class AsrText {
 public:
  virtual ~AsrText() = default;

  virtual int32_t n_vocab() const = 0;

  // Languages: whether the model takes a language at all (English-only models
  // do not), whether it knows a code ("en"), and whether it can translate.
  virtual bool is_multilingual() const = 0;
  virtual bool has_language(std::string_view code) const = 0;
  virtual bool can_translate() const = 0;
  // The code of language `index` in the order of AsrDecoder::detect_language()'s
  // probabilities; "" past the model's languages.
  virtual std::string language_code(int index) const = 0;
  virtual int n_languages() const = 0;

  // Exact encoding of text (prompts); decoding of text tokens to bytes, special
  // tokens skipped (the bytes may end inside a UTF-8 character).
  virtual std::vector<int32_t> encode(std::string_view utf8) const = 0;
  virtual std::string decode(std::span<const int32_t> tokens) const = 0;
  virtual bool is_special(int32_t token) const = 0;

  struct Unit {
    std::string text;  // bytes; a leading space kept for space-delimited scripts
    std::vector<int32_t> tokens;
  };
  // Words of `tokens` in `language`: a new word at a leading space or punctuation
  // for spaced scripts, one unit per complete character for scripts without spaces.
  // A trailing incomplete character may be left out (callers cover it).
  virtual std::vector<Unit> split_to_words(std::span<const int32_t> tokens, std::string_view language) const = 0;

  // The token that ends a transcription.
  virtual int32_t end_token() const = 0;
  // Previous text given to the model as context, ahead of start_sequence():
  // empty when `context` is.
  virtual std::vector<int32_t> context_prompt(std::span<const int32_t> context) const = 0;
  // Where the transcription starts, in `language` ("" = not known yet) for `task`;
  // its first token is where no_speech_token()'s probability is read.
  virtual std::vector<int32_t> start_sequence(std::string_view language, Task task) const = 0;
  // Ids never chosen in a plain transcription (control tokens, language tags,
  // timestamps), and those not allowed as the first token (blank, end).
  virtual std::vector<int32_t> suppressed_tokens() const = 0;
  virtual std::vector<int32_t> blank_tokens() const = 0;
  // Every id from this one on is suppressed: a decoder need not compute their logits.
  virtual int32_t text_vocabulary_end() const = 0;
  // The no-speech token, -1 when the model has none.
  virtual int32_t no_speech_token() const = 0;
};

}  // namespace earshot
