// earshot-der (tools/der) end to end: files in, md-eval's components out, and
// an error that names the file it could not read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/command.h"

namespace {
namespace fs = std::filesystem;

using Result = earshot::testing::CommandResult;

Result run(const std::string& args) { return earshot::testing::run_command(std::string(EARSHOT_DER_BIN) + " " + args); }

TEST(DerCli, PrintsComponentsAndDer) {
  const fs::path dir = fs::temp_directory_path() / ("earshot-der-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // der_test.cpp's overlap example: DER 37.5 % without collar (missed 2 s,
  // false alarm 1 s of 8 s), 37.5 % with 0.25 s (1.5 + 0.75 of 6 s), and with
  // overlap skipped 25 % (false alarm 1 s of 4 s).
  std::ofstream(dir / "ref.rttm") << "SPEAKER f 1 0 4 <NA> <NA> A <NA> <NA>\nSPEAKER f 1 2 4 <NA> <NA> B <NA> <NA>\n";
  std::ofstream(dir / "hyp.rttm") << "SPEAKER f 1 0 3 <NA> <NA> X <NA> <NA>\nSPEAKER f 1 3 5 <NA> <NA> Y <NA> <NA>\n"
                                     "SPEAKER f 1 1 1 <NA> <NA> Z <NA> <NA>\n";
  const std::string files = "--ref " + (dir / "ref.rttm").string() + " --hyp " + (dir / "hyp.rttm").string();
  Result r = run(files);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("scored speaker time          8.00 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("missed speaker time          2.00 s   25.00%"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DER                                   37.50%"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mapping f 1: A -> X"), std::string::npos) << r.output;
  r = run(files + " --collar 0.25");
  EXPECT_NE(r.output.find("scored speaker time          6.00 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DER                                   37.50%"), std::string::npos) << r.output;
  r = run(files + " --overlap skip");
  EXPECT_NE(r.output.find("DER                                   25.00%"), std::string::npos) << r.output;
  r = run(files + " --collar -1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--collar -1: a number of seconds >= 0"), std::string::npos) << r.output;
  r = run("--ref " + (dir / "missing.rttm").string() + " --hyp " + (dir / "hyp.rttm").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("cannot open RTTM file " + (dir / "missing.rttm").string()), std::string::npos) << r.output;
  fs::remove_all(dir);
}

}  // namespace
