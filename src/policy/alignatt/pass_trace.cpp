#include "policy/alignatt/pass_trace.h"

#include <cstdio>

#include "common/json_text.h"
#include "policy/text_utils.h"

namespace earshot::policy {

namespace {
// Token bytes may end inside a UTF-8 character: those go out as hex, never as broken JSON.
std::string text_field(const std::string& bytes) {
  if (is_valid_utf8(bytes)) return "\"text\":" + json_quote(bytes);
  std::string hex;
  for (unsigned char c : bytes) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%02x", c);
    hex += buf;
  }
  return "\"text\":null,\"bytes\":\"" + hex + "\"";
}

std::string ids(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string strings(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + json_quote(v[i]);
  return s + "]";
}
}  // namespace

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kBorder: return "border";
    case StopReason::kRewind: return "rewind";
    case StopReason::kEndOfText: return "eot";
    case StopReason::kContextLimit: return "context_limit";
    case StopReason::kTokenBudget: return "token_budget";
    case StopReason::kNoSpeech: return "no_speech";
  }
  return "unknown";
}

std::string to_json(const PassTrace& t) {
  std::string s = "{\"pass\":" + std::to_string(t.index) + ",\"is_last\":" + (t.is_last ? "true" : "false") +
                  ",\"language\":" + json_quote(t.language) + ",\"buffer\":[" + json_number(t.buffer_start) + "," +
                  json_number(t.buffer_end) + "],\"content_frames\":" + std::to_string(t.content_frames) +
                  ",\"sot_index\":" + std::to_string(t.sot_index) + ",\"prompt\":" + ids(t.prompt) + ",\"tokens\":[";
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    const PassTrace::Token& k = t.tokens[i];
    s += (i ? ",{" : "{") + std::string("\"id\":") + std::to_string(k.id) + "," + text_field(k.text) +
         ",\"frame\":" + std::to_string(k.frame) + ",\"frame_margin\":" + json_number(k.frame_margin) +
         ",\"logit_margin\":" + (k.logit_margin < 0 ? std::string("null") : json_number(k.logit_margin)) +
         ",\"logprob\":" + json_number(k.logprob) + "}";
  }
  s += std::string("],\"stop\":\"") + stop_reason_name(t.stop) + "\",\"committed\":" + ids(t.committed) +
       ",\"words\":" + strings(t.words) + ",\"guards\":" + strings(t.guards) + "}";
  return s;
}

}  // namespace earshot::policy
