// The WhisperLiveKit wire protocol as data: query parameters of /asr, the
// config message, full updates and the diff mode (snapshot/diff/seq). Pure
// functions over a Snapshot (lines, buffers and the stream's status), which
// wlk::Projection builds from a session's events. No networking, so every
// message shape is testable on its own.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "session/stream_session.h"

namespace earshot::protocol::wlk {

// "H:MM:SS.cc" as the WhisperLiveKit protocol writes times.
std::string format_protocol_time(double seconds);

struct Line {
  int speaker = 1;  // 1-based; -2 = silence line
  std::string text;
  double start = 0;
  double end = 0;
  std::string detected_language;
  std::string translation;
  // A silence line (speaker -2) for audio the server skipped, not heard: sent
  // with "skipped": true, an addition to the protocol (clients that do not know
  // it show a silence line).
  bool skipped = false;
};

// The speaker's turn as the turn stage last judged it (stages/turns), sent as
// "turn": {"index", "state", "at"}, an addition to the protocol: state "speaking"
// (from its start at `at`), "likely_over" (an eager end: its speech ended at `at`)
// or "ended" (at `at`).
struct TurnView {
  int index = 0;
  std::string state;
  double at = 0;
  friend bool operator==(const TurnView&, const TurnView&) = default;
};

// What one update shows: every line so far, the buffers, and the status scalars
// (with their lag figures).
struct Snapshot : session::StreamStatus {
  std::vector<Line> lines;
  std::string buffer_transcription;
  std::string buffer_diarization;
  std::string buffer_translation;
  std::optional<TurnView> turn;  // none before the first turn event
};

struct StreamParams {
  std::string language;         // "auto" or a code
  std::string target_language;  // "" when none
  bool diff_mode = false;
  std::string token;  // from the query; "" when absent
  // earshot's own: how far the text may trail the audio, in ms, for a model that
  // lets a stream choose (Voxtral Realtime); 0 = the server's.
  int delay_ms = 0;
};
// Reads language / target_language / mode / token / delay_ms. Unknown parameters
// are ignored, like the reference server. Throws Error(kInvalidArgument) for a
// mode other than full/diff and a delay_ms that is no whole number of ms.
StreamParams parse_stream_params(const std::map<std::string, std::string>& query, const std::string& default_language);

nlohmann::json config_message(bool use_audio_worklet, bool diff_mode);
nlohmann::json error_message(const std::string& message);
nlohmann::json ready_to_stop_message();

// A full-mode update (no "type" key) with every line of the snapshot.
nlohmann::json full_update(const Snapshot& snapshot);
nlohmann::json line_json(const Line& line);

// Produces the stream of update messages for one connection: full updates, or
// in diff mode a snapshot first and then diffs. next() returns nothing when the
// message would equal the previous one, unless forced (the final update).
// The lag figures follow the wall clock, so they change at every check: a change
// of the lag figures alone is sent at most once per `lag_refresh_seconds` of
// `now` (the caller's clock, seconds; nullopt: at every check). A full-mode
// update carries every line, so sending it only when something else changed
// keeps a long stream's traffic proportional to its changes, not to its length.
class UpdateEncoder {
 public:
  explicit UpdateEncoder(bool diff_mode, double diff_retention_seconds = 300.0, double lag_refresh_seconds = 1.0)
      : diff_mode_(diff_mode), retention_(diff_retention_seconds), lag_refresh_(lag_refresh_seconds) {}
  std::optional<nlohmann::json> next(const Snapshot& snapshot, bool force = false,
                                     std::optional<double> now = std::nullopt);
  uint64_t seq() const { return seq_; }

 private:
  std::optional<nlohmann::json> next_diff(const Snapshot& snapshot, bool force, bool lags_changed);
  // Whether a change of the lag figures alone may be sent at `now` (and notes the send).
  bool lags_due(std::optional<double> now) const;

  bool diff_mode_;
  double retention_;
  double lag_refresh_;
  std::optional<double> last_sent_at_;  // `now` of the last message sent
  uint64_t seq_ = 0;
  std::string last_full_;             // serialized last full update, lag figures left out
  nlohmann::json last_lags_;          // the lag figures of the last message sent
  size_t first_retained_ = 0;         // index in the session's lines of the first line the client holds
  std::vector<nlohmann::json> sent_;  // lines the client holds (diff mode)
  nlohmann::json last_scalars_;       // status and buffers of the last diff
};

}  // namespace earshot::protocol::wlk
