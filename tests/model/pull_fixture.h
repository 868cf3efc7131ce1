// What the download tests share: a per-test cache folder, the loopback HTTP server
// that plays the model host, and PullOptions pointing at both.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "model/download.h"
#include "test_http_server.h"

namespace earshot::testing {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class PullFixture : public ::testing::Test {
 protected:
  // A fresh, empty cache folder named after the test (and the process, for parallel ctest).
  void make_cache(const std::string& prefix) {
    cache_ = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()) + "-" +
                                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(cache_);
  }
  void TearDown() override { std::filesystem::remove_all(cache_); }

  models::PullOptions options(int attempts = 4) {
    models::PullOptions o;
    o.base_url = server_.base_url() + "/models";
    o.cache_dir = cache_;
    o.max_attempts = attempts;
    return o;
  }

  TestHttpServer server_;
  std::filesystem::path cache_;
  std::string content_;
};

}  // namespace earshot::testing
