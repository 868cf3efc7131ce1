// Line-oriented text formats the bench reads (RTTM, UEM, STM): one record per
// line, fields separated by whitespace; the file read whole, and errors that
// name the file and the line.
#pragma once

#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace earshot::bench {

// Calls record(fields, line number) for each line of `text` that holds a record:
// its whitespace-separated fields; blank lines and comments (a first field that
// starts with # or ;, which covers STM's ";;") are skipped.
template <typename Record>
void for_each_record(std::string_view text, Record record) {
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string line(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    std::istringstream in(line);
    std::vector<std::string> fields;
    for (std::string f; in >> f;) fields.push_back(f);
    if (fields.empty() || fields[0][0] == '#' || fields[0][0] == ';') continue;
    record(fields, line_no);
  }
}

// Throws Error(kInvalidArgument) "SOURCE:LINE: what".
[[noreturn]] void bad_line(const std::string& source, size_t line, const std::string& what);

// A time field: a finite decimal number >= 0, else bad_line naming `name` ("start",
// "end time"...).
double parse_seconds(const std::string& field, const std::string& name, const std::string& source, size_t line);

// The whole of a `kind` file (RTTM, UEM, STM), or Error(kIo) naming it.
std::string read_text(const std::filesystem::path& path, const char* kind);

}  // namespace earshot::bench
