// The GGUF reader and the weight placement: header, metadata, tensor table,
// then every tensor of the table loaded as if a model expected exactly those.
// Any exception other than earshot::Error, any sanitizer report is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "fuzz_input.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& path = earshot::fuzz::temp_file(".gguf");
  if (!earshot::fuzz::write_temp_file(path, data, size)) return 0;
  try {
    const auto gguf = earshot::runtime::GgufFile::open(path);
    std::vector<earshot::runtime::ExpectedTensor> expected;
    for (const auto& t : gguf.tensors()) expected.push_back({t.name, t.type, std::max(t.n_dims, 1), t.ne});
    const auto placements = earshot::runtime::place_gguf_tensors(gguf, expected);
    earshot::runtime::ModelWeights::load(earshot::runtime::ByteSource::file(path), placements, nullptr, gguf.label());
  } catch (const earshot::Error&) {
  }
  return 0;
}
