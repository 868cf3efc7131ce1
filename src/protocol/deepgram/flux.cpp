#include "protocol/deepgram/flux.h"

#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace earshot::deepgram {

namespace {

using json = nlohmann::json;

double ranged(const std::map<std::string, std::string>& query, const char* key, double lo, double hi) {
  const std::string& text = query.at(key);
  double v = NAN;
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) v = NAN;
  } catch (const std::exception&) {
  }
  if (!(v >= lo && v <= hi)) {
    char range[64];
    std::snprintf(range, sizeof range, "%g-%g", lo, hi);
    throw Error(ErrorCode::kInvalidArgument,
                std::string("invalid option '") + key + "': expected a number in " + range + ", got '" + text + "'");
  }
  return v;
}

std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// Both given: the eager end comes first. With eot_threshold left to the server, the
// turn stage checks the pair against the server's default (--eot-threshold).
void check_eager(const FluxOptions& o, const char* what) {
  if (o.eager_eot_threshold && o.eot_threshold && *o.eager_eot_threshold > *o.eot_threshold)
    throw Error(ErrorCode::kInvalidArgument,
                std::string("invalid ") + what + " 'eager_eot_threshold': " + number_text(*o.eager_eot_threshold) +
                    " is above eot_threshold (" + number_text(*o.eot_threshold) + "): the eager end comes first");
}

}  // namespace

FluxOptions parse_flux_options(const std::map<std::string, std::string>& query,
                               const std::vector<std::pair<std::string, std::string>>& pairs) {
  FluxOptions o;
  std::map<std::string, std::string> listen = query;
  listen.erase("language");  // Flux has no language option (flux-general-multi: language_hint)
  std::vector<std::pair<std::string, std::string>> listen_pairs;
  for (const auto& p : pairs)
    if (p.first != "language") listen_pairs.push_back(p);
  o.listen = parse_listen_options(listen, listen_pairs);
  if (query.count("eot_threshold")) o.eot_threshold = ranged(query, "eot_threshold", 0.5, 1.0);
  if (query.count("eager_eot_threshold")) o.eager_eot_threshold = ranged(query, "eager_eot_threshold", 0.3, 0.9);
  if (query.count("eot_timeout_ms"))
    o.eot_timeout_ms = static_cast<int>(std::lround(ranged(query, "eot_timeout_ms", 500, 60000)));
  check_eager(o, "option");
  return o;
}

FluxOptions apply_flux_configure(const FluxOptions& current, std::string_view text, bool* keyterms_changed) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(ErrorCode::kInvalidArgument, "Configure must be a JSON object");
  FluxOptions o = current;
  if (j.contains("thresholds")) {
    const json& t = j["thresholds"];
    if (!t.is_object())
      throw Error(ErrorCode::kInvalidArgument,
                  "invalid 'thresholds': expected an object with eot_threshold, eager_eot_threshold, eot_timeout_ms");
    auto number = [&](const char* key, double lo, double hi) -> std::optional<double> {
      if (!t.contains(key) || t[key].is_null()) return std::nullopt;
      if (!t[key].is_number() || !(t[key].get<double>() >= lo && t[key].get<double>() <= hi)) {
        char range[64];
        std::snprintf(range, sizeof range, "%g-%g", lo, hi);
        std::string got = t[key].dump();
        if (got.size() > 40) got = t[key].is_string() ? "a string" : t[key].type_name();  // no long echo
        throw Error(ErrorCode::kInvalidArgument,
                    std::string("invalid threshold '") + key + "': expected a number in " + range + ", got " + got);
      }
      return t[key].get<double>();
    };
    if (auto v = number("eot_threshold", 0.5, 1.0)) o.eot_threshold = v;
    if (auto v = number("eager_eot_threshold", 0.3, 0.9)) o.eager_eot_threshold = v;
    if (auto v = number("eot_timeout_ms", 500, 60000)) o.eot_timeout_ms = static_cast<int>(std::lround(*v));
  }
  check_eager(o, "threshold");
  bool changed = false;
  if (j.contains("keyterms")) {
    const json& k = j["keyterms"];
    if (!k.is_array()) throw Error(ErrorCode::kInvalidArgument, "invalid 'keyterms': expected an array of strings");
    Keyterms next;
    for (const json& term : k) {
      if (!term.is_string())
        throw Error(ErrorCode::kInvalidArgument, "invalid 'keyterms': expected an array of strings");
      next.add(term.get<std::string>());
    }
    next.check_limits("keyterms");
    changed = !(next == current.listen.keyterms);
  }
  if (keyterms_changed) *keyterms_changed = changed;
  return o;
}

std::map<std::string, std::string> flux_stage_params(const FluxOptions& options) {
  std::map<std::string, std::string> p{{"turns", "true"}, {"diarize", "false"}};
  if (options.eot_threshold) p["eot_threshold"] = number_text(*options.eot_threshold);
  if (options.eager_eot_threshold) p["eager_eot_threshold"] = number_text(*options.eager_eot_threshold);
  if (options.eot_timeout_ms) p["eot_timeout_ms"] = std::to_string(*options.eot_timeout_ms);
  return p;
}

FluxClientMessage parse_flux_client_message(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw Error(
        ErrorCode::kInvalidArgument,
        "text messages must be JSON objects with a \"type\": CloseStream, KeepAlive, ForceEndTurn or Configure");
  const std::string type = j["type"];
  if (type == "CloseStream") return FluxClientMessage::kCloseStream;
  if (type == "KeepAlive") return FluxClientMessage::kKeepAlive;
  if (type == "ForceEndTurn") return FluxClientMessage::kForceEndTurn;
  if (type == "Configure") return FluxClientMessage::kConfigure;
  throw Error(ErrorCode::kInvalidArgument,
              "unknown message type '" + type + "': expected CloseStream, KeepAlive, ForceEndTurn or Configure");
}

json FluxProjection::connected() {
  return {{"type", "Connected"}, {"request_id", info_.request_id}, {"sequence_id", sequence_++}};
}

json FluxProjection::configure_success(const std::map<std::string, std::string>& turn_params,
                                       const Keyterms& keyterms) {
  json thresholds = json::object();
  auto put = [&](const char* key, bool integer) {
    const auto it = turn_params.find(key);
    if (it == turn_params.end()) return;
    const double v = std::stod(it->second);
    if (integer)
      thresholds[key] = std::lround(v);
    else
      thresholds[key] = v;
  };
  put("eot_threshold", false);
  put("eager_eot_threshold", false);
  put("eot_timeout_ms", true);
  json terms = json::array();
  for (const Keyterm& k : keyterms.terms) terms.push_back(k.text);
  return {{"type", "ConfigureSuccess"},
          {"request_id", info_.request_id},
          {"sequence_id", sequence_++},
          {"thresholds", thresholds},
          {"keyterms", terms}};
}

json FluxProjection::configure_failure(const std::string& description) {
  return {{"type", "ConfigureFailure"},
          {"request_id", info_.request_id},
          {"sequence_id", sequence_++},
          {"description", description}};
}

json FluxProjection::error(const std::string& code, const std::string& description) {
  return {{"type", "Error"}, {"sequence_id", sequence_++}, {"code", code}, {"description", description}};
}

std::vector<Word> FluxProjection::turn_words(bool with_tail) const {
  std::vector<Word> words = committed_;
  if (with_tail) words.insert(words.end(), tail_.begin(), tail_.end());
  return words;
}

json FluxProjection::turn_info(const char* event, bool with_tail, double confidence) {
  const std::vector<Word> words = turn_words(with_tail);
  std::string transcript;
  json list = json::array();
  for (const Word& w : words) {
    std::string text = w.text;
    while (!text.empty() && text.front() == ' ') text.erase(text.begin());
    if (text.empty()) continue;
    transcript += (transcript.empty() ? "" : " ") + text;
    list.push_back({{"word", text},
                    {"confidence", w.probability < 0 ? 0.0 : static_cast<double>(w.probability)},
                    {"start", w.start},
                    {"end", w.end}});
  }
  last_sent_heard_ = heard_;
  return {{"type", "TurnInfo"},
          {"request_id", info_.request_id},
          {"sequence_id", sequence_++},
          {"event", event},
          {"turn_index", turn_index_},
          {"audio_window_start", turn_start_},
          {"audio_window_end", std::max(turn_start_, heard_)},
          {"transcript", transcript},
          {"words", list},
          {"end_of_turn_confidence", confidence}};
}

std::vector<json> FluxProjection::on_events(std::span<const events::Event> events, double heard_seconds) {
  std::vector<json> out;
  heard_ = std::max(heard_, heard_seconds);
  bool changed = false;
  for (const events::Event& event : events) {
    if (ended_) break;
    if (const auto* w = std::get_if<events::WordsCommitted>(&event)) {
      committed_.insert(committed_.end(), w->words.begin(), w->words.end());
      changed = true;
    } else if (const auto* p = std::get_if<events::ProvisionalChanged>(&event)) {
      tail_ = p->words;
      changed = true;
    } else if (const auto* t = std::get_if<events::TurnStarted>(&event)) {
      in_turn_ = true;
      turn_index_ = t->turn;
      turn_start_ = t->at;
      // Words that came before the turn opened (a turn opened by its first word) are its own.
      std::vector<Word> kept;
      for (const Word& w : committed_)
        if (w.end > t->at) kept.push_back(w);
      committed_ = std::move(kept);
      out.push_back(turn_info("StartOfTurn", true, 0.0));
      changed = false;
    } else if (const auto* t = std::get_if<events::TurnEndLikely>(&event)) {
      if (!in_turn_) continue;
      out.push_back(turn_info("EagerEndOfTurn", false, t->confidence));
      changed = false;
    } else if (std::holds_alternative<events::TurnResumed>(event)) {
      if (!in_turn_) continue;
      out.push_back(turn_info("TurnResumed", true, 0.0));
      changed = false;
    } else if (const auto* t = std::get_if<events::TurnEnded>(&event)) {
      if (!in_turn_) continue;
      json end = turn_info("EndOfTurn", false, t->confidence);
      // Flux documents two triggers: "manual" for a ForceEndTurn (our finalize), "model" for its own
      // decisions; earshot's silence, semantic and timeout ends are the latter.
      end["trigger"] = t->evidence.reason == "finalize" ? "manual" : "model";
      out.push_back(std::move(end));
      in_turn_ = false;
      committed_.clear();
      turn_index_ = t->turn + 1;
      changed = false;
    } else if (const auto* e = std::get_if<events::StreamError>(&event)) {
      const bool audio = e->message.rfind("invalid audio", 0) == 0;
      out.push_back(error(audio ? "INVALID_AUDIO" : "INTERNAL_SERVER_ERROR", e->message));
      ended_ = true;
    } else if (std::holds_alternative<events::EndOfStream>(event)) {
      ended_ = true;
    }
  }
  // Update: about every 0.25 s of audio while the turn is open and nothing else was sent.
  (void)changed;
  if (!ended_ && in_turn_ && heard_ - last_sent_heard_ >= 0.25) out.push_back(turn_info("Update", true, 0.0));
  return out;
}

}  // namespace earshot::deepgram
