// multipart/form-data bodies (RFC 7578) as the OpenAI endpoint receives them:
// pure code over the request's Content-Type and body, so it is fuzzed on its own.
#include "server/multipart.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"
#include "common/text.h"
#include "common/utf8.h"

namespace earshot::server {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Value of `key` in a header like `form-data; name="file"; filename="a.wav"`.
std::string header_param(const std::string& header, const std::string& key) {
  // Lower-cased once: per match it made a hostile header of many "xname=" quadratic.
  const std::string lowered = lower(header);
  size_t pos = 0;
  while ((pos = lowered.find(key + "=", pos)) != std::string::npos) {
    if (pos > 0 && header[pos - 1] != ' ' && header[pos - 1] != ';') {
      pos += key.size();
      continue;
    }
    size_t start = pos + key.size() + 1;
    if (start < header.size() && header[start] == '"') {
      size_t end = header.find('"', start + 1);
      return header.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
    }
    size_t end = header.find(';', start);
    return trim(header.substr(start, end == std::string::npos ? std::string::npos : end - start));
  }
  return "";
}

}  // namespace

std::vector<FormPart> parse_multipart(const std::string& content_type, const std::string& body) {
  if (lower(content_type).find("multipart/form-data") == std::string::npos)
    throw Error(ErrorCode::kInvalidArgument,
                "expected Content-Type multipart/form-data, got " + quote_client_text(content_type));
  std::string boundary = header_param(content_type, "boundary");
  if (boundary.empty()) throw Error(ErrorCode::kInvalidArgument, "multipart/form-data without a boundary parameter");
  const std::string delimiter = "--" + boundary;
  std::vector<FormPart> parts;
  size_t pos = body.find(delimiter);
  if (pos == std::string::npos) throw Error(ErrorCode::kInvalidArgument, "multipart body has no part boundary");
  for (;;) {
    pos += delimiter.size();
    if (body.compare(pos, 2, "--") == 0) break;  // closing delimiter
    if (body.compare(pos, 2, "\r\n") != 0)
      throw Error(ErrorCode::kInvalidArgument, "malformed multipart boundary line");
    pos += 2;
    size_t headers_end = body.find("\r\n\r\n", pos);
    if (headers_end == std::string::npos)
      throw Error(ErrorCode::kInvalidArgument, "multipart part without headers end");
    FormPart part;
    size_t line_start = pos;
    while (line_start < headers_end) {
      size_t line_end = body.find("\r\n", line_start);
      if (line_end == std::string::npos || line_end > headers_end) line_end = headers_end;
      std::string line = body.substr(line_start, line_end - line_start);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = lower(trim(line.substr(0, colon)));
        std::string value = trim(line.substr(colon + 1));
        if (name == "content-disposition") {
          part.name = header_param(value, "name");
          part.filename = header_param(value, "filename");
        } else if (name == "content-type") {
          part.content_type = value;
        }
      }
      line_start = line_end + 2;
    }
    size_t data_start = headers_end + 4;
    size_t next = body.find("\r\n" + delimiter, data_start);
    if (next == std::string::npos) throw Error(ErrorCode::kInvalidArgument, "multipart body ends inside a part");
    part.data = body.substr(data_start, next - data_start);
    parts.push_back(std::move(part));
    pos = next + 2;
  }
  return parts;
}

}  // namespace earshot::server
