// Replays the inputs that once broke a fuzz target (kept under the parser's tests,
// EARSHOT_FUZZ_REGRESSIONS) through that target's LLVMFuzzerTestOneInput, compiled
// into a plain GoogleTest without libFuzzer: a regression crashes or aborts this
// test (the target's own checks), and the sanitizer flavour adds ASan and UBSan.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

TEST(FuzzRegressions, EveryKeptInputRunsClean) {
  int inputs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(EARSHOT_FUZZ_REGRESSIONS)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().string());
    EXPECT_EQ(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()), 0);
    ++inputs;
  }
  EXPECT_GT(inputs, 0) << "no inputs in " << EARSHOT_FUZZ_REGRESSIONS;
}

}  // namespace
