// earshot-make-qwen3asr: writes a random-weight Qwen3-ASR GGUF pair (text model,
// arch qwen3vl, + mmproj, projector qwen3a) as llama.cpp v0.5.0 converts the real ones.
//   earshot-make-qwen3asr --vocab third_party/src/llama.cpp/models/ggml-vocab-qwen2.gguf
//       --out PREFIX [--size tiny|0.6b|1.7b] [--seed N] [--type f16|q8_0|q4_0] [--mmproj-type f16|q8_0]
// writes PREFIX.gguf and PREFIX-mmproj.gguf; --type q8_0 or q4_0 then quantises
// the text model's matrices with libllama's quantizer (as llama-quantize does),
// and --mmproj-type q8_0 the mmproj's as convert_hf_to_gguf.py --outtype q8_0 does
// (default: q8_0 with a quantised text model, as ggml-org publishes the pair).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "common/error.h"
#include "model/qwen3asr/model_writer.h"

int main(int argc, char** argv) {
  try {
    std::string vocab, out, size = "tiny", type = "f16", mmproj_type;
    uint32_t seed = 1;
    for (int i = 1; i < argc; ++i) {
      const std::string_view flag = argv[i];
      if (i + 1 >= argc)
        throw earshot::Error(earshot::ErrorCode::kInvalidArgument, std::string(flag) + " needs a value");
      const char* value = argv[++i];
      if (flag == "--vocab") {
        vocab = value;
      } else if (flag == "--out") {
        out = value;
      } else if (flag == "--size") {
        size = value;
      } else if (flag == "--type") {
        type = value;
      } else if (flag == "--mmproj-type") {
        mmproj_type = value;
      } else if (flag == "--seed") {
        seed = static_cast<uint32_t>(std::strtoul(value, nullptr, 10));
      } else {
        throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "unknown option " + std::string(flag));
      }
    }
    if (vocab.empty() || out.empty()) {
      throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--vocab and --out are required");
    }
    earshot::qwen3asr::PairDims dims;
    if (size == "0.6b") {
      dims = earshot::qwen3asr::PairDims::real_0_6b();
    } else if (size == "1.7b") {
      dims = earshot::qwen3asr::PairDims::real_1_7b();
    } else if (size != "tiny") {
      throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--size is tiny, 0.6b or 1.7b, not " + size);
    }
    if (type != "f16" && type != "q8_0" && type != "q4_0")
      throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--type is f16, q8_0 or q4_0, not " + type);
    if (mmproj_type.empty()) mmproj_type = type == "f16" ? "f16" : "q8_0";
    if (mmproj_type != "f16" && mmproj_type != "q8_0")
      throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--mmproj-type is f16 or q8_0, not " + mmproj_type);
    const auto pair = earshot::qwen3asr::write_random_pair(dims, vocab, out, seed);
    if (type != "f16")
      earshot::qwen3asr::quantize_text_model(pair.text, type == "q8_0" ? GGML_TYPE_Q8_0 : GGML_TYPE_Q4_0);
    if (mmproj_type == "q8_0") earshot::qwen3asr::quantize_mmproj(pair.mmproj, GGML_TYPE_Q8_0);
    std::printf("wrote %s and %s\n", pair.text.string().c_str(), pair.mmproj.string().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-make-qwen3asr: %s\n", e.what());
    std::fprintf(
        stderr,
        "usage: earshot-make-qwen3asr --vocab ggml-vocab-qwen2.gguf --out PREFIX [--size tiny|0.6b|1.7b] [--seed N]\n"
        "                             [--type f16|q8_0|q4_0] [--mmproj-type f16|q8_0]\n");
    return 1;
  }
}
