// earshot-bench-parakeet: how fast the transducer family computes, in numbers.
//  - offline: earshot's FastConformer encoder vs libparakeet's on the same legacy
//    .bin and the same mel, for each audio length; best of --reps runs each,
//    alternated; the ratio ours / libparakeet, and a control: libparakeet
//    against itself (two contexts, alternated) as earshot-bench-model does for
//    libwhisper, so the noise of the machine shows next to the ratio.
//  - streaming: a cache-aware streaming GGUF fed chunk by chunk at each
//    lookahead the file supports: compute seconds per audio second (the real-time
//    factor of one stream at --threads), and the streams the machine holds in
//    real time if each gets one thread (cores / the one-thread factor); a
//    prompt model's kernel (host, per frame) timed on its own.
//  - batched streaming (--batch 1,2,4,8,16): B streams of one streaming GGUF fed
//    in lockstep in 10 ms pieces, every ready chunk of every stream stepped as
//    one graph (fastconformer::StreamingBatchExecutor): compute seconds per
//    audio second per stream, the real-time streams the threads hold at that
//    batch, and the GB/s of encoder weights the steps read.
// Random weights are fine: the compute does not depend on the values.
#include <parakeet.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "features/nemo_mel.h"
#include "features/nemo_mel_stream.h"
#include "model/fastconformer/encoder.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/streaming_batch.h"
#include "model/fastconformer/streaming_encoder.h"
#include "model/runtime/cpu_isa.h"
#include "model/runtime/device.h"
#include "model/runtime/openblas_ops.h"
#include "model/transducer/decoder.h"
#include "tools/common/machine_limits.h"
#include "tools/common/tool_args.h"

namespace fc = earshot::fastconformer;
using earshot::Error;
using earshot::ErrorCode;

namespace {

const char* kUsage =
    "usage: earshot-bench-parakeet [--model R.bin] [--streaming-model S.gguf] [--seconds 10,30] [--threads 2]\n"
    "                              [--reps 3] [--stream-seconds 10] [--cores N] [--batch 1,2,4,8,16]\n"
    "                              [--lookaheads 80,160,560,1120] [--kernels ggml,openblas,auto]\n"
    "                              [--products 1,2,7,14,32,112]\n"
    "\n"
    "--model: a legacy Parakeet .bin (earshot-make-parakeet --dims real --type f16 --bin R.bin): the\n"
    "offline encoder, ours vs libparakeet, on --seconds of noise each (best of --reps, alternated),\n"
    "with libparakeet against itself as the control. --streaming-model: a cache-aware streaming GGUF\n"
    "(earshot-make-parakeet --dims real --streaming 1 --type f16 --gguf S.gguf): --stream-seconds fed\n"
    "in 10 ms pieces at each lookahead the file supports, at --threads and at 1 thread; streams in\n"
    "real time = --cores (default: the hardware's) / the 1-thread compute per audio second.\n"
    "--batch B1,B2,..: instead, for each --streaming-model (a comma-separated list: f16 and q8_0 files\n"
    "in one run) and each --lookaheads (default: the file's), B streams of --stream-seconds fed in\n"
    "lockstep, their ready chunks stepped as one graph at --threads: compute per audio second per\n"
    "stream, the real-time streams those threads hold at that batch (1 / it), and the GB/s of\n"
    "encoder weights read (weight bytes x graphs / wall). --kernels: only these of the kernels (default:\n"
    "each this machine has; auto: a quantised file's products on AMX).\n"
    "--products R1,R2,..: instead, a layer's weight products (the --streaming-model's dimensions, else the 0.6B's)\n"
    "at each number of activation rows, F16 and Q8_0, on each kernel against OpenBLAS's sgemm (best of --reps).\n";

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<float> noise(double seconds, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> pcm(static_cast<size_t>(seconds * 16000));
  for (float& x : pcm) x = normal(rng);
  return pcm;
}

earshot::features::NemoMelConfig mel_config(const fc::Hparams& hp) {
  earshot::features::NemoMelConfig c;
  c.n_fft = hp.n_fft, c.hop_length = hp.hop_length, c.n_mels = hp.n_mels;
  c.preemph = hp.preemph, c.log_guard = hp.log_guard;
  c.normalize_per_feature = hp.feature_norm == fc::FeatureNorm::kPerFeature;
  return c;
}

struct Libparakeet {
  parakeet_context* ctx = nullptr;
  explicit Libparakeet(const std::string& path) {
    parakeet_context_params params = parakeet_context_default_params();
    params.use_gpu = false;
    ctx = parakeet_init_from_file_with_params(path.c_str(), params);
    if (!ctx) throw Error(ErrorCode::kInvalidModel, "libparakeet cannot load " + path);
  }
  ~Libparakeet() { parakeet_free(ctx); }
  // parakeet_encode alone runs the model's whole context (n_audio_ctx mel frames,
  // 5000 at parakeet-tdt-0.6b's: 50 s) whatever the mel's length; parakeet_full
  // fits the context to the audio first (its audio_ctx) and later calls keep it.
  // One parakeet_full at this length, untimed, so the timed encoder does what a
  // libparakeet user's transcription does, like for like with ours.
  void fit_context(const std::vector<float>& pcm, int n_mel_frames, int threads) {
    parakeet_full_params params = parakeet_full_default_params(PARAKEET_SAMPLING_GREEDY);
    params.n_threads = threads;
    params.audio_ctx = n_mel_frames;
    if (parakeet_full(ctx, params, pcm.data(), static_cast<int>(pcm.size())) != 0)
      throw Error(ErrorCode::kInternal, "parakeet_full failed");
  }
  double encode(const earshot::features::FrameMajorMel& mel, int threads) {
    if (parakeet_set_mel(ctx, mel.data.data(), mel.n_frames, mel.n_mel) != 0)
      throw Error(ErrorCode::kInternal, "parakeet_set_mel failed");
    const double t0 = now();
    if (parakeet_encode(ctx, 0, threads) != 0) throw Error(ErrorCode::kInternal, "parakeet_encode failed");
    return now() - t0;
  }
};

// The FLOP of the encoder's products (projections, feed-forward, pointwise convs,
// subsampling output) over T frames: what --cpu-kernels switches.
double product_flop(const fc::Hparams& hp, int T) {
  const double d = hp.n_state, ff = static_cast<double>(hp.ff_expansion) * hp.n_state;
  // Per layer and frame: two half FFNs (d -> ff -> d), q/k/v/out, pos (2T-1 positions
  // for T frames, about 2 per frame), pointwise conv 1 (d -> 2d) and 2 (d -> d).
  const double per_frame = 2 * (2 * 2 * d * ff + 4 * d * d + 2 * d * d + 2 * d * d + d * d);
  return per_frame * hp.n_layer * T;
}

void offline(const std::string& path, const std::vector<int>& seconds, int threads, int reps) {
  const auto model = fc::Model::load(path);
  const fc::Hparams& hp = model->hparams();
  ggml_backend_ptr backend = earshot::runtime::create_backend(nullptr, threads);
  fc::Encoder ours(model, backend.get());
  // The same encoder with its products on OpenBLAS (--cpu-kernels openblas), where it loads.
  fc::EncoderOptions blas_options;
  blas_options.cpu_kernels = earshot::runtime::CpuKernels::kOpenBlas;
  std::unique_ptr<fc::Encoder> ours_blas;
  if (earshot::runtime::openblas_available()) {
    ours_blas = std::make_unique<fc::Encoder>(model, backend.get(), blas_options);
  } else {
    std::printf("OpenBLAS encoder left out: %s\n", earshot::runtime::openblas_status().c_str());
  }
  Libparakeet lib(path), control(path);
  std::printf("offline encoder, %s, %d threads, best of %d (seconds):\n", path.c_str(), threads, reps);
  std::printf("%8s %10s %12s %12s %8s %16s %12s %10s %14s %12s\n", "audio_s", "ours", "libparakeet", "lib_control",
              "ratio", "control_ratio", "ours_blas", "ratio", "blas_GFLOP/s", "sgemm_GF/s");
  for (int s : seconds) {
    const std::vector<float> pcm = noise(s, static_cast<unsigned>(s));
    const earshot::features::FrameMajorMel mel =
        earshot::features::nemo_log_mel(pcm, mel_config(hp), model->mel_filters(), model->window());
    double best_ours = 1e30, best_lib = 1e30, best_control = 1e30, best_blas = 1e30;
    lib.fit_context(pcm, mel.n_frames, threads);
    control.fit_context(pcm, mel.n_frames, threads);
    // One warm-up of each (weights paged in, allocations) at every length, then alternated timed runs.
    const int T = ours.encode(mel.data, mel.n_frames).n_frames;
    if (ours_blas) ours_blas->encode(mel.data, mel.n_frames);
    lib.encode(mel, threads);
    control.encode(mel, threads);
    for (int r = 0; r < reps; ++r) {
      double t0 = now();
      ours.encode(mel.data, mel.n_frames);
      best_ours = std::min(best_ours, now() - t0);
      if (ours_blas) {
        t0 = now();
        ours_blas->encode(mel.data, mel.n_frames);
        best_blas = std::min(best_blas, now() - t0);
      }
      best_lib = std::min(best_lib, lib.encode(mel, threads));
      best_control = std::min(best_control, control.encode(mel, threads));
    }
    // The machine's rate at the feed-forward's shape, same threads, same run.
    const double sgemm = earshot::tools::openblas_sgemm_gflops(
        {T, static_cast<int64_t>(hp.ff_expansion) * hp.n_state, hp.n_state}, threads, 3);
    const double blas_rate = ours_blas ? product_flop(hp, T) / best_blas * 1e-9 : 0.0;
    std::printf("%8d %10.3f %12.3f %12.3f %8.3f %16.3f %12.3f %10.3f %14.1f %12.1f\n", s, best_ours, best_lib,
                best_control, best_ours / best_lib, best_control / best_lib, ours_blas ? best_blas : 0.0,
                ours_blas ? best_blas / best_lib : 0.0, blas_rate, sgemm);
    std::fflush(stdout);
  }
  std::printf(
      "(blas_GFLOP/s: the products' FLOP (projections, feed-forward, pointwise convs) over the whole OpenBLAS "
      "pass; sgemm_GF/s: OpenBLAS's sgemm at the feed-forward's shape T x %d x %d)\n",
      hp.ff_expansion * hp.n_state, hp.n_state);
}

// Compute seconds of one stream fed in 10 ms pieces (mel and encoder; the decoder's
// matrix-vector steps are not in it: they depend on what the weights emit).
double stream_once(const std::shared_ptr<const fc::Model>& model, int right, int threads, const std::vector<float>& pcm,
                   earshot::runtime::CpuKernels kernels) {
  ggml_backend_ptr backend = earshot::runtime::create_backend(nullptr, threads);
  fc::StreamingEncoder encoder(model, backend.get(), {.right_context = right, .cpu_kernels = kernels});
  earshot::features::NemoMelStream mel(mel_config(model->hparams()), model->mel_filters(), model->window());
  const double t0 = now();
  for (size_t at = 0; at < pcm.size(); at += 160) {
    const size_t n = std::min<size_t>(160, pcm.size() - at);
    const earshot::features::FrameMajorMel m = mel.push(std::span<const float>(pcm.data() + at, n));
    if (m.n_frames > 0) encoder.push(m.data, m.n_frames);
  }
  const earshot::features::FrameMajorMel rest = mel.finish();
  encoder.push(rest.data, rest.n_frames);
  encoder.finish();
  return now() - t0;
}

void streaming(const std::string& path, double seconds, int threads, int cores) {
  const auto model = fc::Model::load(path);
  const fc::Hparams& hp = model->hparams();
  if (!hp.streaming()) throw Error(ErrorCode::kInvalidArgument, path + " is not a cache-aware streaming model");
  const std::vector<int> rights = hp.att_right_options.empty() ? std::vector<int>{hp.att_right} : hp.att_right_options;
  const std::vector<float> pcm = noise(seconds, 1);
  for (const auto kernels : {earshot::runtime::CpuKernels::kAuto, earshot::runtime::CpuKernels::kGgml}) {
    std::printf("streaming encoder, %s, %.0f s of audio in 10 ms pieces, --cpu-kernels %s (compute s per audio s):\n",
                path.c_str(), seconds, std::string(earshot::runtime::to_string(kernels)).c_str());
    std::printf("%12s %14s %12s %18s\n", "lookahead_ms", "rtf_threads", "rtf_1thread", "realtime_streams");
    for (int right : rights) {
      const double at_threads = stream_once(model, right, threads, pcm, kernels) / seconds;
      const double at_one = threads == 1 ? at_threads : stream_once(model, right, 1, pcm, kernels) / seconds;
      std::printf("%12d %14.3f %12.3f %18.2f\n", (right + 1) * 80, at_threads, at_one, cores / at_one);
      std::fflush(stdout);
    }
    std::printf("(rtf_threads at %d threads; realtime_streams = %d cores / rtf_1thread)\n", threads, cores);
  }
  if (hp.n_prompts > 0) {
    // Nemotron 3.5's prompt kernel runs on the host per encoder frame (one thread), outside the encoder.
    const int n_frames = static_cast<int>(seconds * 12.5);
    const std::vector<float> frames(static_cast<size_t>(n_frames) * hp.n_state, 0.25f);
    earshot::transducer::Decoder decoder(&model->decoder_weights());
    const double t0 = now();
    decoder.apply_prompt(frames, n_frames, fc::prompt_slot(hp, "auto"));
    std::printf("prompt kernel (%d -> %d -> %d, host, 1 thread): %.3f s per audio s\n", hp.n_state + hp.n_prompts,
                hp.n_prompt_hidden, hp.n_state, (now() - t0) / seconds);
  }
}

// The encoder weights a streaming step reads (linear_pos excepted: a table computed once).
size_t step_weight_bytes(const fc::Model& m) {
  size_t bytes = ggml_nbytes(m.pre_out_w);
  for (const fc::Layer& l : m.layers)
    for (const ggml_tensor* t :
         {l.ff1_w1, l.ff1_w2, l.q_w, l.k_w, l.v_w, l.out_w, l.pw1_w, l.dw_w, l.pw2_w, l.ff2_w1, l.ff2_w2})
      bytes += ggml_nbytes(t);
  return bytes;
}

struct BatchRun {
  double wall = 0;
  int64_t graphs = 0, steps = 0;
};

// B streams fed in lockstep in 10 ms pieces; every piece, each stream's ready chunks step together.
BatchRun stream_batch(const std::shared_ptr<const fc::Model>& model, fc::StreamingBatchExecutor& executor, int right,
                      int batch, double seconds) {
  ggml_backend_ptr backend = earshot::runtime::create_backend(nullptr, 1);  // the encoders' unused lone path
  std::vector<std::unique_ptr<fc::StreamingEncoder>> encoders;
  std::vector<std::unique_ptr<earshot::features::NemoMelStream>> mels;
  std::vector<std::vector<float>> pcm;
  for (int s = 0; s < batch; ++s) {
    encoders.push_back(
        std::make_unique<fc::StreamingEncoder>(model, backend.get(), fc::EncoderOptions{.right_context = right}));
    mels.push_back(std::make_unique<earshot::features::NemoMelStream>(mel_config(model->hparams()),
                                                                      model->mel_filters(), model->window()));
    pcm.push_back(noise(seconds, 10 + s));
  }
  std::vector<fc::StreamingEncoder*> all;
  for (auto& e : encoders) all.push_back(e.get());
  std::vector<fc::EncoderOutput> outs(batch);
  const int64_t graphs0 = executor.graphs(), steps0 = executor.steps();
  const double t0 = now();
  for (size_t at = 0; at < pcm[0].size(); at += 160) {
    const size_t n = std::min<size_t>(160, pcm[0].size() - at);
    for (int s = 0; s < batch; ++s) {
      const earshot::features::FrameMajorMel m = mels[s]->push(std::span<const float>(pcm[s].data() + at, n));
      encoders[s]->append_mel(m.data, m.n_frames);
    }
    for (auto& o : outs) o = {};
    executor.run_ready(all, outs);
  }
  for (int s = 0; s < batch; ++s) {
    const earshot::features::FrameMajorMel m = mels[s]->finish();
    encoders[s]->append_mel(m.data, m.n_frames);
  }
  executor.run_ready(all, outs, true);
  return {now() - t0, executor.graphs() - graphs0, executor.steps() - steps0};
}

void batched(const std::string& path, double seconds, int threads, const std::vector<int>& batches,
             const std::vector<int>& lookaheads, const std::vector<earshot::runtime::CpuKernels>& only) {
  const auto model = fc::Model::load(path);
  const fc::Hparams& hp = model->hparams();
  if (!hp.streaming()) throw Error(ErrorCode::kInvalidArgument, path + " is not a cache-aware streaming model");
  std::vector<int> rights;
  for (int ms : lookaheads) rights.push_back(ms / 80 - 1);
  if (rights.empty()) rights = hp.att_right_options.empty() ? std::vector<int>{hp.att_right} : hp.att_right_options;
  const double weight_gb = static_cast<double>(step_weight_bytes(*model)) / 1e9;
  std::printf(
      "batched streaming encoder, %s (%s matrices, %.3f GB read per step), %.0f s per stream in 10 ms "
      "pieces, %d threads; products on ggml's kernels, then on OpenBLAS from %d rows a step, then (auto, "
      "a quantised file on a CPU with AMX) on ggml's AMX kernels; %s:\n",
      path.c_str(), ggml_type_name(model->layers[0].ff1_w1->type), weight_gb, seconds, threads,
      fc::detail::kOpenBlasMinRows, earshot::runtime::amx_status().c_str());
  std::printf("%9s %12s %6s %9s %10s %22s %18s %8s\n", "kernels", "lookahead_ms", "batch", "wall_s", "mean_batch",
              "compute_s_per_audio_s", "realtime_streams", "GB/s");
  std::vector<earshot::runtime::CpuKernels> kernels = {earshot::runtime::CpuKernels::kGgml};
  if (earshot::runtime::openblas_available()) kernels.push_back(earshot::runtime::CpuKernels::kOpenBlas);
  // The same file loaded again with its quantised products on AMX (none for f16).
  std::shared_ptr<const fc::Model> amx_model;
  if (earshot::runtime::amx_wanted(earshot::runtime::CpuKernels::kAuto, nullptr)) {
    amx_model = fc::Model::load(path, nullptr, true);
    if (amx_model->weights().n_amx() > 0) kernels.push_back(earshot::runtime::CpuKernels::kAuto);
  }
  if (!only.empty())
    std::erase_if(kernels,
                  [&](earshot::runtime::CpuKernels k) { return std::find(only.begin(), only.end(), k) == only.end(); });
  for (earshot::runtime::CpuKernels k : kernels) {
    const auto& m = k == earshot::runtime::CpuKernels::kAuto ? amx_model : model;
    fc::StreamingBatchExecutor executor(m, threads, k);
    stream_batch(m, executor, rights.front(), 1, 1.0);  // warm-up: weights paged in, position table built
    for (int right : rights) {
      for (int b : batches) {
        const BatchRun r = stream_batch(m, executor, right, b, seconds);
        const double per_stream = r.wall / (seconds * b);
        std::printf("%9s %12d %6d %9.2f %10.2f %22.4f %18.2f %8.1f\n", earshot::runtime::to_string(k).data(),
                    (right + 1) * 80, b, r.wall, r.graphs ? static_cast<double>(r.steps) / r.graphs : 0.0, per_stream,
                    1.0 / per_stream, weight_gb * static_cast<double>(r.graphs) / r.wall);
        std::fflush(stdout);
      }
    }
  }
  std::printf(
      "(compute_s_per_audio_s: wall seconds at %d threads per audio second per stream; realtime_streams = "
      "1 / it, the streams those %d threads hold at that batch)\n",
      threads, threads);
}

// A streaming step's weight products at `rows` activation rows (B streams' chunks
// of F frames: B x F rows), each product kernel against OpenBLAS's sgemm at the
// same shapes and threads, and the weight bytes each reads against a streaming
// read on those threads; FLOP-weighted over the layer's products. Dimensions from
// the model when one is given, else the 0.6B streaming model's.
void products(const std::shared_ptr<const fc::Model>& model, int threads, const std::vector<int>& rows, int reps) {
  int d = 1024, ff = 4096;
  if (model) d = model->hparams().n_state, ff = model->hparams().ff_expansion * model->hparams().n_state;
  // Per layer: two FFNs (d -> ff -> d), q, k, v, out, pointwise conv 1 (d -> 2d) and 2.
  struct Shape {
    const char* name;
    int64_t n, k;
    int count;
  };
  const std::vector<Shape> shapes = {
      {"ffn up", ff, d, 2}, {"ffn down", d, ff, 2}, {"q, k, v, out, pw2", d, d, 5}, {"pw1", 2 * d, d, 1}};
  const double bandwidth = earshot::tools::read_bandwidth_gbs(size_t(1) << 30, threads, 3);
  std::printf("a layer's products, %d threads, the rows kernels' path %s (%s); streaming read %.1f GB/s\n", threads,
              earshot::runtime::to_string(earshot::runtime::kernel_path()).data(),
              earshot::runtime::describe_cpu().c_str(), bandwidth);
  std::printf("%6s %5s %10s %10s %10s %10s %10s %8s %10s %8s\n", "type", "rows", "sgemm_GF/s", "rows_GF/s", "ggml_GF/s",
              "blas_GF/s", "int8_GF/s", "rows/sg", "rows_GB/s", "/read");
  for (ggml_type type : {GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
    for (int m : rows) {
      double flop = 0, t_sgemm = 0, t_rows = 0, t_ggml = 0, t_blas = 0, t_int8 = 0, bytes = 0;
      for (const Shape& sh : shapes) {
        const earshot::tools::GemmShape g{m, sh.n, sh.k};
        const double f = g.flop() * sh.count;
        flop += f;
        t_sgemm += f / (earshot::tools::openblas_sgemm_gflops(g, threads, reps) * 1e9);
        t_rows += f / (earshot::tools::rows_op_gflops(type, g, threads, reps) * 1e9);
        t_ggml += f / (earshot::tools::ggml_mul_mat_gflops(type, g, threads, reps) * 1e9);
        t_blas += f / (earshot::tools::blas_op_gflops(type, g, threads, reps) * 1e9);
        if (type == GGML_TYPE_Q8_0) t_int8 += f / (earshot::tools::q8_op_gflops(g, threads, reps) * 1e9);
        bytes += static_cast<double>(ggml_row_size(type, sh.k)) * sh.n * sh.count;
      }
      const double rows_gbs = bytes / t_rows * 1e-9;
      std::printf("%6s %5d %10.1f %10.1f %10.1f %10.1f %10.1f %8.2f %10.1f %8.2f\n", ggml_type_name(type), m,
                  flop / t_sgemm * 1e-9, flop / t_rows * 1e-9, flop / t_ggml * 1e-9, flop / t_blas * 1e-9,
                  t_int8 > 0 ? flop / t_int8 * 1e-9 : 0.0, t_sgemm / t_rows, rows_gbs, rows_gbs / bandwidth);
      std::fflush(stdout);
    }
  }
  std::printf(
      "(best of %d each; rows: runtime::rows_mul_mat, ggml: ggml_mul_mat, blas: the OpenBLAS op with the weight "
      "converted to f32 in chunks; int8: runtime::q8_mul_mat (Q8_0; 0: not measured); rows/sg: the rows kernel's rate "
      "over sgemm's at the same shapes; rows_GB/s: "
      "the weight bytes it reads per second, /read: over the streaming read)\n",
      reps);
}

std::vector<std::string> split_paths(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  earshot::tools::use_openblas_best_kernels(argv);  // before OpenBLAS's own choice stands
  try {
    std::string model_path, streaming_path;
    std::vector<int> seconds = {10, 30};
    int threads = 2, reps = 3;
    double stream_seconds = 10;
    int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<int> batches, lookaheads, product_rows;
    std::vector<earshot::runtime::CpuKernels> only_kernels;
    earshot::tools::parse_options(
        argc, argv, kUsage,
        {{"--model", [&](const std::string& v) { model_path = v; }},
         {"--streaming-model", [&](const std::string& v) { streaming_path = v; }},
         {"--seconds", [&](const std::string& v) { seconds = earshot::tools::parse_int_list(v, "--seconds"); }},
         {"--threads", [&](const std::string& v) { threads = std::stoi(v); }},
         {"--reps", [&](const std::string& v) { reps = std::stoi(v); }},
         {"--stream-seconds", [&](const std::string& v) { stream_seconds = std::stod(v); }},
         {"--cores", [&](const std::string& v) { cores = std::stoi(v); }},
         {"--batch", [&](const std::string& v) { batches = earshot::tools::parse_int_list(v, "--batch"); }},
         {"--lookaheads",
          [&](const std::string& v) { lookaheads = earshot::tools::parse_int_list(v, "--lookaheads"); }},
         {"--products", [&](const std::string& v) { product_rows = earshot::tools::parse_int_list(v, "--products"); }},
         {"--kernels", [&](const std::string& v) {
            for (const std::string& k : split_paths(v))
              only_kernels.push_back(earshot::runtime::parse_cpu_kernels(k, "--kernels"));
          }}});
    if (!product_rows.empty()) {
      products(streaming_path.empty() ? nullptr : fc::Model::load(split_paths(streaming_path).front()), threads,
               product_rows, reps);
      return 0;
    }
    if (model_path.empty() && streaming_path.empty()) throw Error(ErrorCode::kInvalidArgument, kUsage);
    if (threads < 1 || reps < 1 || cores < 1 || !(stream_seconds > 0))
      throw Error(ErrorCode::kInvalidArgument, "--threads, --reps, --cores and --stream-seconds must be positive");
    parakeet_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
    if (!model_path.empty()) offline(model_path, seconds, threads, reps);
    for (int b : batches)
      if (b < 1) throw Error(ErrorCode::kInvalidArgument, "--batch sizes must be >= 1");
    for (int ms : lookaheads)
      if (ms < 80 || ms % 80 != 0) throw Error(ErrorCode::kInvalidArgument, "--lookaheads are multiples of 80 ms");
    for (const std::string& path : split_paths(streaming_path)) {
      if (batches.empty())
        streaming(path, stream_seconds, threads, cores);
      else
        batched(path, stream_seconds, threads, batches, lookaheads, only_kernels);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-bench-parakeet: %s\n", e.what());
    return 1;
  }
}
