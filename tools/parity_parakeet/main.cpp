// earshot-parity-parakeet: earshot's FastConformer-TDT (encoder, prediction net,
// joint, greedy TDT) against libparakeet (whisper.cpp 1.9.1, the test oracle) on
// one model and audio:
//  - same mel (ours, fed to both): per emission (token, frame, duration,
//    log-prob) equal; teacher-forced joint log-probs along libparakeet's path
//    (our decoder follows its tokens, so near-ties cannot hide a difference);
//  - encoder output, read back from libparakeet through two "probe" models
//    (--probe-plus/--probe-minus: the same encoder, a joint that copies
//    +-relu of each encoder value into the logits and emits on every frame);
//  - end to end, each engine computing its own mel from the same samples (ours
//    with libparakeet's frame count, n/160 + 1; the rest with NeMo's, n/160,
//    earshot's default);
//  - --gguf: the same model in earshot's GGUF gives identical results;
//  - the share of joint steps that emit a piece lies in [--min-share, --max-share].
// Exit status 1 when any check fails.
#include <parakeet.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "common/error.h"
#include "features/nemo_mel.h"
#include "model/fastconformer/encoder.h"
#include "model/fastconformer/model.h"
#include "model/runtime/device.h"
#include "tools/common/oracle_without_amx.h"
#include "tools/common/tool_args.h"

namespace fc = earshot::fastconformer;
namespace td = earshot::transducer;

namespace {

const char* kUsage =
    "usage: earshot-parity-parakeet --model FILE.bin --audio WAV [--gguf FILE] [--probe-plus FILE.bin\n"
    "                               --probe-minus FILE.bin] [--threads T] [--seconds S]\n"
    "                               [--min-share X] [--max-share X] [--tolerance X] [--encoder-tolerance X]\n"
    "                               [--ours-only 1]  (earshot's side only: the share of emitting steps)\n"
    "                               [--cpu-kernels ggml|openblas]  (earshot's encoder products; default ggml)\n";

struct Emitted {
  parakeet_token_data data;
  std::vector<float> log_probs;  // libparakeet's joint output at that step (log-softmax over all outputs)
};

struct Oracle {
  parakeet_context* ctx = nullptr;
  explicit Oracle(const std::string& path) {
    parakeet_context_params params = parakeet_context_default_params();
    params.use_gpu = false;
    ctx = parakeet_init_from_file_with_params(path.c_str(), params);
    if (!ctx) throw earshot::Error(earshot::ErrorCode::kInvalidModel, "libparakeet cannot load " + path);
  }
  ~Oracle() { parakeet_free(ctx); }
  // mel == nullptr: libparakeet computes its own from the samples.
  std::vector<Emitted> run(const fc::Hparams& hp, const earshot::features::FrameMajorMel* mel,
                           const std::vector<float>& samples, int threads) {
    std::vector<Emitted> out;
    parakeet_full_params params = parakeet_full_default_params(PARAKEET_SAMPLING_GREEDY);
    params.n_threads = threads;
    params.no_context = true;
    struct User {
      std::vector<Emitted>* out;
      int n;
    } user{&out, hp.n_vocab + 1 + static_cast<int>(hp.durations.size())};
    params.new_token_callback = [](parakeet_context*, parakeet_state* state, const parakeet_token_data* d, void* u) {
      auto* user = static_cast<User*>(u);
      const float* lp = parakeet_get_logits_from_state(state);
      user->out->push_back({*d, std::vector<float>(lp, lp + user->n)});
    };
    params.new_token_callback_user_data = &user;
    int rc;
    if (mel) {
      if (parakeet_set_mel(ctx, mel->data.data(), mel->n_frames, mel->n_mel) != 0)
        throw earshot::Error(earshot::ErrorCode::kInternal, "parakeet_set_mel failed");
      rc = parakeet_full(ctx, params, nullptr, 0);
    } else {
      rc = parakeet_full(ctx, params, samples.data(), static_cast<int>(samples.size()));
    }
    if (rc != 0) throw earshot::Error(earshot::ErrorCode::kInternal, "parakeet_full failed: " + std::to_string(rc));
    return out;
  }
};

struct Ours {
  std::shared_ptr<const fc::Model> model;
  fc::EncoderOutput enc;
  std::vector<td::Emission> emissions;
  td::GreedyStats stats;
};

Ours run_ours(const std::string& path, const earshot::features::FrameMajorMel& mel, ggml_backend_t backend,
              earshot::runtime::CpuKernels kernels) {
  Ours o;
  o.model = fc::Model::load(path);
  fc::EncoderOptions options;
  options.batch_norm_eps = 0;      // libparakeet's BatchNorm (see EncoderOptions)
  options.f16_subsampling = true;  // libparakeet's f16 im2col in the subsampling convs (see EncoderOptions)
  options.cpu_kernels = kernels;
  fc::Encoder encoder(o.model, backend, options);
  o.enc = encoder.encode(mel.data, mel.n_frames);
  td::Decoder decoder(&o.model->decoder_weights());
  td::DecoderState state = decoder.initial_state();
  o.stats = decoder.greedy(decoder.project_encoder(o.enc.data, o.enc.n_frames), o.enc.n_frames, state, o.emissions);
  return o;
}

earshot::features::FrameMajorMel our_mel(const fc::Model& m, const std::vector<float>& samples,
                                         earshot::features::NemoFrameCount frames) {
  const fc::Hparams& hp = m.hparams();
  earshot::features::NemoMelConfig c;
  c.n_fft = hp.n_fft, c.hop_length = hp.hop_length, c.n_mels = hp.n_mels, c.preemph = hp.preemph;
  c.log_guard = hp.log_guard, c.normalize_per_feature = hp.feature_norm == fc::FeatureNorm::kPerFeature;
  c.frame_count = frames;
  return earshot::features::nemo_log_mel(samples, c, m.mel_filters(), m.window());
}

struct Compare {
  int agree = 0, total = 0;
  double max_lp = 0, max_tf = 0;
};

// Emission by emission, then the teacher-forced joint along libparakeet's path.
Compare compare(const Ours& ours, const std::vector<Emitted>& theirs) {
  Compare c;
  c.total = static_cast<int>(std::max(ours.emissions.size(), theirs.size()));
  for (size_t i = 0; i < std::min(ours.emissions.size(), theirs.size()); ++i) {
    const td::Emission& a = ours.emissions[i];
    const parakeet_token_data& b = theirs[i].data;
    if (a.token == b.id && a.frame == b.frame_index && a.duration == b.duration_value) {
      ++c.agree;
      c.max_lp = std::max(c.max_lp, static_cast<double>(std::abs(a.log_prob - b.plog)));
    }
  }
  td::Decoder decoder(&ours.model->decoder_weights());
  const std::vector<float> proj = decoder.project_encoder(ours.enc.data, ours.enc.n_frames);
  const int n_joint = ours.model->decoder_weights().joint_enc.rows;
  td::DecoderState state = decoder.initial_state();
  std::vector<float> logits;
  for (const Emitted& e : theirs) {
    const int t = e.data.frame_index;
    if (t < 0 || t >= ours.enc.n_frames) {
      c.max_tf = INFINITY;
      break;
    }
    decoder.joint(std::span<const float>(proj).subspan(static_cast<size_t>(t) * n_joint, n_joint), state, logits);
    td::Decoder::log_softmax(logits);
    for (size_t k = 0; k < logits.size(); ++k)
      c.max_tf = std::max(c.max_tf, static_cast<double>(std::abs(logits[k] - e.log_probs[k])));
    decoder.predict(state, e.data.id);
  }
  return c;
}

// libparakeet's encoder output from the probes' logits: z_i = logp_i - logp_ref (ref: logit n_state, exactly 0).
std::vector<float> probed_encoder(const std::vector<Emitted>& plus, const std::vector<Emitted>& minus, int n_state,
                                  int n_frames, bool& ok) {
  std::vector<float> enc(static_cast<size_t>(n_frames) * n_state, NAN);
  ok = plus.size() == static_cast<size_t>(n_frames) && minus.size() == plus.size();
  for (size_t f = 0; ok && f < plus.size(); ++f) {
    if (plus[f].data.frame_index != static_cast<int>(f) || minus[f].data.frame_index != static_cast<int>(f)) ok = false;
    for (int i = 0; ok && i < n_state; ++i) {
      const float zp = plus[f].log_probs[i] - plus[f].log_probs[n_state];
      const float zm = minus[f].log_probs[i] - minus[f].log_probs[n_state];
      enc[f * n_state + i] = zp - zm;
    }
  }
  return enc;
}

}  // namespace

int main(int argc, char** argv) {
  earshot::tools::deny_amx_to_this_process();  // oracle_without_amx.h
  try {
    std::string model, gguf, audio, probe_plus, probe_minus;
    int threads = 2;
    bool ours_only = false;
    earshot::runtime::CpuKernels kernels = earshot::runtime::CpuKernels::kGgml;
    double seconds = 0, min_share = 0.2, max_share = 0.4, tolerance = 1e-3, encoder_tolerance = 1e-3;
    earshot::tools::parse_options(
        argc, argv, kUsage,
        {{"--model", [&](const std::string& v) { model = v; }},
         {"--gguf", [&](const std::string& v) { gguf = v; }},
         {"--audio", [&](const std::string& v) { audio = v; }},
         {"--probe-plus", [&](const std::string& v) { probe_plus = v; }},
         {"--probe-minus", [&](const std::string& v) { probe_minus = v; }},
         {"--threads", [&](const std::string& v) { threads = std::stoi(v); }},
         {"--ours-only", [&](const std::string& v) { ours_only = v == "1"; }},
         {"--seconds", [&](const std::string& v) { seconds = std::stod(v); }},
         {"--min-share", [&](const std::string& v) { min_share = std::stod(v); }},
         {"--max-share", [&](const std::string& v) { max_share = std::stod(v); }},
         {"--tolerance", [&](const std::string& v) { tolerance = std::stod(v); }},
         {"--encoder-tolerance", [&](const std::string& v) { encoder_tolerance = std::stod(v); }},
         {"--cpu-kernels",
          [&](const std::string& v) { kernels = earshot::runtime::parse_cpu_kernels(v, "--cpu-kernels"); }}});
    if (model.empty() || audio.empty()) throw earshot::Error(earshot::ErrorCode::kInvalidArgument, kUsage);
    parakeet_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
    std::vector<float> samples = earshot::audio::load_wav_file(audio);
    if (seconds > 0) samples.resize(std::min(samples.size(), static_cast<size_t>(seconds * 16000)));
    ggml_backend_ptr backend = earshot::runtime::create_backend(nullptr, threads);
    bool ok = true;
    auto check = [&](bool pass, const char* what) {
      std::printf("%-58s %s\n", what, pass ? "ok" : "FAILED");
      ok = ok && pass;
    };

    const auto t0 = std::chrono::steady_clock::now();
    const auto loaded = fc::Model::load(model);
    const earshot::features::FrameMajorMel mel = our_mel(*loaded, samples, earshot::features::NemoFrameCount::kNemo);
    Ours ours = run_ours(model, mel, backend.get(), kernels);
    std::printf("earshot's encoder products: %s\n", earshot::runtime::to_string(kernels).data());
    if (ours_only) {  // tuning a generator: our side's share and variation only
      std::printf("ours: %d of %d joint steps emit (%.3f)\n", ours.stats.emissions, ours.stats.steps,
                  ours.stats.steps ? static_cast<double>(ours.stats.emissions) / ours.stats.steps : 0.0);
    }
    if (ours_only) return 0;
    Oracle oracle(model);
    const std::vector<Emitted> theirs = oracle.run(loaded->hparams(), &mel, samples, threads);
    const Compare same = compare(ours, theirs);
    const double share = ours.stats.steps ? static_cast<double>(ours.stats.emissions) / ours.stats.steps : 0.0;
    std::printf("audio %.2f s, %d mel frames (NeMo's count), %d encoder frames, %d joint steps\n",
                samples.size() / 16000.0, mel.n_frames, ours.enc.n_frames, ours.stats.steps);
    std::printf(
        "same mel: %d of %d emissions equal (ours %zu, libparakeet %zu); max |log-prob diff| %.3g;\n"
        "          teacher-forced joint along libparakeet's path: max |log-prob diff| %.3g\n",
        same.agree, same.total, ours.emissions.size(), theirs.size(), same.max_lp, same.max_tf);
    {
      // How much the encoder output moves from frame to frame (a random model whose
      // frames were all alike would decode the same piece on every step).
      const int T = ours.enc.n_frames, d = ours.enc.n_state;
      double var_t = 0, total = 0;
      for (int i = 0; i < d; ++i) {
        double mean = 0;
        for (int t = 0; t < T; ++t) mean += ours.enc.data[t * d + i];
        mean /= T;
        for (int t = 0; t < T; ++t) {
          const double x = ours.enc.data[t * d + i];
          var_t += (x - mean) * (x - mean);
          total += x * x;
        }
      }
      std::printf("encoder output: %.3f of its energy varies over time\n", total > 0 ? var_t / total : 0.0);
    }
    std::printf("emissions (token@frame+duration):");
    for (size_t i = 0; i < ours.emissions.size() && i < 24; ++i)
      std::printf(" %d@%d+%d", ours.emissions[i].token, ours.emissions[i].frame, ours.emissions[i].duration);
    std::printf("%s\n", ours.emissions.size() > 24 ? " ..." : "");
    std::printf("non-blank share of joint steps: %.3f (%d of %d)\n", share, ours.stats.emissions, ours.stats.steps);
    check(same.agree == same.total && same.total > 0, "same mel: every emission equal");
    check(same.max_tf <= tolerance, "same mel: teacher-forced log-probs within tolerance");
    check(share >= min_share && share <= max_share, "non-blank share within [min-share, max-share]");

    if (!probe_plus.empty() && !probe_minus.empty()) {
      Oracle plus(probe_plus), minus(probe_minus);
      const auto probe_model = fc::Model::load(probe_plus);
      bool complete = false;
      const std::vector<float> theirs_enc = probed_encoder(plus.run(probe_model->hparams(), &mel, samples, threads),
                                                           minus.run(probe_model->hparams(), &mel, samples, threads),
                                                           ours.enc.n_state, ours.enc.n_frames, complete);
      // An f16 probe joint reads back f16-rounded values (libparakeet rounds the
      // vector an f16 matrix multiplies): compare ours rounded the same way.
      const bool f16 = probe_model->decoder_weights().joint_enc.f16_input;
      double max_diff = 0, max_abs = 0;
      for (size_t i = 0; i < theirs_enc.size(); ++i) {
        const float ours_value = f16 ? static_cast<float>(static_cast<_Float16>(ours.enc.data[i])) : ours.enc.data[i];
        max_diff = std::max(max_diff, static_cast<double>(std::abs(theirs_enc[i] - ours_value)));
        max_abs = std::max(max_abs, static_cast<double>(std::abs(ours.enc.data[i])));
      }
      std::printf("encoder output, same mel%s: max |diff| %.3g (max |value| %.3g, relative %.3g)\n",
                  f16 ? " (both rounded to f16 by the probe)" : "", max_diff, max_abs,
                  max_diff / std::max(max_abs, 1e-30));
      check(complete, "probes: libparakeet emitted on every encoder frame");
      check(complete && max_diff <= encoder_tolerance, "encoder output within encoder-tolerance");
    }

    // End to end: libparakeet's own mel from the samples vs ours, counted as
    // libparakeet counts (one frame past NeMo's n/160: the frame centred on the end).
    const std::vector<Emitted> theirs_e2e = oracle.run(loaded->hparams(), nullptr, samples, threads);
    const earshot::features::FrameMajorMel mel_lp =
        our_mel(*loaded, samples, earshot::features::NemoFrameCount::kLibparakeet);
    const Compare e2e = compare(run_ours(model, mel_lp, backend.get(), kernels), theirs_e2e);
    std::printf(
        "end to end (each its own mel, %d frames: libparakeet's count): %d of %d emissions equal; teacher-forced max "
        "|log-prob diff| %.3g\n",
        mel_lp.n_frames, e2e.agree, e2e.total, e2e.max_tf);
    check(e2e.max_tf <= 10 * tolerance, "end to end: teacher-forced log-probs within 10x tolerance");

    if (!gguf.empty()) {
      const Ours g = run_ours(gguf, mel, backend.get(), kernels);
      bool same_output = g.enc.data == ours.enc.data && g.emissions.size() == ours.emissions.size();
      for (size_t i = 0; same_output && i < g.emissions.size(); ++i)
        same_output = g.emissions[i].token == ours.emissions[i].token &&
                      g.emissions[i].frame == ours.emissions[i].frame &&
                      g.emissions[i].log_prob == ours.emissions[i].log_prob;
      check(same_output, "GGUF file: identical encoder output and emissions");
    }
    std::printf("total %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-parity-parakeet: %s\n", e.what());
    return 1;
  }
}
