#include "bench/text_records.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "common/error.h"

namespace earshot::bench {

void bad_line(const std::string& source, size_t line, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, source + ":" + std::to_string(line) + ": " + what);
}

double parse_seconds(const std::string& field, const std::string& name, const std::string& source, size_t line) {
  const char* begin = field.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  if (field.empty() || end != begin + field.size() || !std::isfinite(value))
    bad_line(source, line, name + " '" + field + "' is not a number of seconds");
  if (value < 0) bad_line(source, line, name + " " + field + " is negative");
  return value;
}

std::string read_text(const std::filesystem::path& path, const char* kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, std::string("cannot open ") + kind + " file " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::kIo, std::string("cannot read ") + kind + " file " + path.string());
  return text.str();
}

}  // namespace earshot::bench
