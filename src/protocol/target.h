// Request targets of every protocol: the path and the decoded query parameters
// ("/asr?language=en", "/v1/listen?model=x&encoding=linear16").
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace earshot::protocol {

// Splits "/asr?a=1&b=x%20y" into its path and decoded query parameters.
struct Target {
  std::string path;
  std::map<std::string, std::string> query;  // the last value of each key
  // Every parameter in order, repeats included (Deepgram's keyterm=a&keyterm=b).
  std::vector<std::pair<std::string, std::string>> pairs;
  // Every value of `key`, in order.
  std::vector<std::string> all(const std::string& key) const;
};
Target parse_target(std::string_view target);
std::string url_decode(std::string_view text);

}  // namespace earshot::protocol
