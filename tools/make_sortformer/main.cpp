// earshot-make-sortformer: writes a random-weight Sortformer GGUF
// (sortformer::write_random_model): small dimensions, or --real 1 for
// diar_streaming_sortformer_4spk-v2's, matrices in f32, f16 or q8_0; the
// residual branches' output projections scaled (--residual-scale).
#include <cstdio>
#include <string>

#include "common/error.h"
#include "model/sortformer/random_model.h"
#include "tools/common/tool_args.h"

using earshot::Error;
using earshot::ErrorCode;

namespace {
const char* kUsage =
    "usage: earshot-make-sortformer --out M.gguf [--real 1] [--type f32|f16|q8_0] [--seed N] [--residual-scale X]\n"
    "  --residual-scale: the residual branches' output projections times X (default: real 0.2, small 1)\n";
}

int main(int argc, char** argv) {
  try {
    std::string out, type = "f32";
    earshot::sortformer::RandomModelOptions o;
    earshot::tools::parse_options(
        argc, argv, kUsage,
        {{"--out", [&](const std::string& v) { out = v; }},
         {"--real", [&](const std::string& v) { o.real = v == "1"; }},
         {"--type", [&](const std::string& v) { type = v; }},
         {"--seed", [&](const std::string& v) { o.seed = std::stoul(v); }},
         {"--residual-scale", [&](const std::string& v) { o.residual_scale = std::stof(v); }}});
    if (out.empty()) throw Error(ErrorCode::kInvalidArgument, kUsage);
    if (type == "f16")
      o.matrix_type = GGML_TYPE_F16;
    else if (type == "q8_0")
      o.matrix_type = GGML_TYPE_Q8_0;
    else if (type != "f32")
      throw Error(ErrorCode::kInvalidArgument, "--type " + type + ": f32, f16 or q8_0");
    earshot::sortformer::write_random_model(out, o);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-make-sortformer: %s\n", e.what());
    return 1;
  }
}
