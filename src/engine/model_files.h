// What earshot does with a model file outside a session: quantise it (`earshot
// quantize`) and say what it is (`earshot models`), each by asking the family
// that reads the file (Family::quantize, Family::summarize).
//
//   const quantize::QuantizeReport r = engine::quantize_model_file("f16.bin", "q8.bin", GGML_TYPE_Q8_0);
//   const quantize::FileSummary s = engine::summarize_model_file("q8.bin");  // "Whisper", ..., "q8_0"
#pragma once

#include <ggml.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "engine/families.h"
#include "model/quantize/quantize.h"

namespace earshot::engine {

// Writes `out` (through out.part, renamed when complete): `in` with its matrices in
// `type`, as the family reading `in` quantises them. Throws Error:
// kInvalidArgument for a type outside quantize::quantize_types(), `out` being
// `in`, or what the family refuses (a quantised input, a type its loader does
// not read); kUnsupported for a file of a family that does not quantise, or no
// family's, naming what it is; kInvalidModel, kIo.
quantize::QuantizeReport quantize_model_file(const std::filesystem::path& in, const std::filesystem::path& out,
                                             ggml_type type);

// A summary of a file no family reads, from another registry (the diarization stage's).
using FileSummarizer =
    std::function<std::optional<quantize::FileSummary>(const ModelFile& file, const std::filesystem::path& path)>;

// What the file is: the family reading it says (Family::summarize), else the
// first of `others` that knows it, else quantize::summarize_other_file. Never
// throws: an unreadable file says so ("unreadable", the error's message).
quantize::FileSummary summarize_model_file(const std::filesystem::path& path,
                                           const std::vector<FileSummarizer>& others = {});

}  // namespace earshot::engine
