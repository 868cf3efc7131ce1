#include "protocol/deepgram/messages.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "common/error.h"
#include "common/text.h"
#include "common/utf8.h"

namespace earshot::deepgram {

namespace {

using nlohmann::json;

// Millisecond precision, as Deepgram sends times.
double ms(double seconds) { return std::round(seconds * 1000.0) / 1000.0; }

bool is_edge_punct(unsigned char c) { return c < 0x80 && std::ispunct(c) && c != '\''; }

// Lower-case ASCII, surrounding punctuation dropped (UTF-8 bytes pass through).
std::string plain_word(const std::string& text) {
  std::string t = trim(text);
  size_t a = 0, b = t.size();
  while (a < b && (is_edge_punct(static_cast<unsigned char>(t[a])) || t[a] == '\'')) ++a;
  while (b > a && (is_edge_punct(static_cast<unsigned char>(t[b - 1])) || t[b - 1] == '\'')) --b;
  std::string out = t.substr(a, b - a);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

double confidence_of(const Word& w) { return w.probability < 0 ? 0.0 : std::min(1.0, double(w.probability)); }

double mean_confidence(const std::vector<Word>& words) {
  if (words.empty()) return 0;
  double sum = 0;
  for (const Word& w : words) sum += confidence_of(w);
  return sum / static_cast<double>(words.size());
}

json model_info(const StreamInfo& info) {
  return {{"name", info.model_name}, {"version", info.model_version}, {"arch", info.model_arch}};
}

json metadata_fields(const StreamInfo& info, double duration, const std::string& sha256) {
  return {{"transaction_key", "deprecated"},
          {"request_id", info.request_id},
          {"sha256", sha256},
          {"created", info.created},
          {"duration", ms(duration)},
          {"channels", info.channels},
          {"models", json::array({info.model_uuid})},
          {"model_info", {{info.model_uuid, model_info(info)}}}};
}

}  // namespace

void number_speakers_from_zero(std::vector<Word>& words) {
  for (Word& w : words) w.speaker = w.speaker >= 1 ? w.speaker - 1 : -1;
}

json words_json(const std::vector<Word>& words, const ListenOptions& options) {
  json out = json::array();
  for (const Word& w : words) {
    std::string plain = plain_word(w.text);
    std::string punctuated = trim(w.text);
    if (plain.empty()) {
      // "." or "," on its own: part of the word before it, as Deepgram never sends an empty word.
      if (!out.empty() && !punctuated.empty()) {
        json& last = out.back();
        last["punctuated_word"] = last["punctuated_word"].get<std::string>() + punctuated;
        last["end"] = ms(w.end);
      }
      continue;
    }
    json j = {{"word", plain},
              {"start", ms(w.start)},
              {"end", ms(w.end)},
              {"confidence", confidence_of(w)},
              {"punctuated_word", punctuated}};
    if (!w.language.empty()) j["language"] = w.language;
    if (options.diarize && w.speaker >= 0) j["speaker"] = w.speaker;
    out.push_back(std::move(j));
  }
  return out;
}

std::string transcript(const std::vector<Word>& words, const ListenOptions& options) {
  const bool punctuated = options.punctuate || options.smart_format;
  std::string out;
  for (const Word& w : words) {
    // Keep the model's spacing (none between CJK words), replacing only the word itself.
    size_t lead = w.text.find_first_not_of(" \t");
    std::string space = lead == std::string::npos ? "" : w.text.substr(0, lead);
    std::string text = punctuated ? trim(w.text) : plain_word(w.text);
    if (text.empty()) continue;
    out += (out.empty() ? "" : space) + text;
  }
  return out;
}

json results_message(const Results& r, const ListenOptions& options, const StreamInfo& info) {
  json words = words_json(r.words, options);
  json alternative = {
      {"transcript", transcript(r.words, options)}, {"confidence", mean_confidence(r.words)}, {"words", words}};
  if (!r.words.empty() && !r.words.back().language.empty())
    alternative["languages"] = json::array({r.words.back().language});
  return {{"type", "Results"},
          {"channel_index", json::array({r.channel, info.channels})},
          {"duration", ms(r.duration)},
          {"start", ms(r.start)},
          {"is_final", r.is_final},
          {"speech_final", r.speech_final},
          {"from_finalize", r.from_finalize},
          {"channel", {{"alternatives", json::array({alternative})}}},
          {"metadata",
           {{"request_id", info.request_id}, {"model_info", model_info(info)}, {"model_uuid", info.model_uuid}}}};
}

json metadata_message(const StreamInfo& info, double duration, const std::string& sha256, double skipped_seconds) {
  json j = {{"type", "Metadata"}};
  j.update(metadata_fields(info, duration, sha256));
  if (skipped_seconds > 0) j["skipped_seconds"] = skipped_seconds;
  return j;
}

json audio_skipped_message(double start, double end) {
  char text[160];
  std::snprintf(text, sizeof text,
                "audio from %.2f s to %.2f s was skipped: the server fell too far behind the stream "
                "(send audio no faster than real time, or use a less loaded server)",
                start, end);
  return {{"type", "Warning"}, {"variant", "audio_skipped"}, {"description", text}, {"message", text},
          {"start", start},    {"duration", end - start}};
}

json speech_started_message(double timestamp, int channel) {
  return {{"type", "SpeechStarted"}, {"channel", json::array({channel})}, {"timestamp", ms(timestamp)}};
}

json utterance_end_message(double last_word_end, int channel, int channels) {
  return {
      {"type", "UtteranceEnd"}, {"channel", json::array({channel, channels})}, {"last_word_end", ms(last_word_end)}};
}

// Descriptions quote what the client sent (an option's value), which may be any bytes:
// made valid UTF-8, or dump() would throw out of the connection's handler.
json error_message(const std::string& description) {
  const std::string text = to_valid_utf8(description);
  return {{"type", "Error"}, {"description", text}, {"message", text}, {"variant", "earshot"}};
}

json prerecorded_response(const std::vector<Word>& words, double duration, const std::string& language,
                          const ListenOptions& options, const StreamInfo& info, const std::string& sha256) {
  return prerecorded_response(std::vector<ChannelTranscript>{{words, language}}, duration, options, info, sha256);
}

json prerecorded_response(const std::vector<ChannelTranscript>& channels, double duration, const ListenOptions& options,
                          const StreamInfo& info, const std::string& sha256) {
  json out = json::array();
  for (const ChannelTranscript& c : channels) {
    json alternative = {{"transcript", transcript(c.words, options)},
                        {"confidence", mean_confidence(c.words)},
                        {"words", words_json(c.words, options)}};
    json channel = {{"alternatives", json::array({alternative})}};
    if (!c.language.empty()) channel["detected_language"] = c.language;
    out.push_back(std::move(channel));
  }
  return {{"metadata", metadata_fields(info, duration, sha256)}, {"results", {{"channels", out}}}};
}

json rest_error(const std::string& code, const std::string& message, const std::string& request_id) {
  return {{"err_code", code}, {"err_msg", to_valid_utf8(message)}, {"request_id", request_id}};
}

ClientMessage parse_client_message(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw Error(ErrorCode::kInvalidArgument,
                "text messages must be JSON objects with a \"type\": KeepAlive, Finalize or CloseStream");
  const std::string type = j["type"];
  if (type == "KeepAlive") return ClientMessage::kKeepAlive;
  if (type == "Finalize") return ClientMessage::kFinalize;
  if (type == "CloseStream") return ClientMessage::kCloseStream;
  throw Error(ErrorCode::kInvalidArgument,
              "unknown message type " + quote_client_text(type) + ": expected KeepAlive, Finalize or CloseStream");
}

}  // namespace earshot::deepgram
