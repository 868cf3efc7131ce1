#include "stages/turns/turn_stage.h"

#include <cmath>
#include <cstdio>
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

std::map<std::string, std::string> settings_params(const TurnSettings& s) {
  auto number = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return std::string(text);
  };
  std::map<std::string, std::string> p{{"eot_threshold", number(s.eot_threshold)},
                                       {"eot_timeout_ms", number(s.timeout_seconds * 1000)}};
  if (s.eager_eot_threshold) p["eager_eot_threshold"] = number(*s.eager_eot_threshold);
  if (s.silence_seconds) p["turn_silence_ms"] = number(*s.silence_seconds * 1000);
  return p;
}

TurnStage::TurnStage(TurnSettings settings, std::unique_ptr<TurnScorer> scorer, TurnSettings defaults)
    : scorer_(std::move(scorer)), defaults_(defaults), detector_(settings, scorer_.get()) {}

TurnSettings TurnStage::changed_settings(const std::map<std::string, std::string>& params) const {
  std::map<std::string, std::string> without_off = params;
  without_off.erase("turns");  // a stream's turns stay on once opened
  return *settings_for(without_off, defaults_);
}

std::map<std::string, std::string> TurnStage::check_settings(const std::map<std::string, std::string>& params) const {
  return settings_params(changed_settings(params));
}

void TurnStage::consume(const events::Event& event, const std::function<void(events::Event)>& emit) {
  if (const auto* c = std::get_if<events::SettingsChanged>(&event)) {
    // Checked when asked (check_settings): a bad set cannot arrive; if one did, the stream keeps its settings.
    try {
      detector_.set_settings(changed_settings(c->params));
    } catch (const Error&) {
    }
    emit(event);
    return;
  }
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
