// What AlignAtt adds per decoder step on top of the model: reading the newest
// token's attended frame (z-normalise over the window, median filter, mean over
// heads), choosing beams over a Whisper vocabulary, and the repetition check.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>

#include "policy/alignatt/alignment.h"
#include "policy/decoding/token_decoder.h"
#include "policy/text_utils.h"

namespace {

using namespace earshot;

// One decoder step of a long pass: add the step's attention, read the newest
// token's frame. args: alignment heads, decoder calls already in the pass (the
// first carries a 40-token prompt), window (0 = every call, SimulStreaming; 16 =
// WhisperLiveKit).
void BM_AlignmentStep(benchmark::State& state) {
  const int heads = static_cast<int>(state.range(0)), calls = static_cast<int>(state.range(1));
  const int window = static_cast<int>(state.range(2));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  policy::AlignmentAccumulator acc(window);
  auto call = [&](int tokens) {
    DecodeResult r;
    r.n_sequences = 1;
    r.n_heads = heads;
    r.n_tokens = tokens;
    r.n_frames = 1500;
    r.attention.resize(static_cast<size_t>(heads) * tokens * 1500);
    for (float& v : r.attention) v = u(rng);
    return r;
  };
  for (int c = 0; c < calls; ++c) acc.add(call(c == 0 ? 40 : 1));
  // Fresh rows each step (a repeated row would make the window's spread 0, a fast path).
  std::vector<DecodeResult> steps;
  for (int i = 0; i < 64; ++i) steps.push_back(call(1));
  size_t next = 0;
  for (auto _ : state) {
    acc.add(steps[next++ % steps.size()]);
    benchmark::DoNotOptimize(acc.most_attended(0, 1000));
  }
}
BENCHMARK(BM_AlignmentStep)
    ->Args({6, 16, 16})
    ->Args({6, 16, 0})
    ->Args({6, 400, 16})
    ->Args({6, 400, 0})
    ->Args({20, 400, 16})
    ->Args({20, 400, 0})
    ->Unit(benchmark::kMicrosecond);

// args: beams. One step over a 51865-token vocabulary.
void BM_BeamStep(benchmark::State& state) {
  const int beams = static_cast<int>(state.range(0)), vocab = 51865;
  std::mt19937 rng(2);
  std::normal_distribution<float> n(0.0f, 3.0f);
  std::vector<float> logprobs(static_cast<size_t>(beams) * vocab);
  for (float& v : logprobs) v = n(rng);
  for (int b = 0; b < beams; ++b) policy::log_softmax(std::span<float>(logprobs.data() + b * vocab, vocab));
  const std::vector<int> frames(beams, 0);
  for (auto _ : state) {
    std::unique_ptr<policy::TokenDecoder> d;
    if (beams == 1) {
      d = std::make_unique<policy::GreedyDecoder>(50257);
    } else {
      d = std::make_unique<policy::BeamSearchDecoder>(50257, beams);
    }
    benchmark::DoNotOptimize(d->update(logprobs, vocab, frames));
  }
}
BENCHMARK(BM_BeamStep)->Arg(1)->Arg(3)->Arg(5)->Unit(benchmark::kMicrosecond);

void BM_FindRepetition(benchmark::State& state) {
  std::vector<std::string> words;
  for (int i = 0; i < state.range(0); ++i) words.push_back("w" + std::to_string(i % 97));
  for (auto _ : state) benchmark::DoNotOptimize(policy::find_repetition(words));
}
BENCHMARK(BM_FindRepetition)->Arg(64)->Arg(128)->Unit(benchmark::kMicrosecond);

}  // namespace
