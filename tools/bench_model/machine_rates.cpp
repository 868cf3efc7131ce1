#include "tools/bench_model/machine_rates.h"

#include <cstdio>

namespace earshot::tools {

std::vector<EncoderProduct> encoder_products(const whisper::Hparams& hp, int n_ctx) {
  const int64_t d = hp.n_audio_state, t = n_ctx, layers = hp.n_audio_layer, heads = hp.n_audio_head;
  const int64_t head_dim = d / heads;
  const int64_t mels = hp.n_mels;
  return {
      {"conv1 (im2col)", {2 * t, d, 3 * mels}, 1, true, true},
      {"conv2 (im2col)", {t, d, 3 * d}, 1, true, true},
      {"attention q/k/v/out", {t, d, d}, static_cast<int>(4 * layers), true},
      {"mlp up", {t, 4 * d, d}, static_cast<int>(layers), true},
      {"mlp down", {t, d, 4 * d}, static_cast<int>(layers), true},
      {"attention q.k per head", {t, t, head_dim}, static_cast<int>(layers * heads), false},
      {"attention p.v per head", {t, head_dim, t}, static_cast<int>(layers * heads), false},
  };
}

double encoder_flop(const std::vector<EncoderProduct>& products) {
  double flop = 0;
  for (const EncoderProduct& p : products) flop += p.shape.flop() * p.count;
  return flop;
}

double decoder_step_weight_bytes(const whisper::Model& model) {
  const whisper::Weights& w = model.weights();
  double bytes = static_cast<double>(ggml_nbytes(w.token_emb));
  for (const whisper::DecoderLayer& l : w.decoder) {
    for (const ggml_tensor* t :
         {l.attn_q_w, l.attn_k_w, l.attn_v_w, l.attn_out_w, l.cross_q_w, l.cross_out_w, l.mlp_0_w, l.mlp_1_w}) {
      bytes += static_cast<double>(ggml_nbytes(t));
    }
  }
  return bytes;
}

MachineRates measure_machine(const whisper::Model& model, int n_ctx, int threads, int reps, bool bandwidth) {
  const std::vector<EncoderProduct> products = encoder_products(model.hparams(), n_ctx);
  const ggml_type weight_type = model.weight_type();
  std::printf("machine limits, %d threads: %s\n", threads, openblas_description().c_str());
  std::printf("%-26s %6s %6s %6s %5s  %12s %12s %6s %12s %6s\n", "encoder product", "m", "n", "k", "count",
              "ggml GFLOP/s", "sgemm GFLOP/s", "ratio", "op GFLOP/s", "ratio");
  double sgemm_seconds = 0, ggml_seconds = 0, op_seconds = 0;
  for (const EncoderProduct& p : products) {
    const double sgemm = openblas_sgemm_gflops(p.shape, threads, reps);
    // Attention's products multiply activations (F32 or F16 in the graph, not the weight type);
    // the convolutions' weights are F16 whatever the file's type.
    const ggml_type type = p.kept_f16 ? GGML_TYPE_F16 : weight_type;
    const double ggml = ggml_mul_mat_gflops(p.weight ? type : GGML_TYPE_F16, p.shape, threads, reps);
    // earshot's OpenBLAS op (--cpu-kernels openblas) in a graph, its conversion included.
    const double op = blas_op_gflops(p.weight ? type : GGML_TYPE_F32, p.shape, threads, reps);
    std::printf("%-26s %6lld %6lld %6lld %5d  %12.1f %12.1f %6.2f %12.1f %6.2f\n", p.name.c_str(),
                static_cast<long long>(p.shape.m), static_cast<long long>(p.shape.n), static_cast<long long>(p.shape.k),
                p.count, ggml, sgemm, ggml / sgemm, op, op / sgemm);
    sgemm_seconds += p.shape.flop() * p.count / (sgemm * 1e9);
    ggml_seconds += p.shape.flop() * p.count / (ggml * 1e9);
    op_seconds += p.shape.flop() * p.count / (op * 1e9);
  }
  MachineRates rates;
  const double flop = encoder_flop(products);
  rates.sgemm_gflops = flop / sgemm_seconds * 1e-9;
  rates.ggml_gflops = flop / ggml_seconds * 1e-9;
  rates.op_gflops = flop / op_seconds * 1e-9;
  std::printf(
      "encoder pass over %d frames: %.2f GFLOP; at sgemm's rates %.1f GFLOP/s (%.1f ms), at ggml's "
      "products alone %.1f GFLOP/s (%.1f ms), at the OpenBLAS op's %.1f GFLOP/s (%.1f ms)\n",
      n_ctx, flop * 1e-9, rates.sgemm_gflops, sgemm_seconds * 1e3, rates.ggml_gflops, ggml_seconds * 1e3,
      rates.op_gflops, op_seconds * 1e3);
  if (!bandwidth) return rates;
  rates.bandwidth_gbs = read_bandwidth_gbs(size_t{512} << 20, threads, reps);
  std::printf("streaming read, %d threads: %.1f GB/s; a decoder step reads %.1f MB of weights\n", threads,
              rates.bandwidth_gbs, decoder_step_weight_bytes(model) * 1e-6);
  return rates;
}

}  // namespace earshot::tools
