// multipart/form-data parsing for POST /v1/audio/transcriptions (library
// earshot_multipart: no networking, no session, so it is testable and fuzzed alone).
#pragma once

#include <string>
#include <vector>

namespace earshot::server {

// Parts of a multipart/form-data body.
struct FormPart {
  std::string name;
  std::string filename;
  std::string content_type;
  std::string data;
};
// Throws Error(kInvalidArgument) naming what is wrong.
std::vector<FormPart> parse_multipart(const std::string& content_type, const std::string& body);

}  // namespace earshot::server
