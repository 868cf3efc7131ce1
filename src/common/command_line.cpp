#include "common/command_line.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/error.h"

namespace earshot {
namespace {
Error bad(const std::string& message) { return Error(ErrorCode::kInvalidArgument, message); }
}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const size_t a = text.find_first_not_of(' ', start);
    if (a != std::string::npos && a < end) {
      const size_t b = text.find_last_not_of(' ', end - 1);
      out.push_back(text.substr(a, b - a + 1));
    }
    start = end + 1;
  }
  return out;
}

std::string default_thread_count() {
  const unsigned cores = std::thread::hardware_concurrency();
  return std::to_string(cores == 0 ? 1u : std::min(cores, 8u));
}

Args& Args::option(std::string name, std::string help, std::string default_value) {
  order_.push_back(name);
  specs_[name] = Spec{std::move(help), std::move(default_value), false};
  return *this;
}

Args& Args::flag(std::string name, std::string help) {
  order_.push_back(name);
  specs_[name] = Spec{std::move(help), "", true};
  return *this;
}

void Args::parse(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = specs_.find(name);
    if (it == specs_.end()) throw bad(command_ + ": unknown option --" + name + " (see --help)");
    if (it->second.is_flag) {
      if (value) throw bad(command_ + ": --" + name + " takes no value");
      values_[name] = "1";
      continue;
    }
    if (!value) {
      if (i + 1 >= argv.size()) throw bad(command_ + ": --" + name + " needs a value");
      value = argv[++i];
    }
    values_[name] = *value;
  }
}

bool Args::parse_or_help(const std::vector<std::string>& argv, const ArgsRules& rules) {
  parse(argv);
  if (help_) {
    std::printf("%s", help().c_str());
    return false;
  }
  if (!rules.positional && !positional_.empty())
    throw bad(command_ + ": unexpected argument '" + positional_[0] + "' (see --help)");
  for (const std::string& name : rules.required) {
    if (!has(name) || get(name).empty()) throw bad(command_ + ": --" + name + " is required (see --help)");
  }
  return true;
}

std::string Args::help() const {
  std::string out = "usage: " + usage_ + "\n\noptions:\n";
  for (const auto& name : order_) {
    const Spec& s = specs_.at(name);
    std::string left = "  --" + name + (s.is_flag ? "" : " VALUE");
    if (left.size() < 28) left.resize(28, ' ');
    out += left + " " + s.help;
    if (!s.default_value.empty()) out += " (default: " + s.default_value + ")";
    out += "\n";
  }
  return out;
}

const Args::Spec& Args::spec(const std::string& name) const {
  auto it = specs_.find(name);
  if (it == specs_.end()) throw Error(ErrorCode::kInternal, "option --" + name + " was never declared");
  return it->second;
}

bool Args::has(const std::string& name) const {
  spec(name);
  return values_.count(name) != 0;
}

std::string Args::get(const std::string& name) const {
  const Spec& s = spec(name);
  auto it = values_.find(name);
  return it != values_.end() ? it->second : s.default_value;
}

double Args::get_double(const std::string& name) const {
  const std::string text = get(name);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0)
    throw bad(command_ + ": --" + name + " expects a number, got '" + text + "'");
  return v;
}

bool Args::get_on_off(const std::string& name) const {
  const std::string value = get(name);
  if (value != "on" && value != "off") throw bad("--" + name + " must be on or off, not '" + value + "'");
  return value == "on";
}

long Args::get_int(const std::string& name) const {
  const std::string text = get(name);
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0)
    throw bad(command_ + ": --" + name + " expects an integer, got '" + text + "'");
  return v;
}

bool Args::get_flag(const std::string& name) const { return spec(name).is_flag && has(name); }

}  // namespace earshot
