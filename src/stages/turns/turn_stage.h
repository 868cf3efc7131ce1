// Turn detection as a stage of a session's chain: every event passes through
// unchanged, and the turn events (events::TurnStarted, TurnEndLikely, TurnResumed,
// TurnEnded) are added where turn_detector.h decides them, on the session's audio
// clock (Stage::advance). A turn event that opens or resumes a turn precedes the
// words that caused it; one caused by speech or a flush follows that event; a
// turn still open at the end of the stream ends just before EndOfStream.
//
// Per-stream parameters (stages::StreamRequest::params), under the names the
// protocols use (each optional; an absent one takes the server's default):
//   turns                "false" / "off": no turn events for this stream
//   eot_threshold        0.5..1.0: confidence that ends a turn (Deepgram Flux)
//   eager_eot_threshold  0.3..0.9, at most eot_threshold: turns TurnEndLikely on (Flux)
//   eot_timeout_ms       500..60000: silence that ends a turn whatever the confidence (Flux)
//   turn_silence_ms      0..60000: acoustic rule, this much silence ends a turn (OpenAI server_vad's
//                        silence_duration_ms)
//   turn_eagerness       low | medium | high | auto (OpenAI semantic_vad): eot_threshold 0.85 / 0.7 /
//                        0.55 / 0.7 with eot_timeout 8 / 4 / 2 / 4 s
// A stream may change them mid-stream (events::SettingsChanged, Flux's Configure):
// the whole set again, over the server's defaults; the open turn goes on under them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "stages/stage.h"
#include "stages/turns/turn_detector.h"

namespace earshot::stages::turns {

// The stream's settings: `defaults` (the server's) with the request's parameters over
// them; nullopt when the stream asked for no turns. Throws Error(kInvalidArgument)
// naming the parameter for a bad value.
std::optional<TurnSettings> settings_for(const std::map<std::string, std::string>& params,
                                         const TurnSettings& defaults);

// The settings as parameters (the names above; eager_eot_threshold and turn_silence_ms when set).
std::map<std::string, std::string> settings_params(const TurnSettings& settings);

class TurnStage : public Stage {
 public:
  // defaults: the server's, under which mid-stream parameters are read (settings_for).
  TurnStage(TurnSettings settings, std::unique_ptr<TurnScorer> scorer = nullptr, TurnSettings defaults = {});
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override;
  void advance(double heard, const std::function<void(events::Event)>& emit) override;
  std::map<std::string, std::string> check_settings(const std::map<std::string, std::string>& params) const override;

 private:
  // A stream's whole new set over the server's defaults (Error for a bad one).
  TurnSettings changed_settings(const std::map<std::string, std::string>& params) const;

  std::unique_ptr<TurnScorer> scorer_;
  TurnSettings defaults_;
  TurnDetector detector_;
};

}  // namespace earshot::stages::turns
