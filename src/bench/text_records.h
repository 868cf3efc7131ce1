// Line-oriented text formats the bench reads (RTTM, UEM, STM): one record per
// line, fields separated by whitespace.
#pragma once

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

}  // namespace earshot::bench
