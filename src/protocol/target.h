// Request targets of every protocol: the path and the decoded query parameters
// ("/asr?language=en", "/v1/listen?model=x&encoding=linear16").
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace earshot::protocol {

// Splits "/asr?a=1&b=x%20y" into its path and decoded query parameters.
struct Target {
  std::string path;
  std::map<std::string, std::string> query;
};
Target parse_target(std::string_view target);
std::string url_decode(std::string_view text);

}  // namespace earshot::protocol
