// Model downloads against an in-process HTTP server on loopback: full, resumed,
// redirected, corrupt, missing and refused. Never touches the internet.
#include "model/download.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <csignal>
#include <fstream>
#include <iterator>
#include <random>

#include "common/error.h"
#include "engine/catalogue.h"
#include "error_of.h"
#include "model/registry.h"
#include "model/runtime/gguf_file.h"
#include "pull_fixture.h"
#include "test_http_server.h"

namespace earshot::models {
namespace {

using earshot::testing::error_of;
using earshot::testing::read_file;
using earshot::testing::TestHttpServer;

// A real ggml Whisper header + vocabulary + mel filters (no tensors): passes the header check.
std::filesystem::path template_model() {
  return std::filesystem::path(EARSHOT_SHARED_DIR) / "models" / "for-tests-ggml-tiny.bin";
}

class DownloadTest : public earshot::testing::PullFixture {
 protected:
  void SetUp() override {
    make_cache("earshot-download-test-");
    content_ = read_file(template_model());
    ASSERT_GT(content_.size(), 500000u);
    model_ = ModelInfo{"tiny", content_.size(), sha1_of_file(template_model()), kDefaultBaseUrl};
    model_.check = check_ggml_whisper_header;
    server_.serve("/models/ggml-tiny.bin", content_);
  }
  std::filesystem::path cached() const { return cache_ / "ggml-tiny.bin"; }
  std::filesystem::path part() const { return cache_ / "ggml-tiny.bin.part"; }

  ModelInfo model_;
};

TEST_F(DownloadTest, FullDownloadLandsInTheCacheVerified) {
  uint64_t last_done = 0;
  std::optional<uint64_t> last_total;
  PullOptions o = options();
  o.progress = [&](uint64_t done, std::optional<uint64_t> total) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  };
  EXPECT_EQ(pull_model(model_, o), cached());
  EXPECT_EQ(read_file(cached()), content_);
  EXPECT_FALSE(std::filesystem::exists(part()));
  EXPECT_EQ(last_done, content_.size());
  EXPECT_EQ(last_total, content_.size());
  const auto seen = server_.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].target, "/models/ggml-tiny.bin");
  EXPECT_EQ(seen[0].range, "");
  EXPECT_EQ(engine::resolve_model("tiny", cache_), cached());
}

TEST_F(DownloadTest, DroppedConnectionIsResumedWithARangeRequest) {
  server_.drop_after(200000, 1);
  EXPECT_EQ(pull_model(model_, options()), cached());
  EXPECT_EQ(read_file(cached()), content_);
  const auto seen = server_.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].range, "");
  EXPECT_EQ(seen[1].range, "bytes=200000-");
}

TEST_F(DownloadTest, InterruptedRunLeavesAPartThatTheNextRunResumes) {
  server_.drop_after(123457, 1);
  const Error e = error_of([&] { pull_model(model_, options(/*attempts=*/1)); });
  EXPECT_EQ(e.code(), ErrorCode::kIo);
  EXPECT_NE(std::string(e.what()).find("Run the command again to resume from 123457 bytes"), std::string::npos)
      << e.what();
  EXPECT_FALSE(std::filesystem::exists(cached()));
  ASSERT_EQ(std::filesystem::file_size(part()), 123457u);

  DownloadOptions d;
  d.url = server_.base_url() + "/models/ggml-tiny.bin";
  d.destination = cached();
  d.expected_sha1 = model_.sha1;
  const DownloadResult r = download_file(d);
  EXPECT_EQ(r.resumed_from, 123457u);
  EXPECT_EQ(r.bytes, content_.size());
  EXPECT_EQ(read_file(cached()), content_);
  const auto seen = server_.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].range, "bytes=123457-");
}

// Disk full, simulated without root by a file-size limit (RLIMIT_FSIZE: writes past
// it fail with EFBIG, as on a full disk they fail with ENOSPC) in a forked child, so
// the limit never touches the test runner's own files.
TEST_F(DownloadTest, DiskFullIsACleanErrorAndThePartIsNeverUsedUnfinished) {
  constexpr rlim_t kLimit = 300000;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);  // else the write past the limit kills the process
    rlimit limit{};
    ::getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = kLimit;
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::string message = "no error";
    int code = 0;
    try {
      pull_model(model_, options(/*attempts=*/1));
    } catch (const Error& e) {
      message = e.what();
      code = static_cast<int>(e.code()) + 1;
    }
    (void)!::write(pipe_fds[1], message.data(), message.size());
    ::_exit(code);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), static_cast<int>(ErrorCode::kIo) + 1) << message;
  EXPECT_NE(message.find("write failed (disk full?)"), std::string::npos) << message;
  EXPECT_NE(message.find("ggml-tiny.bin.part"), std::string::npos) << message;
  // Nothing in the cache under the model's name; the part holds a prefix of the file only.
  EXPECT_FALSE(std::filesystem::exists(cached()));
  ASSERT_TRUE(std::filesystem::exists(part()));
  const std::string partial = read_file(part());
  EXPECT_LE(partial.size(), kLimit);
  EXPECT_EQ(partial, content_.substr(0, partial.size()));
  EXPECT_THROW(engine::resolve_model("tiny", cache_), Error);
  // Space again: the next pull resumes from the part and verifies the whole file.
  EXPECT_EQ(pull_model(model_, options()), cached());
  EXPECT_EQ(read_file(cached()), content_);
  EXPECT_FALSE(std::filesystem::exists(part()));
  const auto seen = server_.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].range, "bytes=" + std::to_string(partial.size()) + "-");
}

TEST_F(DownloadTest, ServerIgnoringRangeRestartsFromZero) {
  server_.drop_after(100000, 1);
  server_.ignore_range(true);
  EXPECT_EQ(pull_model(model_, options()), cached());
  EXPECT_EQ(read_file(cached()), content_);
  EXPECT_EQ(server_.requests().size(), 2u);
}

TEST_F(DownloadTest, CompletePartIsFinishedWithoutDownloadingAgain) {
  std::filesystem::create_directories(cache_);
  std::ofstream(part(), std::ios::binary) << content_;
  EXPECT_EQ(pull_model(model_, options()), cached());
  EXPECT_EQ(read_file(cached()), content_);
  const auto seen = server_.requests();
  ASSERT_EQ(seen.size(), 1u);  // answered 416 with the total size, which matched
  EXPECT_EQ(seen[0].range, "bytes=" + std::to_string(content_.size()) + "-");
}

TEST_F(DownloadTest, RedirectsAreFollowed) {
  server_.redirect("/mirror/ggml-tiny.bin", "/cdn/blob?sig=1");
  server_.redirect("/cdn/blob?sig=1", server_.base_url() + "/models/ggml-tiny.bin");
  PullOptions o = options();
  o.base_url = server_.base_url() + "/mirror/";
  EXPECT_EQ(pull_model(model_, o), cached());
  EXPECT_EQ(read_file(cached()), content_);
  const auto seen = server_.requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].target, "/cdn/blob?sig=1");
  EXPECT_EQ(seen[2].target, "/models/ggml-tiny.bin");
}

TEST_F(DownloadTest, CorruptBytesFailTheSha1AndLeaveNothingInTheCache) {
  server_.corrupt_byte_at(300000);
  const Error e = error_of([&] { pull_model(model_, options()); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(e.what()).find("SHA-1"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("expected " + model_.sha1), std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(cached()));
  EXPECT_FALSE(std::filesystem::exists(part()));
}

TEST_F(DownloadTest, NonModelBytesFailTheHeaderCheckWhenNoSha1IsKnown) {
  std::mt19937 rng(5);
  std::string junk(100000, '\0');
  for (char& c : junk) c = char(rng());
  server_.serve("/models/ggml-tiny.bin", junk);
  model_.sha1.clear();
  const Error e = error_of([&] { pull_model(model_, options()); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(e.what()).find("not a ggml Whisper model"), std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(cached()));
  EXPECT_FALSE(std::filesystem::exists(part()));
}

TEST_F(DownloadTest, MissingFileIsAClearHttpError) {
  const std::optional<ModelInfo> base = engine::find_model("base.en");
  ASSERT_TRUE(base);
  const Error e = error_of([&] { pull_model(*base, options()); });
  EXPECT_EQ(e.code(), ErrorCode::kIo);
  EXPECT_NE(std::string(e.what()).find(server_.base_url() + "/models/ggml-base.en.bin"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("HTTP 404"), std::string::npos) << e.what();
}

TEST_F(DownloadTest, ConnectionRefusedIsAClearError) {
  unsigned short port;
  {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  PullOptions o = options();
  o.base_url = "http://127.0.0.1:" + std::to_string(port);
  const Error e = error_of([&] { pull_model(model_, o); });
  EXPECT_EQ(e.code(), ErrorCode::kIo);
  EXPECT_NE(std::string(e.what()).find("cannot connect to 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(cached()));
}

// Qwen3-ASR's entries: the text GGUF and its mmproj come down together, each
// checked to be GGUF naming an architecture (no SHA-1 is published for them).
TEST_F(DownloadTest, Qwen3AsrPullsTheTextModelAndItsMmproj) {
  const auto gguf = [&](const std::string& architecture, size_t n) {
    runtime::GgufWriter w;
    w.set_architecture(architecture);
    w.add_tensor_f32("t", GGML_TYPE_F32, std::vector<int64_t>{static_cast<int64_t>(n)}, std::vector<float>(n, 0.5f));
    const std::filesystem::path at = std::filesystem::temp_directory_path() / ("earshot-dl-" + architecture + ".gguf");
    w.write(at);
    std::string bytes = read_file(at);
    std::filesystem::remove(at);
    return bytes;
  };
  const std::string text = gguf("qwen3vl", 20000), mmproj = gguf("clip", 12000);
  server_.serve("/models/Qwen3-ASR-0.6B-Q8_0.gguf", text);
  server_.serve("/models/mmproj-Qwen3-ASR-0.6B-Q8_0.gguf", mmproj);
  const ModelInfo m = *engine::find_model("qwen3-asr-0.6b");
  EXPECT_EQ(pull_model(m, options()), cache_ / "Qwen3-ASR-0.6B-Q8_0.gguf");
  EXPECT_EQ(read_file(cache_ / "Qwen3-ASR-0.6B-Q8_0.gguf"), text);
  EXPECT_EQ(read_file(cache_ / "mmproj-Qwen3-ASR-0.6B-Q8_0.gguf"), mmproj);
  EXPECT_TRUE(is_cached(m, cache_));
  // A file that is not GGUF (an HTML error page) is refused and not kept.
  server_.serve("/models/mmproj-Qwen3-ASR-1.7B-Q8_0.gguf", "<html>not found</html>" + std::string(1000, ' '));
  server_.serve("/models/Qwen3-ASR-1.7B-Q8_0.gguf", text);
  const Error e = error_of([&] { pull_model(*engine::find_model("qwen3-asr-1.7b"), options()); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel) << e.what();
  EXPECT_NE(std::string(e.what()).find("mmproj-Qwen3-ASR-1.7B-Q8_0.gguf"), std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(cache_ / "mmproj-Qwen3-ASR-1.7B-Q8_0.gguf"));
  EXPECT_FALSE(is_cached(*engine::find_model("qwen3-asr-1.7b"), cache_));
}

// A published Parakeet GGUF is checked for its layout: transcribe.cpp's keys pass,
// another architecture is refused and not kept.
TEST_F(DownloadTest, PublishedParakeetGgufIsCheckedForItsLayout) {
  const auto gguf = [&](const std::string& architecture, const std::string& key) {
    runtime::GgufWriter w;
    w.set_architecture(architecture);
    w.set(key, "tdt");
    w.add_tensor_f32("t", GGML_TYPE_F32, std::vector<int64_t>{4096}, std::vector<float>(4096, 0.5f));
    const std::filesystem::path at = std::filesystem::temp_directory_path() / "earshot-dl-published.gguf";
    w.write(at);
    std::string bytes = read_file(at);
    std::filesystem::remove(at);
    return bytes;
  };
  const ModelInfo m = *engine::find_model("transcribe.cpp/parakeet-tdt-0.6b-v3-f16");
  const std::string ok = gguf("parakeet", "stt.parakeet.head_kind");
  server_.serve("/models/parakeet-tdt-0.6b-v3-F16.gguf", ok);
  EXPECT_EQ(pull_model(m, options()), cache_ / "parakeet-tdt-0.6b-v3-F16.gguf");
  EXPECT_EQ(read_file(cache_ / "parakeet-tdt-0.6b-v3-F16.gguf"), ok);
  server_.serve("/models/parakeet-tdt-0.6b-v3-Q8_0.gguf", gguf("llama", "llama.context"));
  const Error e =
      error_of([&] { pull_model(*engine::find_model("transcribe.cpp/parakeet-tdt-0.6b-v3-q8_0"), options()); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel) << e.what();
  EXPECT_NE(std::string(e.what()).find("not a published Parakeet GGUF"), std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(cache_ / "parakeet-tdt-0.6b-v3-Q8_0.gguf"));
}

TEST(Sha1, MatchesKnownDigest) {
  const auto path = std::filesystem::temp_directory_path() / ("earshot-sha1-" + std::to_string(::getpid()));
  std::ofstream(path) << "abc";
  EXPECT_EQ(sha1_of_file(path), "a9993e364706816aba3e25717850c26c9cd0d89d");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace earshot::models
