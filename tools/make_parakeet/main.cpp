// earshot-make-parakeet: a random-weight FastConformer-TDT model (random_model.h)
// written in both formats earshot reads, the same weights in each: whisper.cpp's
// legacy Parakeet .bin (--bin) and earshot's GGUF (--gguf).
#include <cstdio>
#include <string>

#include "common/error.h"
#include "model/fastconformer/random_model.h"
#include "tools/common/tool_args.h"

namespace fc = earshot::fastconformer;

namespace {

const char* kUsage =
    "usage: earshot-make-parakeet [--bin FILE] [--gguf FILE] [--dims tiny|small|real] [--seed N] [--type "
    "f32|f16|q8_0..]\n"
    "                             [--blank-bias X] [--n-layer N] [--n-state N] [--rnnt 1] [--probe 1|-1]\n"
    "                             [--streaming 1] [--att-left N] [--att-right N] [--prompt 1]\n"
    "\n"
    "Writes one random-weight Parakeet-TDT model: --bin in whisper.cpp's legacy format (f32 or f16),\n"
    "--gguf in earshot's (any ggml type for the matrices). small: d_model 64, 4 heads, 2 layers,\n"
    "64 pieces; real: parakeet-tdt-0.6b (1024, 8 heads, 24 layers, 8192 pieces). Features are\n"
    "real-sized in both (128 mels, n_fft 512, 400-sample window); tiny (fuzz seeds): d_model 8,\n"
    "1 layer, 8 pieces, 8 mels, n_fft 16. --probe 1|-1: the probe models\n"
    "of the parity tool (the same encoder; see src/model/fastconformer/random_model.h).\n"
    "--streaming 1: a cache-aware streaming model shaped like Nemotron streaming (GGUF only;\n"
    "causal convs, LayerNorm conv norm, chunked_limited attention [--att-left, --att-right],\n"
    "right contexts 0, 1, 6, 13, RNN-T; real: 1024 pieces, left context 70).\n"
    "--prompt 1: Nemotron 3.5's language prompt kernel (GGUF only; random_model.h: languages\n"
    "en-US, en-GB, de-DE, fr-FR, es-ES and auto, their tags the last five pieces).\n";

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string bin, gguf, type = "f32";
    fc::RandomModelOptions o;
    earshot::tools::parse_options(
        argc, argv, kUsage,
        {{"--bin", [&](const std::string& v) { bin = v; }},
         {"--gguf", [&](const std::string& v) { gguf = v; }},
         {"--dims", [&](const std::string& v) { o.dims = v; }},
         {"--type", [&](const std::string& v) { type = v; }},
         {"--seed", [&](const std::string& v) { o.seed = static_cast<unsigned>(std::stoul(v)); }},
         {"--blank-bias", [&](const std::string& v) { o.blank_bias = std::stof(v); }},
         {"--n-layer", [&](const std::string& v) { o.n_layer = std::stoi(v); }},
         {"--n-state", [&](const std::string& v) { o.n_state = std::stoi(v); }},
         {"--rnnt", [&](const std::string& v) { o.rnnt = v == "1"; }},
         {"--probe", [&](const std::string& v) { o.probe = std::stoi(v); }},
         {"--streaming", [&](const std::string& v) { o.streaming = v == "1"; }},
         {"--att-left", [&](const std::string& v) { o.att_left = std::stoi(v); }},
         {"--att-right", [&](const std::string& v) { o.att_right = std::stoi(v); }},
         {"--prompt", [&](const std::string& v) { o.prompt = v == "1"; }}});
    if (bin.empty() && gguf.empty()) throw earshot::Error(earshot::ErrorCode::kInvalidArgument, kUsage);
    o.matrix_type = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t)
      if (ggml_type_size(static_cast<ggml_type>(t)) != 0 && type == ggml_type_name(static_cast<ggml_type>(t)))
        o.matrix_type = static_cast<ggml_type>(t);
    if (o.matrix_type == GGML_TYPE_COUNT)
      throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--type " + type + ": not a ggml type");
    const fc::ModelData data = fc::random_model(o);
    if (!bin.empty()) fc::write_legacy(bin, data);
    if (!gguf.empty()) fc::write_gguf(gguf, data);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-make-parakeet: %s\n", e.what());
    return 1;
  }
}
