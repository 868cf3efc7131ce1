#include "protocol/openai_realtime/session.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/utf8.h"

namespace earshot::openai_realtime {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw RealtimeError("invalid_value", "invalid '" + param + "': " + message, param);
}

const json* field(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string string_of(const json& value, const std::string& param) {
  if (!value.is_string()) bad(param, "expected a string, got " + std::string(value.type_name()));
  return value.get<std::string>();
}

double number_of(const json& value, const std::string& param, double min, double max) {
  if (!value.is_number()) bad(param, "expected a number, got " + std::string(value.type_name()));
  const double v = value.get<double>();
  if (!(v >= min && v <= max)) bad(param, "out of range (" + json(min).dump() + " to " + json(max).dump() + ")");
  return v;
}

int int_of(const json& value, const std::string& param, int min, int max) {
  const double v = number_of(value, param, min, max);
  if (v != std::floor(v)) bad(param, "expected a whole number of milliseconds");
  return static_cast<int>(v);
}

bool bool_of(const json& value, const std::string& param) {
  if (!value.is_boolean()) bad(param, "expected true or false");
  return value.get<bool>();
}

// ISO-639-1 (or -3), a region allowed and dropped: "en", "en-US" -> "en"; "" = the server's default.
std::string language_of(const json& value, const std::string& param) {
  std::string v = string_of(value, param);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (v.empty()) return v;
  const std::string code = v.substr(0, v.find_first_of("-_"));
  if (code.size() < 2 || code.size() > 3 ||
      !std::all_of(code.begin(), code.end(), [](unsigned char c) { return std::isalpha(c); }))
    bad(param, "expected a language code such as en, got '" + to_valid_utf8(v) + "'");
  return code;
}

void read_transcription(SessionConfig& c, const json& t, const std::string& path) {
  if (t.is_null()) return;  // earshot always transcribes: nothing to turn off
  if (!t.is_object()) bad(path, "expected an object");
  if (auto v = field(t, "model")) c.model = string_of(*v, path + ".model");
  if (auto v = field(t, "prompt")) c.prompt = string_of(*v, path + ".prompt");
  if (auto v = field(t, "delay")) c.delay = string_of(*v, path + ".delay");
  if (auto v = field(t, "keywords"); v && !v->is_null()) {
    if (!v->is_array()) bad(path + ".keywords", "expected an array of strings");
    c.keywords.clear();
    for (const json& k : *v) c.keywords.push_back(string_of(k, path + ".keywords[]"));
  }
  if (auto v = field(t, "language"); v && !v->is_null()) {
    c.language = language_of(*v, path + ".language");
  } else if (auto l = field(t, "languages"); l && l->is_array() && !l->empty()) {
    c.language = language_of(l->front(), path + ".languages[0]");
  }
}

void read_turn_detection(SessionConfig& c, const json& t, const std::string& path) {
  if (t.is_null()) {
    c.turn.type = TurnType::kNone;
    return;
  }
  if (!t.is_object()) bad(path, "expected an object or null");
  TurnDetection d;  // the defaults, then what is given
  std::string type = "server_vad";
  if (auto v = field(t, "type")) type = string_of(*v, path + ".type");
  if (type == "server_vad")
    d.type = TurnType::kServerVad;
  else if (type == "semantic_vad")
    d.type = TurnType::kSemanticVad;
  else
    bad(path + ".type", "expected server_vad or semantic_vad, got '" + to_valid_utf8(type) + "'");
  if (auto v = field(t, "threshold")) d.threshold = number_of(*v, path + ".threshold", 0, 1);
  if (auto v = field(t, "prefix_padding_ms")) d.prefix_padding_ms = int_of(*v, path + ".prefix_padding_ms", 0, 10000);
  if (auto v = field(t, "silence_duration_ms"))
    d.silence_duration_ms = int_of(*v, path + ".silence_duration_ms", 0, 60000);
  if (auto v = field(t, "eagerness")) {
    d.eagerness = string_of(*v, path + ".eagerness");
    if (d.eagerness != "low" && d.eagerness != "medium" && d.eagerness != "high" && d.eagerness != "auto")
      bad(path + ".eagerness", "expected low, medium, high or auto");
  }
  if (auto v = field(t, "create_response")) d.create_response = bool_of(*v, path + ".create_response");
  if (auto v = field(t, "interrupt_response")) d.interrupt_response = bool_of(*v, path + ".interrupt_response");
  if (auto v = field(t, "idle_timeout_ms"); v && !v->is_null())
    d.idle_timeout_ms = int_of(*v, path + ".idle_timeout_ms", 0, 3600000);
  c.turn = d;
}

void read_include(SessionConfig& c, const json& include, const std::string& path) {
  if (include.is_null()) {
    c.logprobs = false;
    return;
  }
  if (!include.is_array()) bad(path, "expected an array");
  c.logprobs = false;
  for (const json& item : include) {
    const std::string name = string_of(item, path + "[]");
    if (name != "item.input_audio_transcription.logprobs")
      bad(path + "[]", "unknown value '" + to_valid_utf8(name) + "': expected item.input_audio_transcription.logprobs");
    c.logprobs = true;
  }
}

json turn_json(const TurnDetection& t) {
  if (t.type == TurnType::kNone) return nullptr;
  json j;
  if (t.type == TurnType::kServerVad) {
    j = {{"type", "server_vad"},
         {"threshold", t.threshold},
         {"prefix_padding_ms", t.prefix_padding_ms},
         {"silence_duration_ms", t.silence_duration_ms}};
    if (t.idle_timeout_ms) j["idle_timeout_ms"] = *t.idle_timeout_ms;
  } else {
    j = {{"type", "semantic_vad"}, {"eagerness", t.eagerness}};
  }
  if (t.create_response) j["create_response"] = *t.create_response;
  if (t.interrupt_response) j["interrupt_response"] = *t.interrupt_response;
  return j;
}

json transcription_json(const SessionConfig& c) {
  json t = {{"model", c.model}, {"prompt", c.prompt}};
  if (!c.language.empty()) t["language"] = c.language;
  if (!c.keywords.empty()) t["keywords"] = c.keywords;
  if (!c.delay.empty()) t["delay"] = c.delay;
  return t;
}

json include_json(const SessionConfig& c) {
  return c.logprobs ? json::array({"item.input_audio_transcription.logprobs"}) : json::array();
}

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

int sample_rate_of(AudioFormat format) { return format == AudioFormat::kPcm16 ? 24000 : 8000; }

Keyterms SessionConfig::keyterms() const {
  Keyterms k;
  for (const std::string& w : keywords) k.add(w);
  k.prompt = prompt;
  return k;
}

void apply_update(SessionConfig& config, const json& session, Dialect dialect, bool audio_started) {
  if (!session.is_object()) bad("session", "expected an object");
  SessionConfig c = config;
  if (dialect == Dialect::kCurrent) {
    if (auto v = field(session, "type"); v && string_of(*v, "session.type") != "transcription")
      bad("session.type",
          "earshot serves transcription sessions only: send \"type\": \"transcription\" (with "
          "/v1/realtime?intent=transcription)");
    const json* input = nullptr;
    if (auto audio = field(session, "audio"); audio && !audio->is_null()) {
      if (!audio->is_object()) bad("session.audio", "expected an object");
      if (auto in = field(*audio, "input"); in && !in->is_null()) {
        if (!in->is_object()) bad("session.audio.input", "expected an object");
        input = in;
      }
    }
    if (input) {
      if (auto f = field(*input, "format"); f && !f->is_null()) {
        if (!f->is_object()) bad("session.audio.input.format", "expected an object");
        std::string type = "audio/pcm";
        if (auto v = field(*f, "type")) type = string_of(*v, "session.audio.input.format.type");
        if (type == "audio/pcm") {
          c.format = AudioFormat::kPcm16;
          if (auto r = field(*f, "rate"); r && !(r->is_number() && r->get<double>() == 24000))
            bad("session.audio.input.format.rate", "audio/pcm is 24000 Hz");
        } else if (type == "audio/pcmu") {
          c.format = AudioFormat::kPcmu;
        } else if (type == "audio/pcma") {
          c.format = AudioFormat::kPcma;
        } else {
          bad("session.audio.input.format.type",
              "expected audio/pcm, audio/pcmu or audio/pcma, got '" + to_valid_utf8(type) + "'");
        }
      }
      if (auto v = field(*input, "transcription")) read_transcription(c, *v, "session.audio.input.transcription");
      if (auto v = field(*input, "turn_detection")) read_turn_detection(c, *v, "session.audio.input.turn_detection");
      if (auto v = field(*input, "noise_reduction")) c.noise_reduction = *v;
    }
  } else {
    if (auto v = field(session, "input_audio_format")) {
      const std::string f = string_of(*v, "session.input_audio_format");
      if (f == "pcm16")
        c.format = AudioFormat::kPcm16;
      else if (f == "g711_ulaw")
        c.format = AudioFormat::kPcmu;
      else if (f == "g711_alaw")
        c.format = AudioFormat::kPcma;
      else
        bad("session.input_audio_format", "expected pcm16, g711_ulaw or g711_alaw, got '" + to_valid_utf8(f) + "'");
    }
    if (auto v = field(session, "input_audio_transcription"))
      read_transcription(c, *v, "session.input_audio_transcription");
    if (auto v = field(session, "turn_detection")) read_turn_detection(c, *v, "session.turn_detection");
    if (auto v = field(session, "input_audio_noise_reduction")) c.noise_reduction = *v;
  }
  if (auto v = field(session, "include")) read_include(c, *v, "session.include");
  try {
    c.keyterms().check_limits(dialect == Dialect::kCurrent ? "session.audio.input.transcription.prompt"
                                                           : "session.input_audio_transcription.prompt");
  } catch (const Error& e) {
    throw RealtimeError("invalid_value", e.what(), "session.audio.input.transcription.prompt");
  }
  if (audio_started) {
    // The session's model stream is open: what it was opened with stays.
    auto locked = [&](bool changed, const std::string& param, const std::string& what) {
      if (changed)
        throw RealtimeError("session_locked",
                            what + " cannot change once audio has been appended; open a new session for another",
                            param);
    };
    const std::string base = dialect == Dialect::kCurrent ? "session.audio.input." : "session.";
    locked(c.format != config.format, base + (dialect == Dialect::kCurrent ? "format.type" : "input_audio_format"),
           "the audio format");
    const std::string t = base + (dialect == Dialect::kCurrent ? "transcription" : "input_audio_transcription");
    locked(c.language != config.language, t + ".language", "the language");
    locked(c.prompt != config.prompt || c.keywords != config.keywords, t + ".prompt", "the prompt (keyterms)");
  }
  config = std::move(c);
}

json session_json(const SessionConfig& c, Dialect dialect) {
  if (dialect == Dialect::kBeta) {
    static const char* kFormats[] = {"pcm16", "g711_ulaw", "g711_alaw"};
    return {{"id", c.id},
            {"object", "realtime.transcription_session"},
            {"modalities", json::array({"text"})},
            {"input_audio_format", kFormats[static_cast<int>(c.format)]},
            {"input_audio_transcription", transcription_json(c)},
            {"turn_detection", turn_json(c.turn)},
            {"input_audio_noise_reduction", c.noise_reduction},
            {"include", include_json(c)}};
  }
  json format;
  switch (c.format) {
    case AudioFormat::kPcm16: format = {{"type", "audio/pcm"}, {"rate", 24000}}; break;
    case AudioFormat::kPcmu: format = {{"type", "audio/pcmu"}}; break;
    case AudioFormat::kPcma: format = {{"type", "audio/pcma"}}; break;
  }
  return {{"type", "transcription"},
          {"object", "realtime.session"},
          {"id", c.id},
          {"audio",
           {{"input",
             {{"format", format},
              {"transcription", transcription_json(c)},
              {"noise_reduction", c.noise_reduction},
              {"turn_detection", turn_json(c.turn)}}}}},
          {"include", include_json(c)}};
}

ClientEvent parse_client_event(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw RealtimeError("invalid_json", "client events are JSON objects with a \"type\"");
  ClientEvent e;
  if (auto v = field(j, "event_id"); v && v->is_string()) e.event_id = v->get<std::string>();
  const json* type = field(j, "type");
  if (!type || !type->is_string()) throw RealtimeError("missing_type", "the event has no \"type\"", "type");
  e.type = type->get<std::string>();
  if (e.type == "session.update" || e.type == "transcription_session.update") {
    e.kind =
        e.type == "session.update" ? ClientEvent::Kind::kSessionUpdate : ClientEvent::Kind::kTranscriptionSessionUpdate;
    const json* session = field(j, "session");
    if (!session || !session->is_object())
      throw RealtimeError("missing_required_parameter", "the update has no \"session\" object", "session");
    e.session = *session;
  } else if (e.type == "input_audio_buffer.append") {
    e.kind = ClientEvent::Kind::kAppend;
    const json* audio = field(j, "audio");
    if (!audio || !audio->is_string())
      throw RealtimeError("missing_required_parameter", "the append has no \"audio\" (base64)", "audio");
    e.audio = audio->get<std::string>();
  } else if (e.type == "input_audio_buffer.commit") {
    e.kind = ClientEvent::Kind::kCommit;
  } else if (e.type == "input_audio_buffer.clear") {
    e.kind = ClientEvent::Kind::kClear;
  }
  return e;
}

std::vector<uint8_t> decode_base64(std::string_view text, const std::string& param) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) throw RealtimeError("invalid_value", "invalid base64 audio (length)", param);
  std::vector<uint8_t> out;
  out.reserve(text.size() * 3 / 4);
  uint32_t bits = 0;
  int count = 0;
  for (unsigned char c : text) {
    const int v = base64_value(c);
    if (v < 0) throw RealtimeError("invalid_value", "invalid base64 audio (a character outside the alphabet)", param);
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if (++count == 4) {
      out.push_back(static_cast<uint8_t>(bits >> 16));
      out.push_back(static_cast<uint8_t>(bits >> 8));
      out.push_back(static_cast<uint8_t>(bits));
      bits = 0;
      count = 0;
    }
  }
  if (count == 2) out.push_back(static_cast<uint8_t>(bits >> 4));
  if (count == 3) {
    out.push_back(static_cast<uint8_t>(bits >> 10));
    out.push_back(static_cast<uint8_t>(bits >> 2));
  }
  return out;
}

json error_event(Ids& ids, const std::string& type, const std::string& code, const std::string& message,
                 const std::string& param, const std::string& client_event_id) {
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(to_valid_utf8(s)); };
  return {{"type", "error"},
          {"event_id", ids.event()},
          {"error",
           {{"type", type},
            {"code", or_null(code)},
            {"message", to_valid_utf8(message)},
            {"param", or_null(param)},
            {"event_id", or_null(client_event_id)}}}};
}

}  // namespace earshot::openai_realtime
