// The vocabulary a stream is told to expect: names, products, jargon, where a
// model on its own fails a user. One per-session option fed by every protocol
// (Deepgram's keyterm and keywords, OpenAI's prompt, the Realtime session's
// prompt and keywords) and by the server's defaults (serve --keyterms, and
// WhisperLiveKit's --static-init-prompt); each model family uses it its own
// way: Whisper and Qwen3-ASR as prompt text (Whisper's static prompt,
// Qwen3-ASR's system context), the transducers as phrases boosted while they
// decode (policy/transducer/phrase_boost.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace earshot {

struct Keyterm {
  std::string text;  // a word or a phrase, as the user spells it
  // Deepgram's intensifier: 1 by default; larger boosts more, a negative one
  // suppresses (a transducer's phrase gets a penalty; prompt text leaves it out).
  double weight = 1.0;
};

struct Keyterms {
  std::vector<Keyterm> terms;
  // Free text (OpenAI's prompt, --static-init-prompt): the prompt families take it
  // as it is; the transducers boost its short comma- or line-separated items.
  std::string prompt;

  // Limits on what a client may send: beyond them the protocol refuses the request.
  static constexpr size_t kMaxTerms = 200;
  static constexpr size_t kMaxTermBytes = 200;
  static constexpr size_t kMaxPromptBytes = 4096;
  // A prompt item longer than this many words is context, not a phrase to boost.
  static constexpr size_t kMaxPhraseWords = 6;

  bool empty() const { return terms.empty() && prompt.empty(); }
  bool operator==(const Keyterms&) const;

  // Adds a term (trimmed; an empty one is ignored). A term already there (same text,
  // ignoring case) takes the new weight instead of appearing twice.
  void add(std::string_view text, double weight = 1.0);
  // The defaults, then `session`'s terms and prompt (prompts joined by a space).
  static Keyterms merge(const Keyterms& defaults, const Keyterms& session);
  // What a prompt-taking family reads: the prompt as given, then the terms to boost
  // as a comma-separated list ("" when there is neither).
  std::string prompt_text() const;
  // What a transducer boosts: the terms, then the prompt's items (split at commas,
  // semicolons and line ends) of at most kMaxPhraseWords words, weight 1.
  std::vector<Keyterm> phrases() const;
  // Throws Error(kInvalidArgument) naming `option` when a limit above is passed.
  void check_limits(const std::string& option) const;
};

// Deepgram's `keywords` value: "word" or "word:intensifier" (a number, negative
// to suppress). Throws Error(kInvalidArgument) naming the option for a bad one.
Keyterm parse_keyword(std::string_view value);

// A keyterms file's text: one term per line, optionally "term:weight"; blank
// lines and lines starting with '#' are skipped. Throws Error(kInvalidArgument)
// naming `source` and the line for a bad weight.
Keyterms parse_keyterms_list(std::string_view text, const std::string& source);

}  // namespace earshot
