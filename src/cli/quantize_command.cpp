// `earshot quantize IN OUT TYPE`: an earshot-layout model file (Whisper or
// Parakeet .bin, FastConformer GGUF, Voxtral Realtime GGUF) with its matrices quantised, as the family
// reading it says (engine/model_files.h).
#include <cstdio>

#include "cli/commands.h"
#include "common/command_line.h"
#include "common/error.h"
#include "engine/model_files.h"
#include "model/quantize/quantize.h"

namespace earshot::cli {

int run_quantize(const CommandArgs& argv) {
  std::string types;
  for (ggml_type t : quantize::quantize_types()) types += std::string(types.empty() ? "" : ", ") + ggml_type_name(t);
  Args args("quantize",
            "earshot quantize IN OUT TYPE\n\nWrites OUT: the model IN with its matrices quantised to TYPE (" + types +
                ").\nIN: a Whisper .bin (whisper.cpp's layout; earshot reads q4_0, q4_1, q5_0, q5_1, q8_0 for it),\n"
                "a Parakeet .bin (whisper.cpp's converter) or a FastConformer GGUF (earshot's converters), with\n"
                "f16 or f32 matrices; a Voxtral Realtime GGUF (bf16, f16 or f32) to transcribe.cpp's presets\n"
                "(q8_0, q6_K, q5_K = Q5_K_M, q4_K = Q4_K_M); or either file of a Qwen3-ASR pair (the text\n"
                "GGUF to q8_0 or q4_0 by libllama's quantizer, the mmproj to q8_0). Norms, biases, convolution\n"
                "kernels and positional tensors keep their types, as whisper.cpp's quantize leaves them; a matrix\n"
                "whose rows are not whole blocks of TYPE keeps its.");
  if (!args.parse_or_help(argv, {.required = {}, .positional = true})) return 0;
  if (args.positional().size() != 3)
    throw Error(ErrorCode::kInvalidArgument, "expected IN OUT TYPE (see earshot quantize --help)");
  const std::string& in = args.positional()[0];
  const std::string& out = args.positional()[1];
  const auto type = quantize::parse_quantize_type(args.positional()[2]);
  if (!type)
    throw Error(ErrorCode::kInvalidArgument, "unknown type '" + args.positional()[2] + "' (one of " + types + ")");
  const quantize::QuantizeReport r = engine::quantize_model_file(in, out, *type);
  std::printf("%s (%s): %d matrices quantised to %s; tensor data %.1f MiB -> %.1f MiB\n", r.family.c_str(),
              r.layout.c_str(), r.n_quantized, ggml_type_name(*type), r.bytes_in / 1048576.0, r.bytes_out / 1048576.0);
  if (!r.kept_partial_rows.empty()) {
    std::printf("%zu matrices keep their type (rows not whole %s blocks of %lld):", r.kept_partial_rows.size(),
                ggml_type_name(*type), static_cast<long long>(ggml_blck_size(*type)));
    for (size_t i = 0; i < r.kept_partial_rows.size() && i < 6; ++i) std::printf(" %s", r.kept_partial_rows[i].c_str());
    std::printf("%s\n", r.kept_partial_rows.size() > 6 ? " ..." : "");
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace earshot::cli
