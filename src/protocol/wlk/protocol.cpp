#include "protocol/wlk/protocol.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.h"
#include "common/text.h"
#include "common/utf8.h"

namespace earshot::protocol::wlk {

namespace {

const char* status_of(const Snapshot& snap) {
  if (!snap.error.empty()) return "error";
  if (snap.lines.empty() && snap.buffer_transcription.empty() && snap.buffer_diarization.empty())
    return "no_audio_detected";
  return "active_transcription";
}

// The lag figures of an update (they follow the wall clock).
nlohmann::json lag_fields(const Snapshot& snap) {
  return {{"remaining_time_transcription", snap.lag_transcription()},
          {"remaining_time_transcription_processing", snap.lag_processing()},
          {"remaining_time_transcription_policy", snap.lag_policy()},
          {"remaining_time_diarization", 0.0}};
}

// Everything of an update except the lines and the lag figures: status, buffers.
nlohmann::json scalars(const Snapshot& snap) {
  nlohmann::json j;
  j["status"] = status_of(snap);
  if (!snap.error.empty()) j["error"] = snap.error;
  j["buffer_transcription"] = snap.buffer_transcription;
  j["buffer_diarization"] = snap.buffer_diarization;
  j["buffer_translation"] = snap.buffer_translation;
  // An addition to the protocol: audio the server skipped to stay live (seconds, the stream's total).
  if (snap.skipped_seconds > 0) j["skipped_seconds"] = std::round(snap.skipped_seconds * 100.0) / 100.0;
  // An addition: the speaker's turn (stages/turns), when the server detects turns.
  if (snap.turn)
    j["turn"] = {
        {"index", snap.turn->index}, {"state", snap.turn->state}, {"at", std::round(snap.turn->at * 100.0) / 100.0}};
  return j;
}

nlohmann::json lines_json(const std::vector<Line>& lines, size_t first = 0) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = first; i < lines.size(); ++i) {
    if (lines[i].text.empty() && lines[i].speaker != -2) continue;  // empty non-silence lines are dropped
    out.push_back(line_json(lines[i]));
  }
  return out;
}

}  // namespace

std::string format_protocol_time(double seconds) {
  long centis = std::lround(std::max(0.0, seconds) * 100.0);
  long hours = centis / 360000;
  long minutes = centis / 6000 % 60;
  long secs = centis / 100 % 60;
  char text[48];
  std::snprintf(text, sizeof text, "%ld:%02ld:%02ld.%02ld", hours, minutes, secs, centis % 100);
  return text;
}

StreamParams parse_stream_params(const std::map<std::string, std::string>& query, const std::string& default_language) {
  StreamParams p;
  auto get = [&](const char* key) -> std::optional<std::string> {
    auto it = query.find(key);
    if (it == query.end()) return std::nullopt;
    return it->second;
  };
  p.language = get("language").value_or("");
  if (p.language.empty()) p.language = default_language.empty() ? "auto" : default_language;
  p.target_language = get("target_language").value_or("");
  std::string mode = get("mode").value_or("full");
  if (mode == "diff") {
    p.diff_mode = true;
  } else if (mode != "full" && !mode.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "invalid mode " + quote_client_text(mode) + ": expected 'full' or 'diff'");
  }
  p.token = get("token").value_or("");
  if (const std::optional<std::string> delay = get("delay_ms")) {
    const std::optional<int> ms = parse_whole_number(*delay, 1, 60000);
    if (!ms)
      throw Error(ErrorCode::kInvalidArgument, "invalid delay_ms " + quote_client_text(*delay) +
                                                   ": expected milliseconds, a whole number from 1 to 60000");
    p.delay_ms = *ms;
  }
  return p;
}

nlohmann::json config_message(bool use_audio_worklet, bool diff_mode) {
  return {{"type", "config"}, {"useAudioWorklet", use_audio_worklet}, {"mode", diff_mode ? "diff" : "full"}};
}

// The message may quote the client's bytes (a query value): made valid UTF-8, or
// dump() would throw out of the connection's handler.
nlohmann::json error_message(const std::string& message) {
  return {{"type", "error"}, {"error", to_valid_utf8(message)}};
}

nlohmann::json ready_to_stop_message() { return {{"type", "ready_to_stop"}}; }

nlohmann::json line_json(const Line& line) {
  nlohmann::json j;
  j["speaker"] = line.speaker;
  j["text"] = line.text;
  j["start"] = format_protocol_time(line.start);
  j["end"] = format_protocol_time(line.end);
  if (!line.translation.empty()) j["translation"] = line.translation;
  if (!line.detected_language.empty()) j["detected_language"] = line.detected_language;
  if (line.skipped) j["skipped"] = true;
  return j;
}

nlohmann::json full_update(const Snapshot& snap) {
  nlohmann::json j = scalars(snap);
  j.update(lag_fields(snap));
  j["lines"] = lines_json(snap.lines);
  return j;
}

bool UpdateEncoder::lags_due(std::optional<double> now) const {
  return !now || !last_sent_at_ || *now - *last_sent_at_ >= lag_refresh_;
}

std::optional<nlohmann::json> UpdateEncoder::next(const Snapshot& snap, bool force, std::optional<double> now) {
  const bool lags_may_go = lags_due(now);
  nlohmann::json lags = lag_fields(snap);
  std::optional<nlohmann::json> out;
  if (diff_mode_) {
    out = next_diff(snap, force, lags_may_go && lags != last_lags_);
  } else {
    nlohmann::json update = scalars(snap);
    update["lines"] = lines_json(snap.lines);
    std::string text = update.dump();
    if (force || text != last_full_ || (lags_may_go && lags != last_lags_)) {
      last_full_ = std::move(text);
      update.update(lags);
      ++seq_;
      out = std::move(update);
    }
  }
  if (out) {
    last_lags_ = std::move(lags);
    if (now) last_sent_at_ = now;
  }
  return out;
}

std::optional<nlohmann::json> UpdateEncoder::next_diff(const Snapshot& snap, bool force, bool lags_changed) {
  // Diff mode keeps only the lines of the last `retention_` seconds.
  double latest = 0;
  for (const Line& line : snap.lines) latest = std::max(latest, line.end);
  size_t first = first_retained_;
  while (first < snap.lines.size() && snap.lines[first].end < latest - retention_) ++first;
  std::vector<nlohmann::json> current = lines_json(snap.lines, first);
  nlohmann::json rest = scalars(snap);

  if (seq_ == 0) {
    nlohmann::json message = {{"type", "snapshot"}, {"seq", ++seq_}};
    message.update(rest);
    message.update(lag_fields(snap));
    message["lines"] = current;
    first_retained_ = first;
    sent_ = std::move(current);
    last_scalars_ = std::move(rest);
    return message;
  }
  // Lines pruned since the last message: they were the first ones the client holds.
  size_t pruned = 0;
  for (size_t i = first_retained_; i < first; ++i) {
    if (!snap.lines[i].text.empty() || snap.lines[i].speaker == -2) ++pruned;
  }
  pruned = std::min(pruned, sent_.size());
  size_t common = 0;
  while (common < current.size() && pruned + common < sent_.size() && sent_[pruned + common] == current[common])
    ++common;
  const bool lines_same = pruned == 0 && common == current.size() && common == sent_.size();
  if (!force && lines_same && rest == last_scalars_ && !lags_changed) return std::nullopt;

  nlohmann::json message = {{"type", "diff"}, {"seq", ++seq_}};
  message["status"] = rest["status"];
  if (rest.contains("error")) message["error"] = rest["error"];
  message["n_lines"] = current.size();
  if (pruned > 0) message["lines_pruned"] = pruned;
  if (common < current.size()) {
    message["new_lines"] = nlohmann::json(
        std::vector<nlohmann::json>(current.begin() + static_cast<std::ptrdiff_t>(common), current.end()));
  }
  for (auto& [key, value] : rest.items()) {
    if (key != "status" && key != "error") message[key] = value;
  }
  message.update(lag_fields(snap));
  first_retained_ = first;
  sent_ = std::move(current);
  last_scalars_ = std::move(rest);
  return message;
}

}  // namespace earshot::protocol::wlk
