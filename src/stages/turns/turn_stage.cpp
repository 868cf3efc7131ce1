#include "stages/turns/turn_stage.h"

#include <cmath>
#include <vector>

#include "common/error.h"

namespace earshot::stages::turns {

namespace {

double number(const std::string& name, const std::string& value, double lo, double hi) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || !std::isfinite(v) || v < lo || v > hi) {
    char range[64];
    std::snprintf(range, sizeof range, "%g..%g", lo, hi);
    throw Error(ErrorCode::kInvalidArgument,
                "invalid parameter '" + name + "': '" + value + "' is not a number in " + range);
  }
  return v;
}

}  // namespace

std::optional<TurnSettings> settings_for(const std::map<std::string, std::string>& params,
                                         const TurnSettings& defaults) {
  TurnSettings s = defaults;
  auto get = [&](const char* key) -> const std::string* {
    const auto it = params.find(key);
    return it == params.end() ? nullptr : &it->second;
  };
  if (const std::string* v = get("turns")) {
    if (*v == "false" || *v == "off") return std::nullopt;
    if (*v != "true" && *v != "on")
      throw Error(ErrorCode::kInvalidArgument, "invalid parameter 'turns': '" + *v + "' is not true or false");
  }
  if (const std::string* v = get("turn_eagerness")) {
    if (*v == "low") {
      s.eot_threshold = 0.85;
      s.timeout_seconds = 8;
    } else if (*v == "medium" || *v == "auto") {
      s.eot_threshold = 0.7;
      s.timeout_seconds = 4;
    } else if (*v == "high") {
      s.eot_threshold = 0.55;
      s.timeout_seconds = 2;
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "invalid parameter 'turn_eagerness': '" + *v + "' is not low, medium, high or auto");
    }
  }
  if (const std::string* v = get("eot_threshold")) s.eot_threshold = number("eot_threshold", *v, 0.5, 1.0);
  if (const std::string* v = get("eot_timeout_ms")) s.timeout_seconds = number("eot_timeout_ms", *v, 500, 60000) / 1000;
  if (const std::string* v = get("eager_eot_threshold")) {
    s.eager_eot_threshold = number("eager_eot_threshold", *v, 0.3, 0.9);
    if (*s.eager_eot_threshold > s.eot_threshold)
      throw Error(ErrorCode::kInvalidArgument, "invalid parameter 'eager_eot_threshold': " + *v +
                                                   " is above eot_threshold (an eager end comes first)");
  }
  if (const std::string* v = get("turn_silence_ms")) s.silence_seconds = number("turn_silence_ms", *v, 0, 60000) / 1000;
  return s;
}

TurnStage::TurnStage(TurnSettings settings, std::unique_ptr<TurnScorer> scorer)
    : scorer_(std::move(scorer)), detector_(settings, scorer_.get()) {}

void TurnStage::consume(const events::Event& event, const std::function<void(events::Event)>& emit) {
  // Words that open or resume a turn come after its event; the end of the stream after the turn's end.
  const bool turn_first = std::holds_alternative<events::WordsCommitted>(event) ||
                          std::holds_alternative<events::ProvisionalChanged>(event) ||
                          std::holds_alternative<events::EndOfStream>(event);
  if (turn_first) {
    detector_.on_event(event, emit);
    emit(event);
    return;
  }
  emit(event);
  detector_.on_event(event, emit);
}

void TurnStage::advance(double heard, const std::function<void(events::Event)>& emit) {
  detector_.advance(heard, emit);
}

}  // namespace earshot::stages::turns
