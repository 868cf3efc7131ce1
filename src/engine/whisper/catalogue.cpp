// The Whisper family's published files: whisper.cpp's models/download-ggml-model.sh.
#include "engine/whisper/registration.h"

namespace earshot::engine {

namespace {

constexpr uint64_t kMiB = 1024 * 1024;
const char* const kTinydiarizeBaseUrl = "https://huggingface.co/akashmjn/tinydiarize-whisper.cpp/resolve/main";

}  // namespace

// Names as in whisper.cpp's models/download-ggml-model.sh; SHA-1s and the sizes of
// unquantised models from its models/README.md; quantised sizes are approximate.
// Each file is ggml-NAME.bin, checked as a ggml Whisper header.
std::vector<models::ModelInfo> whisper_catalogue() {
  struct Entry {
    const char* name;
    uint64_t mib;
    const char* sha1;
    const char* repository = models::kDefaultBaseUrl;
  };
  const Entry entries[] = {
      {"tiny", 75, "bd577a113a864445d4c299885e0cb97d4ba92b5f"},
      {"tiny.en", 75, "c78c86eb1a8faa21b369bcd33207cc90d64ae9df"},
      {"tiny-q5_1", 31, ""},
      {"tiny.en-q5_1", 31, ""},
      {"tiny-q8_0", 42, ""},
      {"base", 142, "465707469ff3a37a2b9b8d8f89f2f99de7299dac"},
      {"base.en", 142, "137c40403d78fd54d454da0f9bd998f78703390c"},
      {"base-q5_1", 57, ""},
      {"base.en-q5_1", 57, ""},
      {"base-q8_0", 78, ""},
      {"small", 466, "55356645c2b361a969dfd0ef2c5a50d530afd8d5"},
      {"small.en", 466, "db8a495a91d927739e50b3fc1cc4c6b8f6c2d022"},
      {"small.en-tdrz", 465, "b6c6e7e89af1a35c08e6de56b66ca6a02a2fdfa1", kTinydiarizeBaseUrl},
      {"small-q5_1", 181, ""},
      {"small.en-q5_1", 181, ""},
      {"small-q8_0", 252, ""},
      {"medium", 1536, "fd9727b6e1217c2f614f9b698455c4ffd82463b4"},
      {"medium.en", 1536, "8c30f0e44ce9560643ebd10bbe50cd20eafd3723"},
      {"medium-q5_0", 514, ""},
      {"medium.en-q5_0", 514, ""},
      {"medium-q8_0", 785, ""},
      {"large-v1", 2970, "b1caaf735c4cc1429223d5a74f0f4d0b9b59a299"},
      {"large-v2", 2970, "0f4c8e34f21cf1a914c59d8b3ce882345ad349d6"},
      {"large-v2-q5_0", 1126, "00e39f2196344e901b3a2bd5814807a769bd1630"},
      {"large-v2-q8_0", 1536, ""},
      {"large-v3", 2970, "ad82bf6a9043ceed055076d0fd39f5f186ff8062"},
      {"large-v3-q5_0", 1126, "e6e2ed78495d403bef4b7cff42ef4aaadcfea8de"},
      {"large-v3-turbo", 1536, "4af2b29d7ec73d781377bfd1758ca957a807e941"},
      {"large-v3-turbo-q5_0", 547, "e050f7970618a659205450ad97eb95a18d69c9ee"},
      {"large-v3-turbo-q8_0", 834, ""},
  };
  std::vector<models::ModelInfo> out;
  for (const Entry& e : entries) {
    models::ModelInfo m{e.name, e.mib * kMiB, e.sha1, e.repository};
    m.check = models::check_ggml_whisper_header;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace earshot::engine
