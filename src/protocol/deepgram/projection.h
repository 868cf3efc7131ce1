// A stream session's events as Deepgram's live messages. Committed words become
// final Results, each word sent as final exactly once, in windows that tile the
// audio; the provisional tail becomes interim Results (interim_results=true),
// replaced by the next (committed words held for an endpoint show there too); a VAD endpoint (SpeechEnded) marks the
// final that closes it speech_final once `endpointing` ms of silence passed on the audio clock (the audio the VAD
// has heard, StreamStatus::heard_seconds: the end it decided needs no more look-ahead); a client's Finalize gives a
// from_finalize final and leaves a pending endpoint in place; UtteranceEnd comes from a word-gap detector anchored on
// the last finalized word. Pure code: the server's adapter feeds it events and the audio clock.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "events/event.h"
#include "protocol/deepgram/messages.h"
#include "protocol/deepgram/options.h"
#include "protocol/speaker_gate.h"

namespace earshot::deepgram {

class Projection {
 public:
  // channel: which of info.channels this projection speaks for (multichannel: one projection per channel).
  Projection(ListenOptions options, StreamInfo info, int channel = 0)
      : options_(std::move(options)), info_(std::move(info)), channel_(channel) {}

  // Messages for the events since the last call, in order. heard_seconds: the stream
  // time the session's VAD has run over (the audio clock endpoints count on).
  std::vector<nlohmann::json> on_events(std::span<const events::Event> events, double heard_seconds);
  // The session flushed for the client's Finalize up to `at` (events::Finalized,
  // handled by on_events too): a final with from_finalize (empty when nothing was
  // pending), speech_final when a pending endpoint's silence has passed by
  // `heard_seconds`; a pending endpoint not yet due stays pending.
  std::vector<nlohmann::json> on_finalized(double at, double heard_seconds);

  // The server stops before the stream ended (its shutdown grace ran out): what the client
  // has not had as final yet, committed words held for an endpoint and the provisional
  // tail alike, as one last final (speech_final: nothing more will be heard); then the
  // projection has ended. Empty when nothing was left to send.
  std::vector<nlohmann::json> force_final();

  bool ended() const { return ended_; }  // EndOfStream or StreamError seen
  const ListenOptions& options() const { return options_; }
  const StreamInfo& info() const { return info_; }

 private:
  void emit_final(std::vector<nlohmann::json>& out, bool speech_final, bool from_finalize, double end_hint);
  void check_utterance_end(std::vector<nlohmann::json>& out, double clock);
  void finalize(std::vector<nlohmann::json>& out, double at, double clock);
  bool endpoint_due(double clock) const;

  ListenOptions options_;
  StreamInfo info_;
  int channel_ = 0;
  protocol::SpeakerGate gate_;
  std::vector<Word> pending_;      // committed, not yet sent as final
  std::vector<Word> provisional_;  // the latest tail
  std::vector<Word> last_interim_;
  double final_until_ = 0;             // end of the last final window
  std::optional<double> endpoint_at_;  // SpeechEnded waiting for `endpointing` ms of audio
  std::optional<double> anchor_;       // end of the last finalized word, UtteranceEnd not yet sent
  bool ended_ = false;
};

}  // namespace earshot::deepgram
