#include "tools/bench_model/batched_sessions.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "model/whisper/batch_decoder.h"
#include "model/whisper/session.h"

namespace earshot::tools {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double max_difference(const DecodeResult& a, const DecodeResult& b) {
  if (a.logits.size() != b.logits.size() || a.attention.size() != b.attention.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.logits.size(); ++i) d = std::max(d, double(std::fabs(a.logits[i] - b.logits[i])));
  for (size_t i = 0; i < a.attention.size(); ++i) d = std::max(d, double(std::fabs(a.attention[i] - b.attention[i])));
  return d;
}

}  // namespace

void bench_batched_sessions(const std::shared_ptr<const whisper::Model>& model, int threads, int reps, int steps,
                            int audio_seconds) {
  constexpr int kMaxBatch = 16;
  whisper::SessionOptions options;
  options.n_threads = threads;
  options.encoder_input = whisper::EncoderInput::kAudioOnly;
  std::vector<std::unique_ptr<whisper::Session>> sessions;
  std::mt19937 rng(11);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  std::vector<float> pcm(static_cast<size_t>(audio_seconds) * 16000);
  for (int i = 0; i < kMaxBatch; ++i) {
    sessions.push_back(std::make_unique<whisper::Session>(model, options));
    options.text = sessions.back()->text_ptr();
    for (float& x : pcm) x = noise(rng);
    sessions.back()->encode(pcm);
    sessions.back()->reset(1);
    const whisper::SpecialTokens& sp = sessions.back()->tokenizer().special();
    DecodeRequest prompt;
    prompt.tokens = {{sp.sot, sp.transcribe > 0 ? sp.transcribe : sp.sot, sp.no_timestamps}};
    sessions.back()->decode(prompt);
  }
  const int n_prompt = sessions[0]->n_past();
  const int vocabulary_limit = sessions[0]->tokenizer().special().timestamp_begin;
  const int n_ctx = model->hparams().n_text_ctx;
  steps = std::min(steps, n_ctx - n_prompt);
  // request[b][i]: session b's step i, a different token per session and step.
  std::vector<std::vector<DecodeRequest>> requests(kMaxBatch, std::vector<DecodeRequest>(steps));
  for (int b = 0; b < kMaxBatch; ++b) {
    for (int i = 0; i < steps; ++i) {
      requests[b][i].tokens = {{220 + (b * 37 + i * 11) % 5000}};
      requests[b][i].vocabulary_limit = vocabulary_limit;
    }
  }
  whisper::BatchExecutor executor(model, threads);
  std::printf(
      "batched decoder steps across sessions (%d s of audio each, %d tokens per session after a %d-token prompt, "
      "attention on), %d threads, median of %d:\n",
      audio_seconds, steps, n_prompt, threads, reps);
  for (int batch : {1, 2, 4, 8, 16}) {
    std::vector<double> t_lone, t_batched;
    double max_diff = 0;
    for (int r = 0; r < reps; ++r) {
      std::vector<std::vector<DecodeResult>> lone(batch);
      auto t0 = Clock::now();
      for (int i = 0; i < steps; ++i) {
        for (int b = 0; b < batch; ++b) lone[b].push_back(sessions[b]->decode(requests[b][i]));
      }
      auto t1 = Clock::now();
      for (int b = 0; b < batch; ++b) sessions[b]->rollback(n_prompt);
      std::vector<whisper::BatchExecutor::Item> items(batch);
      double batched_s = 0;
      for (int i = 0; i < steps; ++i) {
        for (int b = 0; b < batch; ++b) items[b] = {sessions[b].get(), &requests[b][i], {}, nullptr};
        auto s0 = Clock::now();
        executor.run(items);
        batched_s += std::chrono::duration<double>(Clock::now() - s0).count();
        for (int b = 0; b < batch; ++b) {
          max_diff = items[b].error ? INFINITY : std::max(max_diff, max_difference(items[b].result, lone[b][i]));
        }
      }
      for (int b = 0; b < batch; ++b) sessions[b]->rollback(n_prompt);
      t_lone.push_back(std::chrono::duration<double>(t1 - t0).count());
      t_batched.push_back(batched_s);
    }
    const double lone_s = median(t_lone) / steps, batched_s = median(t_batched) / steps;  // per step of all B
    std::printf(
        "batch %2d: step latency batched %8.2f ms, lone %7.2f ms per session (%8.2f ms for all %2d)  tokens/s "
        "batched %7.0f lone %7.0f  speedup %.2fx  max |diff| %.3g%s\n",
        batch, batched_s * 1e3, lone_s * 1e3 / batch, lone_s * 1e3, batch, batch / batched_s, batch / lone_s,
        lone_s / batched_s, max_diff, max_diff == 0 ? " (bit-identical)" : "");
  }
}

}  // namespace earshot::tools
