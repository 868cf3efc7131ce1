// Per-stream Silero inference: one reusable ggml graph per session computes one
// 512-sample window; the LSTM state travels in and out of the graph as plain
// vectors so the shared model is never written to.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/runtime/device.h"
#include "model/runtime/graph_runner.h"
#include "vad/model_impl.h"

namespace earshot::vad {
namespace {

constexpr int kGraphNodes = 128;  // the window graph has ~50 nodes

struct WindowGraph {
  ggml_tensor* input = nullptr;  // the window (plus 64 context samples in kPreviousSamples mode)
  ggml_tensor* h_in = nullptr;
  ggml_tensor* c_in = nullptr;
  ggml_tensor* h_out = nullptr;
  ggml_tensor* c_out = nullptr;
  ggml_tensor* prob = nullptr;
};

// The Silero v5/v6 16 kHz network for one window. The op choices (f16 im2col
// convolutions, reflect padding) follow whisper.cpp so probabilities agree with it.
WindowGraph build_window_graph(ggml_context* ctx, ggml_cgraph* graph, const VadModel::Impl& m, WindowContext context) {
  WindowGraph g;
  const int input_len = kWindowSamples + (context == WindowContext::kPreviousSamples ? kContextSamples : 0);
  g.input = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, input_len);
  g.h_in = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, kLstmSize);
  g.c_in = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, kLstmSize);
  for (ggml_tensor* t : {g.input, g.h_in, g.c_in}) ggml_set_input(t);

  // STFT: 640 samples -> 4 frames of 129 bins, as a strided conv with the fixed
  // (windowed Fourier) basis, then the magnitude of real/imaginary halves.
  ggml_tensor* padded = context == WindowContext::kReflect
                            ? ggml_pad_reflect_1d(ctx, g.input, kContextSamples, kContextSamples)
                            : ggml_pad_reflect_1d(ctx, g.input, 0, kContextSamples);
  ggml_tensor* stft = ggml_conv_1d(ctx, m.stft_basis, padded, kStftHop, 0, 1);  // [4, 258]
  const int n_frames = static_cast<int>(stft->ne[0]);
  const int n_bins = kStftChannels / 2;
  ggml_tensor* re = ggml_view_2d(ctx, stft, n_frames, n_bins, stft->nb[1], 0);
  ggml_tensor* im = ggml_view_2d(ctx, stft, n_frames, n_bins, stft->nb[1], n_bins * stft->nb[1]);
  ggml_tensor* cur = ggml_sqrt(ctx, ggml_add(ctx, ggml_mul(ctx, re, re), ggml_mul(ctx, im, im)));  // [4, 129]

  // Encoder: four kernel-3 convs (strides 1, 2, 2, 1) with ReLU: [4,129] -> [1,128].
  for (int i = 0; i < kEncoderLayers; ++i) {
    cur = ggml_conv_1d(ctx, m.encoder_weight[i], cur, kEncoderStride[i], 1, 1);
    cur = ggml_add(ctx, cur, ggml_reshape_3d(ctx, m.encoder_bias[i], 1, kEncoderOut[i], 1));
    cur = ggml_relu(ctx, cur);
  }
  // The first (only) time step as a column vector of 128 features.
  ggml_tensor* x = ggml_transpose(ctx, ggml_view_2d(ctx, cur, 1, kLstmSize, cur->nb[1], 0));

  // LSTM cell, PyTorch gate order (input, forget, cell, output).
  ggml_tensor* from_input = ggml_add(ctx, ggml_mul_mat(ctx, m.lstm_ih_weight, x), m.lstm_ih_bias);
  ggml_tensor* from_hidden = ggml_add(ctx, ggml_mul_mat(ctx, m.lstm_hh_weight, g.h_in), m.lstm_hh_bias);
  ggml_tensor* gates = ggml_add(ctx, from_input, from_hidden);
  const size_t gate_bytes = ggml_row_size(gates->type, kLstmSize);
  auto gate = [&](int k) { return ggml_view_1d(ctx, gates, kLstmSize, k * gate_bytes); };
  ggml_tensor* in_gate = ggml_sigmoid(ctx, gate(0));
  ggml_tensor* forget_gate = ggml_sigmoid(ctx, gate(1));
  ggml_tensor* cell_gate = ggml_tanh(ctx, gate(2));
  ggml_tensor* out_gate = ggml_sigmoid(ctx, gate(3));
  g.c_out = ggml_add(ctx, ggml_mul(ctx, forget_gate, g.c_in), ggml_mul(ctx, in_gate, cell_gate));
  g.h_out = ggml_mul(ctx, out_gate, ggml_tanh(ctx, g.c_out));

  // Decoder: ReLU, 1x1 conv 128 -> 1, sigmoid.
  ggml_tensor* logit = ggml_conv_1d(ctx, m.final_weight, ggml_relu(ctx, g.h_out), 1, 0, 1);
  g.prob = ggml_sigmoid(ctx, ggml_add(ctx, logit, m.final_bias));
  for (ggml_tensor* t : {g.prob, g.h_out, g.c_out}) ggml_set_output(t);

  ggml_build_forward_expand(graph, g.prob);
  ggml_build_forward_expand(graph, g.c_out);
  return g;
}

}  // namespace

struct VadSession::State {
  std::shared_ptr<const VadModel> model;
  VadSessionOptions options;
  int context_len = 0;  // samples of previous-window context at the front of `window`

  ggml_backend_ptr backend;
  std::unique_ptr<runtime::GraphRunner> runner;  // declared after the backend it borrows: goes first
  runtime::GraphRunner::Graph window_graph;      // built and allocated once, computed per window
  WindowGraph graph;

  std::vector<float> h = std::vector<float>(kLstmSize, 0.0f);
  std::vector<float> c = std::vector<float>(kLstmSize, 0.0f);
  std::vector<float> window;  // [context_len context samples][512 window samples]
  int filled = 0;             // window samples collected so far
  int64_t samples_pushed = 0;
  int64_t windows = 0;

  State(std::shared_ptr<const VadModel> m, VadSessionOptions o) : model(std::move(m)), options(o) {
    if (!model) throw Error(ErrorCode::kInvalidArgument, "VadSession needs a loaded VadModel (got null)");
    if (options.n_threads < 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  "VadSession n_threads must be >= 1 (got " + std::to_string(options.n_threads) + ")");
    }
    context_len = options.context == WindowContext::kPreviousSamples ? kContextSamples : 0;
    window.assign(context_len + kWindowSamples, 0.0f);

    backend = runtime::create_backend(runtime::cpu_device(), options.n_threads);
    runner = std::make_unique<runtime::GraphRunner>(backend.get(), "VAD window");
    runner->ignore_pass_threads();  // one 32 ms window: more threads only add wake-ups
    window_graph = runner->begin(kGraphNodes);
    graph = build_window_graph(window_graph.ctx(), window_graph.graph(), model->impl(), options.context);
    runner->allocate(window_graph);
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  float compute_window() {
    runtime::set_input(graph.input, window);
    runtime::set_input(graph.h_in, h);
    runtime::set_input(graph.c_in, c);
    runner->compute(window_graph);
    float prob = 0.0f;
    ggml_backend_tensor_get(graph.prob, &prob, 0, sizeof(prob));
    ggml_backend_tensor_get(graph.h_out, h.data(), 0, h.size() * sizeof(float));
    ggml_backend_tensor_get(graph.c_out, c.data(), 0, c.size() * sizeof(float));
    // The next window's left context is this window's tail.
    if (context_len > 0) std::copy(window.end() - context_len, window.end(), window.begin());
    filled = 0;
    ++windows;
    return prob;
  }
};

VadSession::VadSession(std::shared_ptr<const VadModel> model, VadSessionOptions options)
    : state_(std::make_unique<State>(std::move(model), options)) {}
VadSession::~VadSession() = default;
VadSession::VadSession(VadSession&&) noexcept = default;
VadSession& VadSession::operator=(VadSession&&) noexcept = default;

std::vector<float> VadSession::push(std::span<const float> samples) {
  State& s = *state_;
  std::vector<float> probs;
  probs.reserve((s.filled + samples.size()) / kWindowSamples);
  size_t pos = 0;
  while (pos < samples.size()) {
    const size_t take = std::min(samples.size() - pos, static_cast<size_t>(kWindowSamples - s.filled));
    // A NaN or infinity would poison the LSTM state for the rest of the stream; treat it as silence.
    std::transform(samples.begin() + pos, samples.begin() + pos + take, s.window.begin() + s.context_len + s.filled,
                   [](float x) { return std::isfinite(x) ? x : 0.0f; });
    s.filled += static_cast<int>(take);
    pos += take;
    if (s.filled == kWindowSamples) probs.push_back(s.compute_window());
  }
  s.samples_pushed += static_cast<int64_t>(samples.size());
  return probs;
}

std::optional<float> VadSession::flush() {
  State& s = *state_;
  if (s.filled == 0) return std::nullopt;
  std::fill(s.window.begin() + s.context_len + s.filled, s.window.end(), 0.0f);
  return s.compute_window();
}

void VadSession::reset() {
  State& s = *state_;
  std::fill(s.h.begin(), s.h.end(), 0.0f);
  std::fill(s.c.begin(), s.c.end(), 0.0f);
  std::fill(s.window.begin(), s.window.end(), 0.0f);
  s.filled = 0;
  s.samples_pushed = 0;
  s.windows = 0;
}

int64_t VadSession::samples_pushed() const { return state_->samples_pushed; }
int64_t VadSession::windows_computed() const { return state_->windows; }

}  // namespace earshot::vad
