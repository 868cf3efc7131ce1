#include "protocol/rttm.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace earshot::protocol {

std::string format_rttm(const std::vector<RttmSegment>& segments, int decimals) {
  if (decimals < 0 || decimals > 9)
    throw Error(ErrorCode::kInternal, "format_rttm: " + std::to_string(decimals) + " decimals (0..9)");
  auto token = [](const std::string& value, const char* what) -> const std::string& {
    if (value.empty() || std::any_of(value.begin(), value.end(), [](unsigned char c) { return std::isspace(c); }))
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("an RTTM ") + what + " must be one non-empty word, not '" + value + "'");
    return value;
  };
  const double scale = std::pow(10.0, decimals);
  auto seconds = [&](double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
    return std::string(buf);
  };
  std::string out;
  for (const RttmSegment& s : segments) {
    if (!std::isfinite(s.start) || !std::isfinite(s.duration) || s.start < 0 || s.duration < 0)
      throw Error(ErrorCode::kInvalidArgument, "an RTTM segment needs a start and duration >= 0 (speaker " + s.speaker +
                                                   " at " + std::to_string(s.start) + ")");
    const double start = std::round(s.start * scale) / scale, end = std::round(s.end() * scale) / scale;
    out += "SPEAKER " + token(s.file, "file name") + " " + token(s.channel, "channel") + " " + seconds(start) + " " +
           seconds(end - start) + " <NA> <NA> " + token(s.speaker, "speaker") + " <NA> <NA>\n";
  }
  return out;
}

}  // namespace earshot::protocol
