// The transducer family's published files: ggml-org's whisper.cpp Parakeet .bin
// files and transcribe.cpp's Parakeet-TDT and Nemotron streaming GGUFs.
#include <string>
#include <utility>

#include "engine/transducer/registration.h"

namespace earshot::engine {

namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kMB = 1000 * 1000;

// ggml-org's Parakeet-TDT files (whisper.cpp's scripts/upload-parakeet.py and its
// Ruby bindings' URI list): ggml-NAME.bin in this repository.
const char* const kParakeetBaseUrl = "https://huggingface.co/ggml-org/parakeet-GGUF/resolve/main";

}  // namespace

// whisper.cpp's scripts/upload-parakeet.py names (ggml-parakeet-tdt-0.6b-v3-TYPE.bin;
// "parakeet-tdt-0.6b-v3" is the f16 file), sizes approximate (0.6B parameters).
// Then transcribe.cpp's published GGUFs of the transducers earshot runs
// (Parakeet-TDT v2/v3: no linear biases; Nemotron streaming EN and 3.5:
// cache-aware RNN-T), as its docs/models/MODEL.md lists them (release 0.2.1):
// each in handy-computer/MODEL-gguf as MODEL-TYPE.gguf, the size it states
// (decimal GB/MB). It states no hashes: pulls verify Content-Length and the GGUF
// layout. Its RNN-T, CTC, 1.1B and unified models carry linear biases, a CTC head
// or chunked_limited_with_rc attention, which earshot refuses at load.
std::vector<models::ModelInfo> transducer_catalogue() {
  std::vector<models::ModelInfo> out;
  const std::pair<const char*, uint64_t> legacy[] = {
      {"f32", 2400}, {"f16", 1250}, {"q8_0", 700}, {"q4_0", 420}, {"q4_k", 420}};
  for (const auto& [type, mib] : legacy) {
    models::ModelInfo m{std::string("parakeet-tdt-0.6b-v3-") + type, mib * kMiB, "", kParakeetBaseUrl};
    m.check = models::check_ggml_parakeet_header;
    if (std::string(type) == "f16") m.aliases = {"parakeet-tdt-0.6b-v3"};
    out.push_back(std::move(m));
  }
  struct Published {
    const char* model;
    uint64_t mb[6];  // F32, F16, Q8_0, Q6_K, Q5_K_M, Q4_K_M
  };
  const Published published[] = {
      {"parakeet-tdt-0.6b-v3", {2510, 1260, 740, 627, 565, 502}},
      {"parakeet-tdt-0.6b-v2", {2470, 1240, 730, 608, 547, 483}},
      {"nemotron-speech-streaming-en-0.6b", {2300, 1160, 696, 573, 514, 453}},
      {"nemotron-3.5-asr-streaming-0.6b", {2380, 1190, 716, 593, 534, 473}},
  };
  const char* types[6] = {"F32", "F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M"};
  for (const Published& p : published)
    for (int i = 0; i < 6; ++i)
      out.push_back(
          models::transcribe_cpp_file(p.model, types[i], p.mb[i] * kMB, models::check_published_parakeet_header));
  return out;
}

}  // namespace earshot::engine
