// The catalogue: every family's published files by name (engine/catalogue.h),
// URLs, cache location, resolving --model, header checks.
#include "engine/catalogue.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>

#include "../model/error_of.h"
#include "common/error.h"
#include "engine/families.h"
#include "model/runtime/gguf_file.h"

namespace earshot::engine {
namespace {

using earshot::testing::error_of;
using namespace earshot::models;
using engine::find_model;
using engine::known_models;
using engine::resolve_model;

// Whether `name` is an entry of the catalogue family `family` registers.
bool in_family(const std::string& family, const std::string& name) {
  for (const Family& f : families()) {
    if (f.name != family || !f.catalogue) continue;
    for (const ModelInfo& m : f.catalogue())
      if (m.name == name) return true;
  }
  return false;
}

class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
  }
  ~EnvGuard() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Registry, ListsEveryModelOfWhisperCppsDownloadScript) {
  std::set<std::string> names;
  for (const ModelInfo& m : known_models()) {
    if (!in_family("whisper", m.name)) continue;
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate " << m.name;
    EXPECT_TRUE(m.sha1.empty() || m.sha1.size() == 40) << m.name;
    EXPECT_GT(m.approx_bytes, 30u << 20) << m.name;
  }
  const std::set<std::string> expected = {
      "tiny",        "tiny.en",       "tiny-q5_1",      "tiny.en-q5_1",        "tiny-q8_0",
      "base",        "base.en",       "base-q5_1",      "base.en-q5_1",        "base-q8_0",
      "small",       "small.en",      "small.en-tdrz",  "small-q5_1",          "small.en-q5_1",
      "small-q8_0",  "medium",        "medium.en",      "medium-q5_0",         "medium.en-q5_0",
      "medium-q8_0", "large-v1",      "large-v2",       "large-v2-q5_0",       "large-v2-q8_0",
      "large-v3",    "large-v3-q5_0", "large-v3-turbo", "large-v3-turbo-q5_0", "large-v3-turbo-q8_0"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(find_model("tiny.en")->sha1, "c78c86eb1a8faa21b369bcd33207cc90d64ae9df");
  EXPECT_EQ(find_model("large-v3-turbo")->sha1, "4af2b29d7ec73d781377bfd1758ca957a807e941");
}

TEST(Registry, FindsByNameOrFileName) {
  ASSERT_TRUE(find_model("ggml-base.en.bin"));
  EXPECT_EQ(find_model("ggml-base.en.bin")->name, "base.en");
  EXPECT_FALSE(find_model("base.english"));
  EXPECT_FALSE(find_model(""));
}

TEST(Registry, UrlsFollowTheDownloadScriptAndCanBeOverridden) {
  EnvGuard guard("EARSHOT_MODEL_BASE_URL");
  unsetenv("EARSHOT_MODEL_BASE_URL");
  EXPECT_EQ(model_url(*find_model("base.en")),
            "https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-base.en.bin");
  EXPECT_EQ(model_url(*find_model("small.en-tdrz")),
            "https://huggingface.co/akashmjn/tinydiarize-whisper.cpp/resolve/main/ggml-small.en-tdrz.bin");
  setenv("EARSHOT_MODEL_BASE_URL", "http://mirror.local/whisper/", 1);
  EXPECT_EQ(model_url(*find_model("tiny")), "http://mirror.local/whisper/ggml-tiny.bin");
  EXPECT_EQ(model_url(*find_model("tiny"), std::string("http://other:8080/m")), "http://other:8080/m/ggml-tiny.bin");
}

TEST(Registry, CacheDirectoryPrecedence) {
  EnvGuard a("EARSHOT_CACHE_DIR"), b("XDG_CACHE_HOME"), c("HOME");
  setenv("EARSHOT_CACHE_DIR", "/x/earshot", 1);
  setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  setenv("HOME", "/x/home", 1);
  EXPECT_EQ(default_cache_dir(), "/x/earshot");
  unsetenv("EARSHOT_CACHE_DIR");
  EXPECT_EQ(default_cache_dir(), "/x/xdg/earshot/models");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_cache_dir(), "/x/home/.cache/earshot/models");
  unsetenv("HOME");
  EXPECT_EQ(error_of([] { default_cache_dir(); }).code(), ErrorCode::kIo);
}

class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("earshot-resolve-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ResolveTest, ExistingPathWins) {
  const auto file = dir_ / "my-model.bin";
  std::ofstream(file) << "x";
  EXPECT_EQ(resolve_model(file.string(), dir_ / "cache"), file);
}

TEST_F(ResolveTest, KnownNameInTheCache) {
  std::ofstream(dir_ / "ggml-small.en.bin") << "x";
  EXPECT_EQ(resolve_model("small.en", dir_), dir_ / "ggml-small.en.bin");
  EXPECT_EQ(resolve_model("ggml-small.en.bin", dir_), dir_ / "ggml-small.en.bin");
}

TEST_F(ResolveTest, KnownNameNotDownloadedSaysHowToGetIt) {
  EnvGuard guard("EARSHOT_MODEL_BASE_URL");
  unsetenv("EARSHOT_MODEL_BASE_URL");
  const Error e = error_of([&] { resolve_model("tiny.en", dir_); });
  EXPECT_EQ(e.code(), ErrorCode::kIo);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("Run `earshot pull tiny.en`"), std::string::npos) << msg;
  EXPECT_NE(msg.find("https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-tiny.en.bin"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find((dir_ / "ggml-tiny.en.bin").string()), std::string::npos) << msg;
}

// Qwen3-ASR: two files per entry (text GGUF + mmproj), cached side by side under
// the names the engine's mmproj lookup expects (mmproj-FILE beside FILE).
TEST(Registry, Qwen3AsrEntriesNameBothFilesOfGgmlOrgsRepositories) {
  EnvGuard guard("EARSHOT_MODEL_BASE_URL");
  unsetenv("EARSHOT_MODEL_BASE_URL");
  for (const char* size : {"0.6B", "1.7B"}) {
    std::string name = std::string("qwen3-asr-") + size;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::optional<ModelInfo> m = find_model(name);
    ASSERT_TRUE(m) << name;
    EXPECT_TRUE(in_family("qwen3asr", name));
    const std::string file = std::string("Qwen3-ASR-") + size + "-Q8_0.gguf";
    EXPECT_EQ(model_file_name(*m), file);
    EXPECT_EQ(m->mmproj, "mmproj-" + file);
    const std::string repo = std::string("https://huggingface.co/ggml-org/Qwen3-ASR-") + size + "-GGUF/resolve/main/";
    EXPECT_EQ(model_url(*m), repo + file);
    EXPECT_EQ(mmproj_url(*m), repo + "mmproj-" + file);
    EXPECT_EQ(mmproj_url(*m, std::string("http://mirror/q")), "http://mirror/q/mmproj-" + file);
    EXPECT_EQ(cached_mmproj_path(*m, "/c"), std::filesystem::path("/c") / ("mmproj-" + file));
    EXPECT_TRUE(m->sha1.empty());  // none published; registry.cpp says so
    EXPECT_EQ(find_model(file)->name, m->name);
    EXPECT_NE(model_names(known_models()).find(name), std::string::npos);
  }
  // The Whisper entries keep their single ggml file.
  EXPECT_TRUE(find_model("base.en")->mmproj.empty());
  EXPECT_EQ(mmproj_url(*find_model("base.en")), "");
}

// transcribe.cpp's published GGUFs: the names, repositories and files its
// docs/models/MODEL.md list, cached under the file name.
TEST(Registry, TranscribeCppEntriesNameItsRepositoriesAndFiles) {
  EnvGuard guard("EARSHOT_MODEL_BASE_URL");
  unsetenv("EARSHOT_MODEL_BASE_URL");
  const std::optional<ModelInfo> m = find_model("transcribe.cpp/parakeet-tdt-0.6b-v3-q8_0");
  ASSERT_TRUE(m);
  EXPECT_TRUE(in_family("transducer", m->name));
  EXPECT_EQ(model_file_name(*m), "parakeet-tdt-0.6b-v3-Q8_0.gguf");
  EXPECT_EQ(
      model_url(*m),
      "https://huggingface.co/handy-computer/parakeet-tdt-0.6b-v3-gguf/resolve/main/parakeet-tdt-0.6b-v3-Q8_0.gguf");
  EXPECT_EQ(m->approx_bytes, 740u * 1000 * 1000);
  EXPECT_TRUE(m->sha1.empty());  // none published
  EXPECT_EQ(find_model("parakeet-tdt-0.6b-v3-Q8_0.gguf")->name, m->name);
  const std::optional<ModelInfo> n = find_model("transcribe.cpp/nemotron-3.5-asr-streaming-0.6b-q4_k_m");
  ASSERT_TRUE(n);
  EXPECT_EQ(model_url(*n),
            "https://huggingface.co/handy-computer/nemotron-3.5-asr-streaming-0.6b-gguf/resolve/main/"
            "nemotron-3.5-asr-streaming-0.6b-Q4_K_M.gguf");
  // ggml-org's whisper.cpp files keep their names.
  EXPECT_TRUE(in_family("transducer", "parakeet-tdt-0.6b-v3-q8_0"));
  EXPECT_EQ(model_file_name(*find_model("parakeet-tdt-0.6b-v3-q8_0")), "ggml-parakeet-tdt-0.6b-v3-q8_0.bin");
  EXPECT_EQ(find_model("parakeet-tdt-0.6b-v3")->name, "parakeet-tdt-0.6b-v3-f16");
}

// Voxtral Realtime: transcribe.cpp's GGUFs as its docs/models/voxtral-realtime.md
// lists them, from the family's own catalogue.
TEST(Registry, VoxtralEntriesNameTranscribeCppsFiles) {
  EnvGuard guard("EARSHOT_MODEL_BASE_URL");
  unsetenv("EARSHOT_MODEL_BASE_URL");
  const std::optional<ModelInfo> m = find_model("transcribe.cpp/voxtral-mini-4b-realtime-2602-q4_k_m");
  ASSERT_TRUE(m);
  EXPECT_TRUE(in_family("voxtral", m->name));
  EXPECT_EQ(model_file_name(*m), "Voxtral-Mini-4B-Realtime-2602-Q4_K_M.gguf");
  EXPECT_EQ(model_url(*m),
            "https://huggingface.co/handy-computer/Voxtral-Mini-4B-Realtime-2602-GGUF/resolve/main/"
            "Voxtral-Mini-4B-Realtime-2602-Q4_K_M.gguf");
  EXPECT_EQ(m->approx_bytes, 2830u * 1000 * 1000);
  EXPECT_TRUE(m->sha1.empty());  // none published
  EXPECT_EQ(find_model("Voxtral-Mini-4B-Realtime-2602-Q4_K_M.gguf")->name, m->name);
  for (const char* type : {"bf16", "f16", "q8_0", "q6_k", "q5_k_m"})
    EXPECT_TRUE(in_family("voxtral", std::string("transcribe.cpp/voxtral-mini-4b-realtime-2602-") + type)) << type;
}

// Every family's entry says how a download of it is checked, and no two entries
// share a name.
TEST(Registry, EveryEntryIsCheckedAndNamedOnce) {
  std::set<std::string> names;
  for (const ModelInfo& m : known_models()) {
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate " << m.name;
    EXPECT_TRUE(static_cast<bool>(m.check)) << m.name;
  }
}

TEST_F(ResolveTest, AVoxtralDownloadMustBeAVoxtralGguf) {
  const auto gguf = [&](const std::string& architecture) {
    runtime::GgufWriter w;
    w.set_architecture(architecture);
    w.add_tensor_f32("t", GGML_TYPE_F32, std::vector<int64_t>{64}, std::vector<float>(64, 0.5f));
    const std::filesystem::path at = dir_ / (architecture + ".gguf");
    w.write(at);
    return at;
  };
  const ModelInfo m = *find_model("transcribe.cpp/voxtral-mini-4b-realtime-2602-q8_0");
  EXPECT_NO_THROW(m.check(gguf("voxtral_realtime")));
  const Error e = error_of([&] { m.check(gguf("llama")); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(e.what()).find("not a Voxtral Realtime GGUF (architecture 'llama'"), std::string::npos)
      << e.what();
  std::ofstream(dir_ / "page.gguf") << "<html>404</html>" << std::string(100, ' ');
  EXPECT_THROW(m.check(dir_ / "page.gguf"), Error);
}

TEST_F(ResolveTest, Qwen3AsrResolvesOnlyWithBothFilesCached) {
  EnvGuard guard("EARSHOT_MODEL_BASE_URL");
  unsetenv("EARSHOT_MODEL_BASE_URL");
  const ModelInfo m = *find_model("qwen3-asr-0.6b");
  std::ofstream(dir_ / "Qwen3-ASR-0.6B-Q8_0.gguf") << "x";
  EXPECT_FALSE(is_cached(m, dir_));
  const Error e = error_of([&] { resolve_model("qwen3-asr-0.6b", dir_); });
  EXPECT_EQ(e.code(), ErrorCode::kIo);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("Run `earshot pull qwen3-asr-0.6b`"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mmproj-Qwen3-ASR-0.6B-Q8_0.gguf at " + (dir_ / "mmproj-Qwen3-ASR-0.6B-Q8_0.gguf").string()),
            std::string::npos)
      << msg;
  std::ofstream(dir_ / "mmproj-Qwen3-ASR-0.6B-Q8_0.gguf") << "x";
  EXPECT_TRUE(is_cached(m, dir_));
  EXPECT_EQ(resolve_model("qwen3-asr-0.6b", dir_), dir_ / "Qwen3-ASR-0.6B-Q8_0.gguf");
}

TEST_F(ResolveTest, UnknownNameListsTheKnownOnes) {
  const Error e = error_of([&] { resolve_model("tiny.xx", dir_); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("unknown model 'tiny.xx'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("large-v3-turbo-q5_0"), std::string::npos) << e.what();
}

TEST_F(ResolveTest, MissingPathIsAnIoError) {
  const Error e = error_of([&] { resolve_model((dir_ / "nope.bin").string(), dir_); });
  EXPECT_EQ(e.code(), ErrorCode::kIo);
  EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  EXPECT_EQ(error_of([&] { resolve_model(dir_.string(), dir_); }).code(), ErrorCode::kInvalidArgument);
}

class HeaderTest : public ResolveTest {
 protected:
  std::string template_bytes() {
    std::ifstream in(std::filesystem::path(EARSHOT_SHARED_DIR) / "models" / "for-tests-ggml-tiny.bin",
                     std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::filesystem::path write(const std::string& bytes) {
    const auto p = dir_ / "m.bin";
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string message(const std::string& bytes) {
    const Error e = error_of([&] { check_ggml_whisper_header(write(bytes)); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    return e.what();
  }
};

TEST_F(HeaderTest, AcceptsWhisperCppTemplates) {
  for (const char* name : {"for-tests-ggml-tiny.bin", "for-tests-ggml-base.en.bin", "for-tests-ggml-large.bin"})
    EXPECT_NO_THROW(check_ggml_whisper_header(std::filesystem::path(EARSHOT_SHARED_DIR) / "models" / name)) << name;
}

TEST_F(HeaderTest, RejectsWhatIsNotAWhisperFile) {
  const std::string good = template_bytes();
  std::string bad_magic = good;
  bad_magic[0] = 'x';
  EXPECT_NE(message(bad_magic).find("magic is 0x67676d78, expected 0x67676d6c"), std::string::npos);
  EXPECT_NE(message(good.substr(0, 20)).find("shorter than the 56-byte header"), std::string::npos);
  EXPECT_NE(message(good.substr(0, 1000)).find("truncated inside the mel filter bank"), std::string::npos);
  std::string bad_mels = good;
  bad_mels[40] = 0, bad_mels[41] = 0;  // n_mels = 0
  EXPECT_NE(message(bad_mels).find("n_mels = 0 is implausible"), std::string::npos);
  EXPECT_NE(message("<html>404</html>" + std::string(100, ' ')).find("magic"), std::string::npos);
}

}  // namespace
}  // namespace earshot::engine
