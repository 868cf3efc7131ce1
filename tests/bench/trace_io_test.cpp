#include "bench/trace_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "common/error.h"

namespace earshot::bench {
namespace {

TEST(TraceIo, RunRoundTripsExactly) {
  SystemRun run;
  run.elapsed_wall = 12.345678901234567;
  run.stats = {3, 0.1, 40, 0.7, true};
  StreamRecord r;
  r.file = 2;
  r.session = 1;
  r.trace.audio_seconds = 7.1;
  r.trace.elapsed_wall = 8.25;
  r.trace.compute_wall = 1.0 / 3.0;
  r.trace.emissions.push_back({0.6, 0.5, 0.1, 0, 2});
  r.trace.emissions.push_back({1.1, 1.0, 0.1, 2, 0});
  CommittedWord w;
  w.word.text = " 100% sure\nnew";
  w.word.start = 0.25;
  w.word.end = 0.75;
  w.commit_wall = 1.1;
  w.commit_audio = 1.0;
  w.first_seen_wall = 0.6;
  w.first_seen_audio = 0.5;
  r.trace.words = {w, w};
  r.trace.text = "100% sure";
  r.error = "scripted failure";
  run.streams.push_back(r);
  std::stringstream buf;
  write_run(buf, run);
  SystemRun back = read_run(buf);
  EXPECT_EQ(back.elapsed_wall, run.elapsed_wall);
  EXPECT_TRUE(back.stats.available);
  EXPECT_EQ(back.stats.decoder_calls, 40);
  ASSERT_EQ(back.streams.size(), 1u);
  const StreamRecord& b = back.streams[0];
  EXPECT_EQ(b.file, 2);
  EXPECT_EQ(b.session, 1);
  EXPECT_EQ(b.trace.compute_wall, 1.0 / 3.0);
  ASSERT_EQ(b.trace.emissions.size(), 2u);
  EXPECT_EQ(b.trace.emissions[1].committed, 2);
  ASSERT_EQ(b.trace.words.size(), 2u);
  EXPECT_EQ(b.trace.words[1].word.text, " 100% sure\nnew");
  EXPECT_EQ(b.trace.words[1].first_seen_audio, 0.5);
  EXPECT_EQ(b.trace.text, "100% sure");
  EXPECT_EQ(b.error, "scripted failure");
}

TEST(TraceIo, TruncatedOrForeignTracesAreErrors) {
  std::stringstream truncated("earshot-run 1\nelapsed 1\n");
  EXPECT_THROW(read_run(truncated), Error);
  std::stringstream foreign("hello\n");
  EXPECT_THROW(read_run(foreign), Error);
  std::stringstream orphan("earshot-run 1\ne 1 2 3 0 0\nend\n");
  EXPECT_THROW(read_run(orphan), Error);
}

TEST(TraceIo, AudioFileRoundTrips) {
  const auto path = std::filesystem::temp_directory_path() / ("earshot-audio-" + std::to_string(::getpid()));
  std::vector<std::vector<float>> audio = {{0.5f, -1.0f}, {}, {0.25f}};
  write_audio_file(path, audio);
  EXPECT_EQ(read_audio_file(path), audio);
  std::filesystem::resize_file(path, 20);
  EXPECT_THROW(read_audio_file(path), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace earshot::bench
