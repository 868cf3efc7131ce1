// The FFmpeg stream decoder (encoded audio of /asr, /v1/listen and uploads)
// fed arbitrary bytes in arbitrary pieces: the input's first bytes choose the
// piece sizes (fuzz_input.h). Its contract says the output is the same however
// the stream is cut, so a stream that decodes both in pieces and whole must give
// the same samples. Any exception other than earshot::Error, any sanitizer
// report or a difference is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <vector>

#include "audio/audio.h"
#include "common/error.h"
#include "fuzz_input.h"

namespace {

std::optional<std::vector<float>> decode(const std::vector<std::span<const uint8_t>>& pieces) {
  try {
    auto decoder = earshot::audio::StreamDecoder::create();
    std::vector<float> samples;
    for (const auto& piece : pieces) {
      const auto out = decoder->push(piece);
      samples.insert(samples.end(), out.begin(), out.end());
    }
    const auto tail = decoder->finish();
    samples.insert(samples.end(), tail.begin(), tail.end());
    return samples;
  } catch (const earshot::Error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto pieces = earshot::fuzz::pieces(data, size, 64);
  const auto cut = decode(pieces);
  if (!cut || pieces.size() < 2) return 0;
  const uint8_t* begin = pieces.front().data();
  const auto whole = decode({std::span<const uint8_t>(begin, data + size - begin)});
  earshot::fuzz::check(whole.has_value(), "a stream that decodes in pieces decodes whole");
  if (*whole != *cut) {
    size_t i = 0;
    while (i < whole->size() && i < cut->size() && (*whole)[i] == (*cut)[i]) ++i;
    std::fprintf(stderr, "whole: %zu samples, in %zu pieces: %zu samples, first difference at %zu\n", whole->size(),
                 pieces.size(), cut->size(), i);
    earshot::fuzz::check(false, "the same samples however the stream is cut");
  }
  return 0;
}
