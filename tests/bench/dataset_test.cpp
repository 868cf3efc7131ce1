#include "bench/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "common/error.h"

namespace earshot::bench {
namespace {
namespace fs = std::filesystem;

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("earshot-dataset-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

TEST_F(DatasetTest, PairsAudioWithSameNameReferencesAndNamesTheProblems) {
  write("b.wav", "x");
  write("b.txt", "second\nline");
  write("a.flac", "x");
  write("a.txt", "first");
  write("orphan.wav", "x");  // no reference
  write("notes.txt", "not an utterance");
  Dataset d = load_dataset(dir_);
  ASSERT_EQ(d.utterances.size(), 2u);
  EXPECT_EQ(d.utterances[0].id, "a");
  EXPECT_EQ(d.utterances[0].reference, "first");
  EXPECT_EQ(d.utterances[1].id, "b");
  EXPECT_EQ(d.utterances[1].reference, "second line");
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_NE(d.problems[0].find("orphan.wav"), std::string::npos) << d.problems[0];
  EXPECT_NE(d.problems[0].find("orphan.txt"), std::string::npos) << d.problems[0];
}

TEST_F(DatasetTest, EmptyFolderIsAnErrorThatSaysWhatWasExpected) {
  try {
    load_dataset(dir_);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no usable utterance"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_dataset(dir_ / "missing"), Error);
}

TEST_F(DatasetTest, ManifestListsAudioAndReferenceText) {
  write("one.wav", "x");
  write("manifest.tsv", "# comment\none.wav\tHello there\n\nmissing.wav\tgone\nno tab here\n");
  Dataset d = load_dataset(dir_);
  ASSERT_EQ(d.utterances.size(), 1u);
  EXPECT_EQ(d.utterances[0].id, "one");
  EXPECT_EQ(d.utterances[0].reference, "Hello there");
  EXPECT_EQ(d.utterances[0].audio_path, (dir_ / "one.wav").string());
  ASSERT_EQ(d.problems.size(), 2u);
  EXPECT_NE(d.problems[0].find("manifest.tsv:4"), std::string::npos) << d.problems[0];
  EXPECT_NE(d.problems[0].find("missing.wav"), std::string::npos);
  EXPECT_NE(d.problems[1].find("no tab"), std::string::npos);
}

TEST(Dataset, SharedLibrivoxFolderLoads) {
  Dataset d = load_dataset(fs::path(EARSHOT_SHARED_DIR) / "data" / "librivox");
  EXPECT_EQ(d.utterances.size(), 5u);
  EXPECT_TRUE(d.problems.empty());
  EXPECT_EQ(d.utterances[1].reference.rfind("he was not an ill disposed young man", 0), 0u);
}

}  // namespace
}  // namespace earshot::bench
