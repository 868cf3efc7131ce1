// earshot-bench-voxtral: what batching Voxtral's decoder steps across streams
// gives on this machine (model/voxtral/step_batch.h). For each batch size B: B
// streams' contexts of --context positions; then, --reps times, one step of each
// stream as B one-stream graphs (each reads every decoder matrix and the output
// head) and as one B-stream graph (reads them once). Prints the medians, the
// step's rate in stream-steps per second and its weights' GB/s against the
// streaming read bandwidth measured on the same threads, and whether the batched
// logits equal the lone ones bit for bit.
//
// With --audio A.wav: one stream over the file instead (pushed in --chunk-ms
// pieces, then finished), every encoder and decoder graph timed: the encoder's
// ms per audio second and GFLOP/s beside OpenBLAS's sgemm and earshot's int8 op
// at its products' shape (the slots a graph took), the decoder's ms per step and
// GB/s beside the read, and the compute per audio second of both (under 1000 ms:
// a live stream's compute fits these threads).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "common/error.h"
#include "model/runtime/device.h"
#include "model/voxtral/kv_ring.h"
#include "model/voxtral/step_batch.h"
#include "model/voxtral/stream.h"
#include "tools/common/machine_limits.h"
#include "tools/common/tool_args.h"

using earshot::Error;
using earshot::ErrorCode;
namespace voxtral = earshot::voxtral;

namespace {

const char* kUsage =
    "usage: earshot-bench-voxtral --model M.gguf [--threads T] [--batches 1,2,4,8] [--context P] [--reps N]\n"
    "                             [--kernels rows|ggml]\n"
    "       earshot-bench-voxtral --model M.gguf --audio A.wav [--chunk-ms MS] [--min-encoder-slots N]\n"
    "                             [--threads T] [--kernels rows|ggml]\n"
    "\n"
    "Voxtral's decoder step for B streams at once (default B = 1, 2, 4, 8): each stream's\n"
    "context holds P positions (default 64), then N times (default 5) one step of every\n"
    "stream as B graphs of one stream and as one graph of B; medians in ms. GB/s: the\n"
    "decoder's matrices and output head (read once per graph) over the graph's time, beside\n"
    "the streaming read bandwidth on the same threads (default 2). 'same' says whether\n"
    "each stream's batched logits equal its lone step's bit for bit. --kernels: the decoder's\n"
    "products on earshot's few-row op (rows, the default) or on ggml's kernels (ggml, as\n"
    "--cpu-kernels ggml runs them).\n"
    "\n"
    "--audio: one stream over the WAV file (16 kHz) in --chunk-ms pieces (default 80: a\n"
    "slot, as a live client's audio comes), then finished: the encoder's and the decoder's\n"
    "ms per audio second, the encoder's GFLOP/s beside OpenBLAS's sgemm and the int8 op at\n"
    "its products' shape, the decoder's ms per step and GB/s beside the read.\n"
    "--min-encoder-slots: the slots an encoder graph waits for (default 4; 1: each as it comes).\n";

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

// Multiply-adds x 2 of the encoder's matrices per encoder frame, and of the
// projector per slot.
double encoder_flop_per_frame(const voxtral::Model& m) {
  double params = 0;
  for (const voxtral::EncoderLayer& L : m.enc_layers)
    for (const ggml_tensor* w : {L.q_w, L.k_w, L.v_w, L.o_w, L.gate_w, L.up_w, L.down_w})
      params += static_cast<double>(ggml_nelements(w));
  return 2.0 * params;
}

int run_stream(const std::shared_ptr<const voxtral::Model>& model, const std::string& model_path,
               const std::string& audio_path, int chunk_ms, int min_slots, int threads, bool rows) {
  using Clock = std::chrono::steady_clock;
  const voxtral::Hparams& hp = model->hparams();
  const std::vector<float> pcm = earshot::audio::load_wav_file(audio_path);
  const double seconds = static_cast<double>(pcm.size()) / hp.sample_rate;
  double enc_ns = 0, dec_ns = 0;
  int enc_graphs = 0, dec_graphs = 0;
  std::vector<double> dec_ms;  // each decoder graph: a context's prompt, then its steps
  voxtral::StreamOptions options;
  options.threads = threads;
  options.rows_decoder = rows;
  options.min_encoder_slots = min_slots;
  options.on_pass = [&](earshot::ModelPass pass, std::chrono::nanoseconds elapsed) {
    if (pass == earshot::ModelPass::kEncoder) {
      enc_ns += static_cast<double>(elapsed.count());
      ++enc_graphs;
    } else {
      dec_ns += static_cast<double>(elapsed.count());
      ++dec_graphs;
      dec_ms.push_back(static_cast<double>(elapsed.count()) / 1e6);
    }
  };
  voxtral::Stream stream(model, options);
  stream.warmup();
  enc_ns = dec_ns = 0;
  enc_graphs = dec_graphs = 0;
  dec_ms.clear();
  const size_t chunk = std::max<size_t>(1, static_cast<size_t>(hp.sample_rate) * chunk_ms / 1000);
  const auto t0 = Clock::now();
  for (size_t at = 0; at < pcm.size(); at += chunk)
    stream.push(std::span<const float>(pcm).subspan(at, std::min(chunk, pcm.size() - at)));
  stream.finish();
  const double wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  // The slots encoded: the context's left padding, the audio and its right padding.
  const int64_t samples = static_cast<int64_t>(pcm.size());
  const double slots = static_cast<double>(
      hp.n_left_pad + (samples + voxtral::right_padding(hp, stream.delay(), samples)) / hp.samples_per_slot());
  const int frames_per_slot = hp.mel_frames_per_slot / 2;
  const double enc_frames = slots * frames_per_slot;
  const double flop = enc_frames * encoder_flop_per_frame(*model);
  const int64_t rows_per_graph = std::max<int64_t>(1, static_cast<int64_t>(enc_frames / std::max(1, enc_graphs)));
  const earshot::tools::GemmShape shape{rows_per_graph, hp.enc_ff, hp.enc_d};
  const double sgemm = earshot::tools::openblas_sgemm_gflops(shape, threads, 3);
  const double int8 = earshot::tools::q8_op_gflops(shape, threads, 3);
  const double bandwidth = earshot::tools::read_bandwidth_gbs(size_t{1} << 30, threads, 3);
  const double bytes = weight_bytes(*model);
  // A step's time: the median graph (the prompts, one per context, are few and long).
  const double step_ms = dec_ms.empty() ? 0.0 : median(dec_ms);
  std::printf("model %s: encoder %s matrices (%d converted to Q8_0), decoder %s; %d threads; %s kernels\n",
              model_path.c_str(), ggml_type_name(model->enc_layers[0].gate_w->type), model->int8_encoder_matrices(),
              ggml_type_name(model->matrix_type()), threads, rows ? "rows" : "ggml");
  std::printf("audio %s: %.2f s in %d ms chunks; %.0f slots (with the right padding), wall %.0f ms\n",
              audio_path.c_str(), seconds, chunk_ms, slots, wall_ms);
  std::printf(
      "encoder: %d graphs (%.1f frames each), %.1f ms per audio second, %.1f GFLOP/s; "
      "at %lldx%lldx%lld OpenBLAS sgemm %.1f, int8 op %.1f GFLOP/s\n",
      enc_graphs, enc_frames / std::max(1, enc_graphs), enc_ns / 1e6 / seconds, flop / enc_ns,
      static_cast<long long>(shape.m), static_cast<long long>(shape.n), static_cast<long long>(shape.k), sgemm, int8);
  // The first decoder graph: the context's start over the silence in front (once per
  // stream); the second: the first context's prompt after it.
  const int cached = stream.context_start_slots();
  std::printf(
      "decoder: %d graphs in %d context(s); the start over the silence (once per stream, %d positions) %.0f ms, "
      "a context's prompt (%d positions) %.0f ms; a step %.1f ms (median; %.1f GB/s of matrices and head, "
      "%.2f of the %.1f GB/s read); %.1f ms per audio second\n",
      dec_graphs, stream.contexts(), cached, dec_ms.size() > 0 ? dec_ms[0] : 0.0,
      1 + hp.n_left_pad + stream.delay() - cached, dec_ms.size() > 1 ? dec_ms[1] : 0.0, step_ms, bytes / 1e6 / step_ms,
      bytes / 1e6 / step_ms / bandwidth, bandwidth, dec_ns / 1e6 / seconds);
  std::printf("compute per audio second: %.0f ms (%s)\n", (enc_ns + dec_ns) / 1e6 / seconds,
              (enc_ns + dec_ns) / 1e9 < seconds ? "fits these threads" : "more than these threads give");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  earshot::tools::use_openblas_best_kernels(argv);
  try {
    std::string model_path, batches_text = "1,2,4,8", kernel_name = "rows", audio_path;
    int threads = 2, context = 64, reps = 5, chunk_ms = 80, min_slots = voxtral::StreamOptions{}.min_encoder_slots;
    earshot::tools::parse_options(argc, argv, kUsage,
                                  {{"--model", [&](const std::string& v) { model_path = v; }},
                                   {"--threads", [&](const std::string& v) { threads = std::stoi(v); }},
                                   {"--batches", [&](const std::string& v) { batches_text = v; }},
                                   {"--context", [&](const std::string& v) { context = std::stoi(v); }},
                                   {"--reps", [&](const std::string& v) { reps = std::stoi(v); }},
                                   {"--kernels", [&](const std::string& v) { kernel_name = v; }},
                                   {"--audio", [&](const std::string& v) { audio_path = v; }},
                                   {"--chunk-ms", [&](const std::string& v) { chunk_ms = std::stoi(v); }},
                                   {"--min-encoder-slots", [&](const std::string& v) { min_slots = std::stoi(v); }}});
    if (kernel_name != "rows" && kernel_name != "ggml")
      throw Error(ErrorCode::kInvalidArgument, "--kernels: rows or ggml, got " + kernel_name);
    if (model_path.empty()) throw Error(ErrorCode::kInvalidArgument, kUsage);
    const std::vector<int> batches = earshot::tools::parse_int_list(batches_text, "--batches");
    if (threads < 1 || context < 1 || reps < 1 || batches.empty() ||
        *std::min_element(batches.begin(), batches.end()) < 1)
      throw Error(ErrorCode::kInvalidArgument, "--threads, --context, --reps and every batch size must be >= 1");
    const auto model = voxtral::Model::load(model_path);
    if (!audio_path.empty()) {
      if (chunk_ms < 1 || min_slots < 1)
        throw Error(ErrorCode::kInvalidArgument, "--chunk-ms and --min-encoder-slots must be >= 1");
      return run_stream(model, model_path, audio_path, chunk_ms, min_slots, threads, kernel_name == "rows");
    }
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
