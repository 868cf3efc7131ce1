// A plain C++ Silero forward pass, written independently of the ggml graph, to
// check it: double arithmetic, except that convolution inputs are rounded to f16
// exactly where ggml's im2col does (that rounding is part of the computation
// whisper.cpp defines, so it is reproduced rather than tolerated).
#pragma once

#include <cmath>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "vad/model_impl.h"

namespace earshot::vad::test {

class ScalarSilero {
 public:
  explicit ScalarSilero(const VadModel& model) {
    const VadModel::Impl& m = model.impl();
    basis_ = floats(m.stft_basis);
    for (int i = 0; i < kEncoderLayers; ++i) {
      enc_w_[i] = floats(m.encoder_weight[i]);
      enc_b_[i] = floats(m.encoder_bias[i]);
    }
    w_ih_ = floats(m.lstm_ih_weight);
    w_hh_ = floats(m.lstm_hh_weight);
    b_ih_ = floats(m.lstm_ih_bias);
    b_hh_ = floats(m.lstm_hh_bias);
    final_w_ = floats(m.final_weight);
    final_b_ = floats(m.final_bias)[0];
    reset();
  }

  void reset() {
    h_.assign(kLstmSize, 0.0);
    c_.assign(kLstmSize, 0.0);
  }

  // One step on the 640 padded samples; returns the speech probability.
  double step(const std::vector<float>& padded) {
    // STFT magnitude: [129 bins][n_frames].
    const int n_frames = (static_cast<int>(padded.size()) - kStftFilter) / kStftHop + 1;
    std::vector<std::vector<double>> cur(kStftChannels / 2, std::vector<double>(n_frames));
    std::vector<double> input(padded.size());
    for (size_t i = 0; i < padded.size(); ++i) input[i] = f16(padded[i]);
    for (int f = 0; f < n_frames; ++f) {
      double parts[kStftChannels];
      for (int ch = 0; ch < kStftChannels; ++ch) {
        double s = 0.0;
        for (int k = 0; k < kStftFilter; ++k) s += basis_[ch * kStftFilter + k] * input[f * kStftHop + k];
        parts[ch] = static_cast<float>(s);
      }
      for (int b = 0; b < kStftChannels / 2; ++b) {
        cur[b][f] = std::sqrt(parts[b] * parts[b] + parts[b + kStftChannels / 2] * parts[b + kStftChannels / 2]);
      }
    }
    for (int i = 0; i < kEncoderLayers; ++i) cur = conv_relu(cur, i);

    std::vector<double> gates(4 * kLstmSize);
    for (int r = 0; r < 4 * kLstmSize; ++r) {
      double s = b_ih_[r] + b_hh_[r];
      for (int k = 0; k < kLstmSize; ++k) s += w_ih_[r * kLstmSize + k] * cur[k][0] + w_hh_[r * kLstmSize + k] * h_[k];
      gates[r] = s;
    }
    double logit = final_b_;
    for (int k = 0; k < kLstmSize; ++k) {
      const double in = sigmoid(gates[k]), forget = sigmoid(gates[kLstmSize + k]);
      const double cell = std::tanh(gates[2 * kLstmSize + k]), out = sigmoid(gates[3 * kLstmSize + k]);
      c_[k] = forget * c_[k] + in * cell;
      h_[k] = out * std::tanh(c_[k]);
      logit += final_w_[k] * f16(std::max(0.0, h_[k]));
    }
    return sigmoid(logit);
  }

 private:
  static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static double f16(double x) { return ggml_fp16_to_fp32(ggml_fp32_to_fp16(static_cast<float>(x))); }

  static std::vector<double> floats(const ggml_tensor* t) {
    std::vector<float> f(ggml_nelements(t));
    if (t->type == GGML_TYPE_F16) {
      std::vector<ggml_fp16_t> raw(f.size());
      ggml_backend_tensor_get(t, raw.data(), 0, ggml_nbytes(t));
      ggml_fp16_to_fp32_row(raw.data(), f.data(), static_cast<int64_t>(f.size()));
    } else {
      ggml_backend_tensor_get(t, f.data(), 0, ggml_nbytes(t));
    }
    return std::vector<double>(f.begin(), f.end());
  }

  // Kernel-3, padding-1 conv + bias + ReLU; weights in ggml order [k][in][out].
  std::vector<std::vector<double>> conv_relu(std::vector<std::vector<double>> x, int layer) const {
    for (auto& channel : x) {
      for (double& v : channel) v = f16(v);
    }
    const int in = kEncoderIn[layer], out = kEncoderOut[layer], stride = kEncoderStride[layer];
    const int len = static_cast<int>(x[0].size());
    const int out_len = (len + 2 - kEncoderKernel) / stride + 1;
    std::vector<std::vector<double>> y(out, std::vector<double>(out_len));
    for (int o = 0; o < out; ++o) {
      for (int t = 0; t < out_len; ++t) {
        double s = 0.0;
        for (int i = 0; i < in; ++i) {
          for (int k = 0; k < kEncoderKernel; ++k) {
            const int pos = t * stride + k - 1;
            if (pos >= 0 && pos < len) s += enc_w_[layer][(o * in + i) * kEncoderKernel + k] * x[i][pos];
          }
        }
        y[o][t] = std::max(0.0, static_cast<double>(static_cast<float>(s)) + enc_b_[layer][o]);
      }
    }
    return y;
  }

  std::vector<double> basis_, w_ih_, w_hh_, b_ih_, b_hh_, final_w_;
  std::vector<double> enc_w_[kEncoderLayers], enc_b_[kEncoderLayers];
  double final_b_ = 0.0;
  std::vector<double> h_, c_;
};

// The 640 samples the STFT sees for window `w` of `samples` (zero-padded at the end).
inline std::vector<float> padded_window(const std::vector<float>& samples, size_t w, WindowContext mode) {
  auto at = [&](int64_t i) { return i >= 0 && static_cast<size_t>(i) < samples.size() ? samples[i] : 0.0f; };
  const int64_t start = static_cast<int64_t>(w) * kWindowSamples;
  std::vector<float> x;
  if (mode == WindowContext::kReflect) {
    for (int i = kContextSamples; i >= 1; --i) x.push_back(at(start + i));  // reflect, edge excluded
    for (int i = 0; i < kWindowSamples; ++i) x.push_back(at(start + i));
  } else {
    for (int i = -kContextSamples; i < kWindowSamples; ++i) x.push_back(at(start + i));  // zeros before the stream
  }
  const int64_t last = start + kWindowSamples - 1;
  for (int i = 1; i <= kContextSamples; ++i) x.push_back(at(last - i));
  return x;
}

}  // namespace earshot::vad::test
