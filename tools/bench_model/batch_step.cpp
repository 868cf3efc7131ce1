#include "tools/bench_model/batch_step.h"

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "common/error.h"
#include "model/runtime/device.h"

namespace earshot::tools {
namespace {

// One graph: rows [n_state, B] -> MLP of decoder layer 0 -> logits [n_vocab, B].
class StepGraph {
 public:
  StepGraph(const whisper::Model& model, ggml_backend_t backend, int rows) : backend_(backend), rows_(rows) {
    const ggml_init_params params{ggml_tensor_overhead() * 32 + ggml_graph_overhead(), nullptr, true};
    ctx_ = ggml_init(params);
    const whisper::Weights& w = model.weights();
    const whisper::DecoderLayer& l = w.decoder.at(0);
    n_state_ = model.hparams().n_text_state;
    input_ = ggml_new_tensor_2d(ctx_, GGML_TYPE_F32, n_state_, rows);
    ggml_set_input(input_);
    ggml_tensor* h = ggml_gelu(ctx_, ggml_add(ctx_, ggml_mul_mat(ctx_, l.mlp_0_w, input_), l.mlp_0_b));
    h = ggml_add(ctx_, ggml_mul_mat(ctx_, l.mlp_1_w, h), l.mlp_1_b);
    logits_ = ggml_mul_mat(ctx_, w.token_emb, h);
    ggml_set_output(logits_);
    graph_ = ggml_new_graph(ctx_);
    ggml_build_forward_expand(graph_, logits_);
    alloc_ = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
    if (!ggml_gallocr_alloc_graph(alloc_, graph_)) throw Error(ErrorCode::kInternal, "cannot allocate the batch graph");
  }
  ~StepGraph() {
    ggml_gallocr_free(alloc_);
    ggml_free(ctx_);
  }
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // rows: [rows][n_state]; returns [rows][n_vocab].
  std::vector<float> run(const float* rows) {
    ggml_backend_tensor_set(input_, rows, 0, sizeof(float) * static_cast<size_t>(n_state_) * rows_);
    if (ggml_backend_graph_compute(backend_, graph_) != GGML_STATUS_SUCCESS)
      throw Error(ErrorCode::kInternal, "batch graph failed");
    std::vector<float> out(static_cast<size_t>(ggml_nelements(logits_)));
    ggml_backend_tensor_get(logits_, out.data(), 0, sizeof(float) * out.size());
    return out;
  }

 private:
  ggml_backend_t backend_;
  int rows_, n_state_ = 0;
  ggml_context* ctx_ = nullptr;
  ggml_tensor *input_ = nullptr, *logits_ = nullptr;
  ggml_cgraph* graph_ = nullptr;
  ggml_gallocr_t alloc_ = nullptr;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void bench_batched_steps(const std::shared_ptr<const whisper::Model>& model, int threads, int reps) {
  ggml_backend_ptr backend = runtime::create_backend(model->device(), threads);
  const int n_state = model->hparams().n_text_state;
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  StepGraph one(*model, backend.get(), 1);
  std::printf("batched decoder-step work (layer-0 MLP + token-embedding logits), %d threads, median of %d:\n", threads,
              reps);
  for (int rows : {1, 2, 4, 8, 16}) {
    std::vector<float> x(static_cast<size_t>(rows) * n_state);
    for (float& v : x) v = noise(rng);
    StepGraph batch(*model, backend.get(), rows);
    std::vector<double> t_batch, t_single;
    std::vector<float> batched, single;
    for (int r = 0; r < reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      batched = batch.run(x.data());
      auto t1 = std::chrono::steady_clock::now();
      single.clear();
      for (int i = 0; i < rows; ++i) {
        const std::vector<float> o = one.run(x.data() + static_cast<size_t>(i) * n_state);
        single.insert(single.end(), o.begin(), o.end());
      }
      auto t2 = std::chrono::steady_clock::now();
      t_batch.push_back(std::chrono::duration<double>(t1 - t0).count());
      t_single.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
    double max_diff = 0;
    for (size_t i = 0; i < batched.size(); ++i)
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(batched[i] - single[i])));
    const double b = median(t_batch), s = median(t_single);
    std::printf(
        "batch %2d: one graph %8.3f ms (%7.3f ms/row, %8.0f rows/s)  %2d one-row graphs %8.3f ms  speedup %.2fx  "
        "max |logit diff| %.3g%s\n",
        rows, b * 1e3, b * 1e3 / rows, rows / b, rows, s * 1e3, s / b, max_diff,
        max_diff == 0 ? " (bit-identical)" : "");
  }
}

}  // namespace earshot::tools
