#include "protocol/deepgram/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/error.h"
#include "common/utf8.h"

namespace earshot::deepgram {

namespace {

[[noreturn]] void bad(const std::string& option, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "invalid option '" + option + "': " + why);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool parse_bool(const std::string& option, const std::string& value) {
  const std::string v = lower(value);
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  bad(option, "expected true or false, got " + quote_client_text(value));
}

int parse_int(const std::string& option, const std::string& value, int min, int max) {
  int n = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || ptr != end || value.empty())
    bad(option, "expected a whole number, got " + quote_client_text(value));
  if (n < min || n > max)
    bad(option, std::to_string(n) + " is out of range (" + std::to_string(min) + "-" + std::to_string(max) + ")");
  return n;
}

// BCP-47 tag to the bare code the models use; "multi" is Deepgram's name for detection.
std::string language_code(const std::string& value) {
  std::string v = lower(value);
  if (v == "multi" || v == "auto") return "auto";
  size_t dash = v.find_first_of("-_");
  std::string code = v.substr(0, dash);
  if (code.size() < 2 || code.size() > 3 ||
      !std::all_of(code.begin(), code.end(), [](unsigned char c) { return std::isalpha(c); }))
    bad("language", "expected a language code such as en or en-US, got " + quote_client_text(value));
  return code;
}

}  // namespace

ListenOptions parse_listen_options(const std::map<std::string, std::string>& query,
                                   const std::vector<std::pair<std::string, std::string>>& pairs) {
  ListenOptions o;
  auto get = [&](const char* key) -> const std::string* {
    auto it = query.find(key);
    return it == query.end() ? nullptr : &it->second;
  };
  auto all = [&](const char* key) {
    std::vector<std::string> values;
    for (const auto& [k, v] : pairs)
      if (k == key) values.push_back(v);
    if (pairs.empty())
      if (auto v = get(key)) values.push_back(*v);
    return values;
  };
  if (auto v = get("model")) {
    if (v->empty()) bad("model", "empty");
    o.model = *v;
  }
  if (auto v = get("language")) o.language = language_code(*v);
  if (auto v = get("encoding")) {
    std::string e = lower(*v);
    if (e != "linear16" && e != "mulaw" && e != "alaw")
      bad("encoding", quote_client_text(*v) +
                          " is not supported: use encoding=linear16 (16-bit PCM), mulaw or alaw (G.711) with "
                          "sample_rate for raw audio, or omit encoding and send a container (wav, webm, ogg, mp3, "
                          "flac...)");
    o.encoding = e;
  }
  if (auto v = get("sample_rate")) o.sample_rate = parse_int("sample_rate", *v, 8000, 192000);
  if (!o.encoding.empty() && o.sample_rate == 0) bad("sample_rate", "required with encoding=" + o.encoding);
  if (auto v = get("channels")) o.channels = parse_int("channels", *v, 1, 64);
  if (auto v = get("multichannel")) o.multichannel = parse_bool("multichannel", *v);
  if (o.channels > 1 && o.encoding.empty())
    bad("channels",
        "applies to raw audio (encoding=linear16, mulaw or alaw); a container says its own channels, "
        "mixed down to one transcript");
  if (o.multichannel && o.channels < 2)
    bad("multichannel", "needs raw audio of 2 or more interleaved channels (encoding and channels=N)");
  for (const std::string& term : all("keyterm")) o.keyterms.add(term);
  for (const std::string& keyword : all("keywords")) {
    const Keyterm k = parse_keyword(keyword);
    o.keyterms.add(k.text, k.weight);
  }
  o.keyterms.check_limits("keyterm");
  if (auto v = get("interim_results")) o.interim_results = parse_bool("interim_results", *v);
  if (auto v = get("punctuate")) o.punctuate = parse_bool("punctuate", *v);
  if (auto v = get("smart_format")) o.smart_format = parse_bool("smart_format", *v);
  if (auto v = get("vad_events")) o.vad_events = parse_bool("vad_events", *v);
  if (auto v = get("diarize")) o.diarize = parse_bool("diarize", *v);
  if (auto v = get("endpointing")) {
    std::string e = lower(*v);
    if (e == "false")
      o.endpointing_ms.reset();
    else if (e == "true")
      o.endpointing_ms = 10;
    else
      o.endpointing_ms = parse_int("endpointing", *v, 0, 60000);
  }
  if (auto v = get("delay_ms")) o.delay_ms = parse_int("delay_ms", *v, 1, 60000);
  if (auto v = get("utterance_end_ms")) {
    o.utterance_end_ms = parse_int("utterance_end_ms", *v, 1000, 5000);
    if (!o.interim_results) bad("utterance_end_ms", "needs interim_results=true");
  }
  return o;
}

}  // namespace earshot::deepgram
