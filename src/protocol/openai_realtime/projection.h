// A stream session's events as a Realtime transcription session's server
// events: each turn of the speaker is a conversation item, announced by
// input_audio_buffer.speech_started, its text streamed as
// conversation.item.input_audio_transcription.delta while it is committed, and
// closed by speech_stopped, input_audio_buffer.committed,
// conversation.item.created and ...transcription.completed (the item's whole
// transcript). Pure code: the server's adapter feeds it events and the audio clock.
//
// Where an item ends depends on the session's turn_detection:
// - with a turn stage in the server (ProjectionOptions::turn_events), at its
//   TurnEnded; its TurnStarted starts the item;
// - without one (the fallback), at the VAD's SpeechEnded once silence_duration_ms
//   of silence followed on the audio clock (speech resuming sooner continues the
//   item); semantic_vad waits by its eagerness: the short wait when the text ends
//   a sentence, else the long one (its documented longest pause);
// - turn_detection null: when the client commits (input_audio_buffer.commit; the
//   item completes once the session's flush of the audio before it is in).
// A client commit ends the open item in every mode.
//
// Deltas come as words are committed, while the item is being spoken (earshot
// streams; OpenAI's server transcribes an item after its commit, so its deltas
// follow the commit): the item's id is known from speech_started on. With
// ProjectionOptions::live_deltas false the deltas wait for the commit, in
// OpenAI's order.
#pragma once

#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "events/event.h"
#include "protocol/openai_realtime/session.h"

namespace earshot::openai_realtime {

struct ProjectionOptions {
  bool turn_events = false;  // a turn stage runs: items follow its TurnStarted / TurnEnded
  bool live_deltas = true;   // deltas as words are committed (else after the item's commit)
};

class Projection {
 public:
  Projection(ProjectionOptions options, Ids& ids) : options_(options), ids_(ids) {}

  // The session's turn detection and includes (they may change at any time).
  void configure(const SessionConfig& config);
  // Server events for the session's events since the last call, in order;
  // heard_seconds: the stream time the session's VAD has heard (StreamStatus::
  // heard_seconds, as Deepgram's projections take it: a silence after an end the
  // VAD has decided is counted without waiting for its look-ahead's release).
  std::vector<nlohmann::json> on_events(std::span<const events::Event> events, double heard_seconds);
  // input_audio_buffer.commit: the open item ends (committed and created at once;
  // completed when Finalized, the session's flush, arrives). The adapter asks the
  // session to finalize.
  // until: the stream time of the audio received when the client committed;
  // request: the session's number for the flush it was asked for
  // (StreamSession::finalize; events::Finalized::requests answers it).
  std::vector<nlohmann::json> commit(double until, uint64_t request);
  // input_audio_buffer.clear: cleared at once; the open item's words, and those of
  // the audio buffered before the session's flush (Finalized), are dropped. The
  // adapter asks the session to finalize.
  std::vector<nlohmann::json> clear(double until, uint64_t request);
  // The server stops before the stream ended: the open item's words so far as its
  // completed transcript; then the projection has ended.
  std::vector<nlohmann::json> force_final();

  bool ended() const { return ended_; }  // EndOfStream or StreamError seen

 private:
  struct Item {
    Item() {}  // clang: a nested struct's member initializers need a user-provided constructor for optional::emplace
    std::string id;
    std::vector<Word> words;
    bool spoken = false;     // speech_started was sent for it
    double start = -1;       // stream seconds: its speech's start (or its first word's)
    bool committed = false;  // committed and created were sent
    size_t delivered = 0;    // words sent as deltas
  };
  // A client's commit or clear, until the session's flush (Finalized) is in: words
  // of audio before `until` belong to the committed item (or are dropped).
  struct Flush {
    bool clear = false;
    double until = 0;
    uint64_t request = 0;
    std::string item;  // a commit's item
  };

  Item& open_item();
  void add_words(const std::vector<Word>& words, std::vector<nlohmann::json>& out);
  void deliver(Item& item, std::vector<nlohmann::json>& out);
  void speech_started(double at, std::vector<nlohmann::json>& out);
  // The open item ends: speech_stopped (when `stopped_at`), committed, created, then
  // completed unless it waits for the session's flush.
  void end_item(std::optional<double> stopped_at, bool await_flush, std::vector<nlohmann::json>& out);
  void commit_events(Item& item, std::vector<nlohmann::json>& out);
  void complete(Item& item, std::vector<nlohmann::json>& out);
  // The session's flushes up to request `answered` are in: their items complete.
  void flushed(uint64_t answered, std::vector<nlohmann::json>& out);
  void check_endpoint(double clock, bool end_of_stream, std::vector<nlohmann::json>& out);
  double silence_seconds() const;  // the fallback's wait after SpeechEnded

  ProjectionOptions options_;
  Ids& ids_;
  TurnDetection turn_;
  bool logprobs_ = false;
  std::optional<Item> open_;
  std::deque<Item> awaiting_;       // committed by the client, completed once their flush is in
  std::deque<Flush> flushes_;       // the client's commits and clears waiting for Finalized
  std::optional<double> endpoint_;  // fallback: SpeechEnded waiting for its silence
  std::string previous_item_;
  bool ended_ = false;
};

}  // namespace earshot::openai_realtime
