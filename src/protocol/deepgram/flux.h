// Deepgram Flux (/v2/listen), the turn-based live API voice agents use (LiveKit's
// STTv2, Pipecat's Flux service): options, messages and the projection of a
// session's events, turn events (stages/turns) included. Pure code; the server's
// adapter (server/flux_adapter.h) puts the transport around it.
//
// Server messages (shapes as Deepgram's Flux reference and SDKs give them):
//   Connected  {type, request_id, sequence_id}
//   TurnInfo   {type, request_id, sequence_id, event, turn_index, audio_window_start,
//               audio_window_end, transcript, words [{word, confidence, start, end}],
//               end_of_turn_confidence}
//              event: StartOfTurn, Update, EagerEndOfTurn, TurnResumed, EndOfTurn
//              (EndOfTurn adds trigger: "manual" after a ForceEndTurn, else "model")
//   ConfigureSuccess {type, request_id, sequence_id, thresholds {eot_threshold,
//               eager_eot_threshold (when on), eot_timeout_ms}, keyterms}: what the
//               stream runs with from the audio after the Configure on
//   ConfigureFailure {type, request_id, sequence_id, description}: nothing changed
//   Error      {type, sequence_id, code, description}
// sequence_id counts every message sent, from 0. The state machine: StartOfTurn opens
// turn turn_index; Update about every 0.25 s of transcribed audio while nothing else
// is sent; EagerEndOfTurn (with eager_eot_threshold, never with an empty transcript)
// then TurnResumed or EndOfTurn with the same transcript; turn_index counts up after
// EndOfTurn. Words (start/end are an addition: seconds of the stream) are the turn's
// committed words and, in StartOfTurn, Update and TurnResumed, its provisional tail.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "events/event.h"
#include "protocol/deepgram/messages.h"
#include "protocol/deepgram/options.h"

namespace earshot::deepgram {

struct FluxOptions {
  ListenOptions listen;                       // model, encoding, sample_rate (what /v1/listen reads alike)
  std::optional<double> eot_threshold;        // 0.5..1.0
  std::optional<double> eager_eot_threshold;  // 0.3..0.9, at most eot_threshold
  std::optional<int> eot_timeout_ms;          // 500..60000
};

// Reads a /v2/listen query (`pairs` as parse_listen_options takes them: keyterm
// repeats). Unknown keys (tag, mip_opt_out, language_hint...) are ignored; bad values
// are Error(kInvalidArgument) naming the option.
FluxOptions parse_flux_options(const std::map<std::string, std::string>& query,
                               const std::vector<std::pair<std::string, std::string>>& pairs = {});
// The turn stage's parameters for these options (stages/turns/turn_stage.h's names).
std::map<std::string, std::string> flux_stage_params(const FluxOptions& options);

enum class FluxClientMessage { kCloseStream, kKeepAlive, kForceEndTurn, kConfigure };
// Throws Error(kInvalidArgument) for anything else.
FluxClientMessage parse_flux_client_message(std::string_view text);

// A Configure message over the stream's options: {"type":"Configure","thresholds":
// {eot_threshold, eager_eot_threshold, eot_timeout_ms} (each optional),"keyterms":
// [...] (optional: the whole new list)}; other keys are ignored. The options that
// follow, checked as the query's (an eager threshold above the end threshold
// included); Error(kInvalidArgument) naming the field otherwise. `keyterms_changed`:
// the message lists keyterms other than the stream's.
FluxOptions apply_flux_configure(const FluxOptions& current, std::string_view text, bool* keyterms_changed);

class FluxProjection {
 public:
  explicit FluxProjection(StreamInfo info) : info_(std::move(info)) {}

  nlohmann::json connected();
  // Messages for the events since the last call. heard_seconds: the stream time the
  // session's VAD has heard (audio_window_end, the clock of Update's cadence).
  std::vector<nlohmann::json> on_events(std::span<const events::Event> events, double heard_seconds);
  // The settings in effect (the turn stage's parameters, stages/turns' names) and the keyterms.
  nlohmann::json configure_success(const std::map<std::string, std::string>& turn_params, const Keyterms& keyterms);
  nlohmann::json configure_failure(const std::string& description);
  nlohmann::json error(const std::string& code, const std::string& description);
  bool ended() const { return ended_; }
  const StreamInfo& info() const { return info_; }

 private:
  nlohmann::json turn_info(const char* event, bool with_tail, double confidence);
  std::vector<Word> turn_words(bool with_tail) const;

  StreamInfo info_;
  int sequence_ = 0;
  int turn_index_ = 0;
  bool in_turn_ = false;
  double turn_start_ = 0;
  double heard_ = 0;
  double last_sent_heard_ = 0;
  std::vector<Word> committed_;  // the open turn's
  std::vector<Word> tail_;
  bool ended_ = false;
};

}  // namespace earshot::deepgram
