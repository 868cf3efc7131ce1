// The OpenAI upload's multipart/form-data parsing (POST /v1/audio/transcriptions):
// the boundary from the Content-Type, the parts, their names, file names,
// content types and data. Input: the Content-Type, '\n', the body. Every part's
// data must lie inside the body. Any exception other than earshot::Error, any
// sanitizer report is a finding.
#include "server/multipart.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [head, body] = earshot::fuzz::split_head(data, size);
  const std::string content_type(head), text(body);
  try {
    size_t total = 0;
    for (const auto& part : earshot::server::parse_multipart(content_type, text)) {
      earshot::fuzz::check(part.data.empty() || text.find(part.data) != std::string::npos, "data is from the body");
      total += part.data.size();
    }
    earshot::fuzz::check(total <= text.size(), "parts do not overlap");
  } catch (const earshot::Error&) {
  }
  return 0;
}
