// earshot-bench-voxtral: what batching Voxtral's decoder steps across streams
// gives on this machine (model/voxtral/step_batch.h). For each batch size B: B
// streams' contexts of --context positions; then, --reps times, one step of each
// stream as B one-stream graphs (each reads every decoder matrix and the output
// head) and as one B-stream graph (reads them once). Prints the medians, the
// step's rate in stream-steps per second and its weights' GB/s against the
// streaming read bandwidth measured on the same threads, and whether the batched
// logits equal the lone ones bit for bit.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/runtime/device.h"
#include "model/voxtral/kv_ring.h"
#include "model/voxtral/step_batch.h"
#include "tools/common/machine_limits.h"
#include "tools/common/tool_args.h"

using earshot::Error;
using earshot::ErrorCode;
namespace voxtral = earshot::voxtral;

namespace {

const char* kUsage =
    "usage: earshot-bench-voxtral --model M.gguf [--threads T] [--batches 1,2,4,8] [--context P] [--reps N]\n"
    "                             [--kernels rows|ggml]\n"
    "\n"
    "Voxtral's decoder step for B streams at once (default B = 1, 2, 4, 8): each stream's\n"
    "context holds P positions (default 64), then N times (default 5) one step of every\n"
    "stream as B graphs of one stream and as one graph of B; medians in ms. GB/s: the\n"
    "decoder's matrices and output head (read once per graph) over the graph's time, beside\n"
    "the streaming read bandwidth on the same threads (default 2). 'same' says whether\n"
    "each stream's batched logits equal its lone step's bit for bit. --kernels: the decoder's\n"
    "products on earshot's few-row op (rows, the default) or on ggml's kernels (ggml, as\n"
    "--cpu-kernels ggml runs them).\n";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double weight_bytes(const voxtral::Model& m) {
  double bytes = static_cast<double>(ggml_nbytes(m.tok_embd));
  for (const voxtral::DecoderLayer& L : m.layers)
    for (const ggml_tensor* w : {L.q_w, L.k_w, L.v_w, L.o_w, L.gate_w, L.up_w, L.down_w})
      bytes += static_cast<double>(ggml_nbytes(w));
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string model_path, batches_text = "1,2,4,8", kernel_name = "rows";
    int threads = 2, context = 64, reps = 5;
    earshot::tools::parse_options(argc, argv, kUsage,
                                  {{"--model", [&](const std::string& v) { model_path = v; }},
                                   {"--threads", [&](const std::string& v) { threads = std::stoi(v); }},
                                   {"--batches", [&](const std::string& v) { batches_text = v; }},
                                   {"--context", [&](const std::string& v) { context = std::stoi(v); }},
                                   {"--reps", [&](const std::string& v) { reps = std::stoi(v); }},
                                   {"--kernels", [&](const std::string& v) { kernel_name = v; }}});
    if (kernel_name != "rows" && kernel_name != "ggml")
      throw Error(ErrorCode::kInvalidArgument, "--kernels: rows or ggml, got " + kernel_name);
    if (model_path.empty()) throw Error(ErrorCode::kInvalidArgument, kUsage);
    const std::vector<int> batches = earshot::tools::parse_int_list(batches_text, "--batches");
    if (threads < 1 || context < 1 || reps < 1 || batches.empty() ||
        *std::min_element(batches.begin(), batches.end()) < 1)
      throw Error(ErrorCode::kInvalidArgument, "--threads, --context, --reps and every batch size must be >= 1");
    const auto model = voxtral::Model::load(model_path);
    const voxtral::Hparams& hp = model->hparams();
    const double bytes = weight_bytes(*model);
    const double bandwidth = earshot::tools::read_bandwidth_gbs(size_t{1} << 30, threads, 3);
    std::printf("model %s: decoder %d layers, d %d, vocab %d; matrices and head %.2f GB; %d threads; %s kernels\n",
                model_path.c_str(), hp.n_layer, hp.d, hp.n_vocab, bytes / 1e9, threads, kernel_name.c_str());
    std::printf("streaming read: %.1f GB/s on %d threads\n", bandwidth, threads);
    std::printf("%3s %12s %12s %10s %14s %8s %8s %5s\n", "B", "B lone ms", "batched ms", "speed-up", "steps/s batch",
                "GB/s", "x read", "same");

    ggml_backend_ptr backend = earshot::runtime::create_backend(model->device(), threads);
    earshot::runtime::GraphRunner runner(backend.get(), "bench steps");
    const auto scales = model->ada_scales(hp.default_delay);
    std::vector<ggml_fp16_t> scratch;
    std::vector<float> audio(static_cast<size_t>(hp.d));
    for (int i = 0; i < hp.d; ++i) audio[i] = static_cast<float>(0.05 * std::sin(0.37 * i));
    const voxtral::GraphKernels kernels{earshot::runtime::is_cpu(earshot::runtime::device_of(backend.get())), false,
                                        kernel_name == "rows"};
    using Clock = std::chrono::steady_clock;
    for (int b : batches) {
      std::vector<std::unique_ptr<voxtral::KvRing>> rings;
      for (int s = 0; s < b; ++s)
        rings.push_back(std::make_unique<voxtral::KvRing>(backend.get(), hp.n_layer, hp.kv_dim(), hp.window + 64,
                                                          GGML_TYPE_F16, context + reps + 8));
      auto request = [&](int s) {
        return voxtral::StepRequest{model.get(),
                                    rings[s].get(),
                                    hp.default_delay,
                                    scales.get(),
                                    (s * 131 + static_cast<int>(rings[s]->positions()) * 7) % hp.n_vocab,
                                    audio.data()};
      };
      // The contexts, all streams' steps together (fast), then the timed steps.
      for (int p = 0; p < context; ++p) {
        std::vector<voxtral::StepRequest> all;
        for (int s = 0; s < b; ++s) {
          rings[s]->reserve(1);
          all.push_back(request(s));
        }
        voxtral::run_steps(runner, 0, kernels, all, scratch);
        for (auto& r : rings) r->advance(1);
      }
      std::vector<double> lone_ms, batch_ms;
      bool same = true;
      for (int rep = 0; rep < reps; ++rep) {
        std::vector<float> lone;
        const auto t0 = Clock::now();
        for (int s = 0; s < b; ++s) {
          rings[s]->reserve(1);
          const voxtral::StepRequest r = request(s);
          const std::vector<float> l = voxtral::run_steps(runner, 0, kernels, std::span(&r, 1), scratch);
          lone.insert(lone.end(), l.begin(), l.end());
        }
        const auto t1 = Clock::now();
        // The same position again, now in one graph (the rings have not advanced).
        std::vector<voxtral::StepRequest> all;
        for (int s = 0; s < b; ++s) all.push_back(request(s));
        const std::vector<float> batched = voxtral::run_steps(runner, 0, kernels, all, scratch);
        const auto t2 = Clock::now();
        same = same && batched == lone;
        for (auto& r : rings) r->advance(1);
        lone_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        batch_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      const double lone = median(lone_ms), batch = median(batch_ms), gbs = bytes / 1e9 / (batch / 1e3);
      std::printf("%3d %12.1f %12.1f %9.2fx %14.1f %8.1f %8.2f %5s\n", b, lone, batch, lone / batch, b / (batch / 1e3),
                  gbs, gbs / bandwidth, same ? "yes" : "NO");
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-bench-voxtral: %s\n", e.what());
    return 1;
  }
}
