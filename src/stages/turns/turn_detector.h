// The end of a speaker's turn, from what a session already knows: the VAD's speech
// and silence, whether every word heard is committed, the committed text's shape
// (a sentence end, a word that continues) and, when one is configured, a semantic
// model's probability that the text ends a turn. Pure logic on the stream's events
// and its audio clock; the turn stage (turn_stage.h) puts it in a session's chain.
//
// A turn opens at the start of speech (SpeechStarted; without a VAD, at its first
// word) and, once the speech has ended and every word of it is committed, its end
// confidence grows with the silence after it:
//   confidence = 1 - (1 - prior) * exp(-silence / silence_scale)
// where prior is the semantic model's probability when one ran, else 0.9 after a
// sentence end (. ? ! and their CJK forms), 0.2 after a word that continues ("and",
// "but", "um", a trailing comma...), 0.6 otherwise (0.5 for a turn without words).
// The turn ends (TurnEnded) when the confidence reaches eot_threshold, or the
// silence reaches the timeout, or the client flushes (Finalized) or the stream
// ends; with an eager threshold it is first judged likely over (TurnEndLikely),
// and resumes (TurnResumed) if speech or words come back before it ends. With
// `silence_seconds` set (OpenAI's server_vad), the rule is acoustic only: the turn
// ends after that much silence.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "events/event.h"

namespace earshot::stages::turns {

// One stream's thresholds (Deepgram Flux's and OpenAI's turn_detection take them per session).
struct TurnSettings {
  double eot_threshold = 0.7;                 // 0.5..1.0; 1.0: only timeouts, flushes and the end end a turn
  std::optional<double> eager_eot_threshold;  // 0.3..0.9, below eot_threshold: TurnEndLikely on
  double timeout_seconds = 5.0;               // silence that ends a turn whatever the confidence
  std::optional<double> silence_seconds;      // acoustic rule: this much silence ends a turn (confidence ignored)
  double silence_scale_seconds = 0.5;         // how fast the confidence grows with silence
};

// Scores how likely a turn's text is complete (0..1): a semantic end-of-turn model.
// One per stream; called on the session's thread.
class TurnScorer {
 public:
  virtual ~TurnScorer() = default;
  virtual double end_of_turn_probability(const std::string& text) = 0;
};

// The text prior of the rule above, and its parts.
struct TextShape {
  bool sentence_end = false;
  bool trailing_continuation = false;
};
TextShape text_shape(const std::vector<Word>& words);
double text_prior(const TextShape& shape, bool has_words);

class TurnDetector {
 public:
  using Emit = std::function<void(events::Event)>;
  explicit TurnDetector(TurnSettings settings, TurnScorer* scorer = nullptr) : settings_(settings), scorer_(scorer) {}

  // Turn events an incoming event causes, emitted through `emit`; the stage orders
  // them around the event itself (before words that open or resume a turn, after
  // speech events and flushes, before the end of the stream).
  void on_event(const events::Event& event, const Emit& emit);
  // The audio the VAD has heard reached `heard` (stream seconds): the silence grew.
  void advance(double heard, const Emit& emit);

  const TurnSettings& settings() const { return settings_; }
  // New thresholds from here on (a stream's mid-stream settings); the open turn goes on under them.
  void set_settings(const TurnSettings& settings) { settings_ = settings; }
  int turns_ended() const { return turn_; }

 private:
  enum class State { kIdle, kOngoing, kLikelyOver };
  void open(double at, const Emit& emit);
  void resume(double at, const Emit& emit);
  void end(double at, double confidence, events::TurnEvidence evidence, const Emit& emit);
  events::TurnEvidence evidence(double silence);
  double confidence(const events::TurnEvidence& e) const;
  void decide(const Emit& emit);
  double speech_end() const;

  TurnSettings settings_;
  TurnScorer* scorer_;
  State state_ = State::kIdle;
  int turn_ = 0;                // the open turn's number (or the next one's)
  bool in_speech_ = false;      // the VAD says speech now
  bool saw_vad_ = false;        // a SpeechStarted came: silence is known
  double speech_ended_at_ = 0;  // the last SpeechEnded
  bool pause_is_skip_ = false;  // the pause since it is audio the session skipped (AudioSkipped)
  double heard_ = 0;
  std::vector<Word> words_;  // the open turn's committed words
  std::vector<Word> tail_;   // the provisional tail
  std::string scored_text_;  // the text the scorer last scored, and its score
  double scored_ = -1;
  bool failed_ = false;
};

}  // namespace earshot::stages::turns
