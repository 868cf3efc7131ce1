// The FFmpeg stream decoder (encoded audio of /asr, /v1/listen and uploads)
// fed arbitrary bytes in arbitrary pieces: the input's first bytes choose the
// piece sizes (fuzz_input.h). Its contract says the output is the same however
// the stream is cut, so a stream that decodes both in pieces and whole must give
// the same samples. Both run under one output budget, as an upload does
// (Core::decode_upload: each push may make what is left of it), so a
// decompression bomb stops at the budget: the cut and the whole decode either
// both stop there or give the same samples, never more than the budget, and
// every sample is finite (NaN and infinity are refused). Any exception other
// than earshot::Error, any sanitizer report or a difference is a finding.
#include <cmath>
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

// 30 s of 16 kHz audio: far more than any input of max_len (16 KB) holds at a
// sane bit rate, far less than a bomb of that size makes.
constexpr size_t kBudget = 30 * 16000;

struct Outcome {
  std::optional<std::vector<float>> samples;  // nullopt: an earshot::Error
  bool over_budget = false;                   // the error was the budget's
};

Outcome decode(const std::vector<std::span<const uint8_t>>& pieces) {
  Outcome outcome;
  std::vector<float> samples;
  try {
    auto decoder = earshot::audio::StreamDecoder::create();
    auto take = [&](const std::vector<float>& out) {
      earshot::fuzz::check(out.size() <= kBudget - samples.size(), "a push makes no more than its limit");
      samples.insert(samples.end(), out.begin(), out.end());
    };
    for (const auto& piece : pieces) {
      decoder->set_output_limit(kBudget - samples.size());
      take(decoder->push(piece));
    }
    decoder->set_output_limit(kBudget - samples.size());
    take(decoder->finish());
  } catch (const earshot::audio::OutputLimitExceeded& e) {
    earshot::fuzz::check(e.limit() <= kBudget, "the limit reported is the one set");
    outcome.over_budget = true;
    return outcome;
  } catch (const earshot::Error&) {
    return outcome;
  }
  for (float v : samples) earshot::fuzz::check(std::isfinite(v), "every sample is a finite number");
  outcome.samples = std::move(samples);
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto pieces = earshot::fuzz::pieces(data, size, 64);
  const Outcome cut = decode(pieces);
  if (pieces.size() < 2) return 0;
  const uint8_t* begin = pieces.front().data();
  const Outcome whole = decode({std::span<const uint8_t>(begin, data + size - begin)});
  if (cut.over_budget) {
    earshot::fuzz::check(whole.over_budget, "a stream over the budget in pieces is over it whole");
    return 0;
  }
  if (!cut.samples) return 0;
  earshot::fuzz::check(whole.samples.has_value(), "a stream that decodes in pieces decodes whole");
  if (*whole.samples != *cut.samples) {
    size_t i = 0;
    while (i < whole.samples->size() && i < cut.samples->size() && (*whole.samples)[i] == (*cut.samples)[i]) ++i;
    std::fprintf(stderr, "whole: %zu samples, in %zu pieces: %zu samples, first difference at %zu\n",
                 whole.samples->size(), pieces.size(), cut.samples->size(), i);
    earshot::fuzz::check(false, "the same samples however the stream is cut");
  }
  return 0;
}
