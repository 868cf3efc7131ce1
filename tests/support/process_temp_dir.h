// A directory for files a test process writes once and its tests share (a
// random model): under the system's temp directory, named for the tag and the
// process ("earshot-TAG-PID": gtest_discover_tests runs each test in a process of
// its own), created on first use and removed with everything in it when the
// process exits.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

namespace earshot::testing {

inline std::filesystem::path process_temp_dir(const std::string& tag) {
  struct Dir {
    std::filesystem::path path;
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static std::map<std::string, Dir> dirs;
  auto [it, added] = dirs.try_emplace(tag);
  if (added) {
    it->second.path = std::filesystem::temp_directory_path() / ("earshot-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(it->second.path);
  }
  return it->second.path;
}

}  // namespace earshot::testing
