// earshot-bench-model: times earshot's Whisper engine against libwhisper 1.9.1
// on one model file in one run: repetitions interleaved across the contenders
// (so machine load drifts hit all of them alike), medians reported.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "features/mel.h"
#include "model/runtime/device.h"
#include "model/runtime/openblas_ops.h"
#include "model/whisper/model.h"
#include "model/whisper/session.h"
#include "tools/bench_model/batch_step.h"
#include "tools/bench_model/batched_sessions.h"
#include "tools/bench_model/machine_rates.h"
#include "tools/common/libwhisper_context.h"
#include "tools/common/tool_args.h"

namespace {

namespace ew = earshot::whisper;
using Clock = std::chrono::steady_clock;

const char* kUsage =
    "usage: earshot-bench-model --model FILE [--threads T] [--reps N] [--steps S] [--parts "
    "all|encoder|decoder|batch|sessions|machine]\n"
    "                           [--device cpu|NAME] [--control on|off]\n"
    "\n"
    "Measures in one run, with N (default 5) interleaved repetitions and medians, earshot's time\n"
    "and libwhisper 1.9.1's (flash attention off and on) for: the encoder on a 30 s window\n"
    "(log-mel excluded for both); one decoder step at KV lengths 16, 64 and 200 (S steps per\n"
    "repetition and contender, default 16, as a decoder runs them); and earshot's\n"
    "encoder on 5 s of audio with the audio-only (short input) option. Encoders are compared\n"
    "like for like (earshot's explicit-softmax encoder vs libwhisper fa=off, its flash encoder vs\n"
    "fa=on); earshot's decoder step against libwhisper's with flash attention off and on. Last\n"
    "line: max_ratio=X, the worst ratio ours/libwhisper over those comparisons. --parts times only\n"
    "the encoders or only the decoder steps (default all); --parts batch times only the weight-\n"
    "bound half of a step (an MLP, the logits) for 1..16 rows in one graph vs one graph per row;\n"
    "--parts sessions times whole decoder steps of 1..16 sessions (10 s of audio each) as one batched\n"
    "graph vs one step per session, S steps per session and repetition, and prints the largest\n"
    "difference between them (0: bit for bit; rounding where ggml has llamafile's kernels).\n"
    "Against the machine, in the same run: after the timings, OpenBLAS's sgemm and ggml's product\n"
    "alone at each of the encoder's product shapes (30 s window), the streaming-read bandwidth on\n"
    "the same threads, and each encoder's achieved GFLOP/s and each decoder step's GB/s of weights\n"
    "as a fraction of them. --parts machine prints only those limits (30 s and 10 s windows).\n"
    "A line per KV length also gives our step with its weight products on the few-row op\n"
    "(--cpu-kernels auto: runtime/rows_ops.h) against ggml's, timed in the same run. Our step copies out the "
    "alignment\n"
    "heads' cross-attention (as the streaming policies ask); a line per KV length also gives\n"
    "it without, for what that costs (not compared). --device runs both engines on that\n"
    "ggml GPU (CUDA0 in a CUDA build; default cpu); where it has no fused attention op, the\n"
    "flash-attention contenders are left out (libwhisper would run that op on the CPU).\n"
    "--control on adds a second libwhisper fa=off context on the same file, timed like the\n"
    "others: its encoder and decoder-step ratios to the first (printed, not in max_ratio) are\n"
    "how far two identical engines drift apart in this run, i.e. the noise floor of the ratios.\n";

struct Args {
  std::string model, device = "cpu";
  int threads = 4;
  int reps = 5;
  int steps = 16;
  bool control = false;
  bool encoder = true;
  bool decoder = true;
  bool batch = false;
  bool sessions = false;
  bool machine_only = false;
};

Args parse_args(int argc, char** argv) {
  Args args;
  earshot::tools::parse_options(
      argc, argv, kUsage,
      {
          {"--model", [&](const std::string& v) { args.model = v; }},
          {"--threads", [&](const std::string& v) { args.threads = std::stoi(v); }},
          {"--reps", [&](const std::string& v) { args.reps = std::stoi(v); }},
          {"--steps", [&](const std::string& v) { args.steps = std::stoi(v); }},
          {"--device", [&](const std::string& v) { args.device = v; }},
          {"--control",
           [&](const std::string& v) {
             if (v != "on" && v != "off") {
               throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--control must be on or off, not " + v);
             }
             args.control = v == "on";
           }},
          {"--parts",
           [&](const std::string& v) {
             if (v != "all" && v != "encoder" && v != "decoder" && v != "batch" && v != "sessions" && v != "machine") {
               throw earshot::Error(earshot::ErrorCode::kInvalidArgument,
                                    "--parts must be all, encoder, decoder, batch, sessions or machine, not " + v);
             }
             args.machine_only = v == "machine";
             args.batch = v == "batch";
             args.sessions = v == "sessions";
             args.encoder = v != "decoder";
             args.decoder = v != "encoder";
           }},
      });
  if (args.model.empty())
    throw earshot::Error(earshot::ErrorCode::kInvalidArgument, std::string("--model is required\n") + kUsage);
  if (args.threads < 1 || args.reps < 1 || args.steps < 1)
    throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--threads, --reps and --steps must be >= 1");
  return args;
}

double seconds_of(const std::function<void()>& fn) {
  auto start = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

using WhisperContext = earshot::tools::LibWhisperContext;

int run(const Args& args) {
  earshot::tools::silence_libwhisper_log();
  const earshot::tools::EngineDevice device = earshot::tools::find_engine_device(args.device);
  ew::LoadOptions load_options;
  load_options.backend = device.backend;
  auto model = ew::Model::load(args.model, load_options);
  const ew::Hparams& hp = model->hparams();
  std::printf("model %s (%s): audio %dx%d text %dx%d n_vocab=%d type %s, device %s, threads %d, reps %d\n",
              args.model.c_str(), model->size_name().empty() ? "custom" : model->size_name().c_str(), hp.n_audio_state,
              hp.n_audio_layer, hp.n_text_state, hp.n_text_layer, hp.n_vocab, ggml_type_name(model->weight_type()),
              device.name(), args.threads, args.reps);
  if (args.batch) {
    earshot::tools::bench_batched_steps(model, args.threads, args.reps);
    return 0;
  }
  if (args.sessions) {
    earshot::tools::bench_batched_sessions(model, args.threads, args.reps, args.steps, 10);
    return 0;
  }
  if (args.machine_only) {
    for (int n_ctx : {hp.n_audio_ctx, hp.n_audio_ctx / 3})
      earshot::tools::measure_machine(*model, n_ctx, args.threads, 3);
    return 0;
  }

  // 30 s of low-level noise: speed does not depend on the content.
  std::mt19937 rng(1);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  std::vector<float> pcm(static_cast<size_t>(30) * 16000);
  for (float& x : pcm) x = noise(rng);
  std::vector<float> pcm5(pcm.begin(), pcm.begin() + 5 * 16000);

  ew::SessionOptions full_options;
  full_options.n_threads = args.threads;
  full_options.flash_attention = false;
  ew::Session ours(model, full_options);
  ew::SessionOptions flash_options = full_options;
  flash_options.flash_attention = true;
  flash_options.text = ours.text_ptr();
  ew::Session ours_flash(model, flash_options);
  ew::SessionOptions short_options = full_options;
  short_options.encoder_input = ew::EncoderInput::kAudioOnly;
  short_options.text = ours.text_ptr();
  ew::Session ours_short(model, short_options);
  // OpenBLAS's sgemm for the encoder's products and attention (--cpu-kernels openblas),
  // over the 30 s window and over 10 s of audio alone, where it loads on the CPU.
  ew::SessionOptions flash10_options = flash_options;
  flash10_options.encoder_input = ew::EncoderInput::kAudioOnly;
  ew::Session ours_flash10(model, flash10_options);
  std::unique_ptr<ew::Session> ours_blas, ours_blas10;
  if (earshot::runtime::is_cpu(model->device()) && earshot::runtime::openblas_available()) {
    ew::SessionOptions blas_options = full_options;
    blas_options.cpu_kernels = earshot::runtime::CpuKernels::kOpenBlas;
    blas_options.text = ours.text_ptr();
    ours_blas = std::make_unique<ew::Session>(model, blas_options);
    blas_options.encoder_input = ew::EncoderInput::kAudioOnly;
    ours_blas10 = std::make_unique<ew::Session>(model, blas_options);
  } else {
    std::printf("OpenBLAS encoder left out: %s\n", earshot::runtime::is_cpu(model->device())
                                                       ? earshot::runtime::openblas_status().c_str()
                                                       : "the model is not on the CPU");
  }

  // The decoder step's weight products on the few-row op (--cpu-kernels auto:
  // runtime/rows_ops.h), timed beside ggml's in the same run.
  ew::SessionOptions rows_options = full_options;
  rows_options.cpu_kernels = earshot::runtime::CpuKernels::kAuto;
  rows_options.text = ours.text_ptr();
  ew::Session ours_rows(model, rows_options);

  // Without a fused attention op on the device (our CUDA build leaves ggml's kernels
  // out) both engines would not run one: ours falls back to the explicit softmax,
  // libwhisper's scheduler to the CPU for that op. Such rows would compare nothing.
  const bool fused = ours_flash.fused_attention();
  if (!fused) std::printf("device %s has no fused attention op: flash-attention contenders left out\n", device.name());
  WhisperContext wfa_off(args.model, false, device.whisper_gpu);
  std::unique_ptr<WhisperContext> wfa_on;
  if (fused) wfa_on = std::make_unique<WhisperContext>(args.model, true, device.whisper_gpu);
  std::unique_ptr<WhisperContext> control;
  if (args.control) control = std::make_unique<WhisperContext>(args.model, false, device.whisper_gpu);
  std::vector<WhisperContext*> whispers = {&wfa_off};
  if (wfa_on) whispers.push_back(wfa_on.get());
  if (control) whispers.push_back(control.get());
  for (WhisperContext* w : whispers) w->pcm_to_mel(pcm, args.threads);
  ours.encode(pcm);
  ours_rows.encode(pcm);
  const earshot::features::Mel mel30 = ours.last_mel();
  ours_short.encode(pcm5);
  const earshot::features::Mel mel5 = ours_short.last_mel();

  const int sot = ours.tokenizer().special().sot;
  const std::vector<int> kv_lengths = args.decoder ? std::vector<int>{16, 64, 200} : std::vector<int>{};
  std::map<std::string, std::vector<double>> times;
  // Prefill a KV cache of n tokens, then time one single-token step at n_past = n.
  auto prompt_of = [&](int n) {
    std::vector<int32_t> t(n);
    t[0] = sot;
    for (int i = 1; i < n; ++i) t[i] = 400 + 37 * i;
    return t;
  };

  for (int rep = 0; rep < args.reps; ++rep) {
    if (args.encoder) {
      times["encoder 30s fa=off ours"].push_back(seconds_of([&] { ours.encode_mel(mel30, 3000); }));
      times["encoder 30s fa=off whisper"].push_back(seconds_of([&] { wfa_off.encode(args.threads); }));
      if (control) {
        times["encoder 30s fa=off control"].push_back(seconds_of([&] { control->encode(args.threads); }));
      }
      if (wfa_on) {
        times["encoder 30s fa=on ours"].push_back(seconds_of([&] { ours_flash.encode_mel(mel30, 3000); }));
        times["encoder 30s fa=on whisper"].push_back(seconds_of([&] { wfa_on->encode(args.threads); }));
      }
      times["encoder 5s ours audio-only"].push_back(seconds_of([&] { ours_short.encode_mel(mel5, 500); }));
      times["encoder 30s auto ours"].push_back(seconds_of([&] { ours_rows.encode_mel(mel30, 3000); }));
      if (ours_blas) {
        times["encoder 30s openblas ours"].push_back(seconds_of([&] { ours_blas->encode_mel(mel30, 3000); }));
        times["encoder 10s openblas ours"].push_back(seconds_of([&] { ours_blas10->encode_mel(mel30, 1000); }));
      }
      times["encoder 10s fa=on ours"].push_back(seconds_of([&] { ours_flash10.encode_mel(mel30, 1000); }));
    }
    for (int kv : kv_lengths) {
      const std::vector<int32_t> prompt = prompt_of(kv);
      const int32_t next = 1234;
      const std::string key = "decoder step kv=" + std::to_string(kv);
      ours.reset(1);
      earshot::DecodeRequest prefill;
      prefill.tokens = {prompt};
      prefill.want_attention = false;
      ours.decode(prefill);
      ours_rows.reset(1);
      ours_rows.decode(prefill);
      earshot::DecodeRequest one;
      one.tokens = {{next}};
      // What the streaming policies ask for after the first step: the alignment heads
      // attention, and no logits for the (always suppressed) timestamp tokens.
      one.want_attention = true;
      one.vocabulary_limit = ours.tokenizer().special().timestamp_begin;
      for (WhisperContext* w : whispers) {
        if (whisper_decode(w->get(), prompt.data(), kv, 0, args.threads) != 0) {
          throw earshot::Error(earshot::ErrorCode::kInternal, "whisper_decode prefill failed");
        }
      }
      // A decoder runs many steps in a row: each contender runs S consecutive steps
      // (rewritten at the same position: rollback / n_past = kv). Contenders take
      // turns across repetitions, and their order rotates with the repetition, so
      // neither load drifts nor the position after another's steps favour one.
      earshot::DecodeRequest plain = one;  // what libwhisper computes: no attention copied out
      plain.want_attention = false;
      std::vector<std::pair<std::string, std::function<void()>>> contenders = {
          {" ours", [&] { ours.decode(one); }},
          {" ours plain", [&] { ours.decode(plain); }},
          {" ours rows", [&] { ours_rows.decode(one); }},
      };
      for (WhisperContext* w : whispers) {
        const std::string name = w == &wfa_off        ? " whisper fa=off"
                                 : w == control.get() ? " whisper control"
                                                      : " whisper fa=on";
        contenders.emplace_back(name, [&, w] {
          if (whisper_decode(w->get(), &next, 1, kv, args.threads) != 0) {
            throw earshot::Error(earshot::ErrorCode::kInternal, "whisper_decode failed");
          }
        });
      }
      for (size_t c = 0; c < contenders.size(); ++c) {
        const auto& [name, step_once] = contenders[(c + rep) % contenders.size()];
        for (int step = 0; step < args.steps; ++step) {
          ours.rollback(kv);  // O(1): only our contenders need it, harmless for the others
          ours_rows.rollback(kv);
          times[key + name].push_back(seconds_of(step_once));
        }
      }
    }
  }

  double max_ratio = 0.0;
  auto row = [&](const std::string& label, double ours_s, double theirs_s) {
    const double ratio = ours_s / theirs_s;
    max_ratio = std::max(max_ratio, ratio);
    std::printf("%-36s ours %9.3f ms  libwhisper %9.3f ms  ratio %.3f\n", label.c_str(), ours_s * 1e3, theirs_s * 1e3,
                ratio);
  };
  // The control context against the first libwhisper fa=off one: the run's noise floor.
  auto control_row = [&](const std::string& label, const std::string& control_key, const std::string& first_key) {
    const double c = median(times[control_key]), f = median(times[first_key]);
    std::printf("%-36s libwhisper %9.3f ms vs %9.3f ms  control ratio %.3f (not in max_ratio)\n", label.c_str(),
                c * 1e3, f * 1e3, c / f);
  };
  // Encoder: same attention algorithm on both sides (explicit softmax, or fused).
  if (args.encoder) {
    for (const char* fa : {"fa=off", "fa=on"}) {
      const std::string key = std::string("encoder 30s ") + fa;
      if (times[key + " ours"].empty()) continue;
      row(key, median(times[key + " ours"]), median(times[key + " whisper"]));
      if (!times[key + " control"].empty()) control_row(key + " control", key + " control", key + " whisper");
    }
  }
  // Decoder: ours has one implementation; libwhisper's with flash attention off and on.
  for (int kv : kv_lengths) {
    const std::string key = "decoder step kv=" + std::to_string(kv);
    const double o = median(times[key + " ours"]);
    row(key + " vs whisper fa=off", o, median(times[key + " whisper fa=off"]));
    if (wfa_on) row(key + " vs whisper fa=on", o, median(times[key + " whisper fa=on"]));
    std::printf("%-36s ours %9.3f ms  (without the alignment heads' attention; not in max_ratio)\n",
                (key + " plain").c_str(), median(times[key + " ours plain"]) * 1e3);
    const double r = median(times[key + " ours rows"]);
    std::printf("%-36s ours %9.3f ms  (%.3f of ggml's products, %.3f of whisper fa=off; not in max_ratio)\n",
                (key + " rows op").c_str(), r * 1e3, r / o, r / median(times[key + " whisper fa=off"]));
    if (control) control_row(key + " control", key + " whisper control", key + " whisper fa=off");
  }
  if (args.encoder && !times["encoder 30s openblas ours"].empty()) {
    std::printf("%-36s ours %9.3f ms (%.3f of libwhisper fa=on, %.3f of ours fa=on)\n", "encoder 30s openblas",
                median(times["encoder 30s openblas ours"]) * 1e3,
                median(times["encoder 30s openblas ours"]) /
                    median(times[wfa_on ? "encoder 30s fa=on whisper" : "encoder 30s fa=off whisper"]),
                median(times["encoder 30s openblas ours"]) /
                    median(times[wfa_on ? "encoder 30s fa=on ours" : "encoder 30s fa=off ours"]));
  }
  if (args.encoder) {
    const double a = median(times["encoder 30s auto ours"]);
    std::printf(
        "%-36s ours %9.3f ms (%.3f of libwhisper fa=on; --cpu-kernels auto: OpenBLAS, a Q8_0 model's "
        "products on the int8 op where the CPU has AVX512-VNNI)\n",
        "encoder 30s auto", a * 1e3,
        a / median(times[wfa_on ? "encoder 30s fa=on whisper" : "encoder 30s fa=off whisper"]));
    const double short5 = median(times["encoder 5s ours audio-only"]);
    std::printf("%-24s ours %9.3f ms (%.3f of our 30 s encoder; libwhisper has no short-input encoder call)\n",
                "encoder 5s audio-only", short5 * 1e3, short5 / median(times["encoder 30s fa=off ours"]));
  }
  // The same run's machine limits: what these timings are as a fraction of the cores.
  const earshot::tools::MachineRates limits = earshot::tools::measure_machine(*model, hp.n_audio_ctx, args.threads, 3);
  if (args.encoder) {
    const double flop = earshot::tools::encoder_flop(earshot::tools::encoder_products(hp, hp.n_audio_ctx));
    for (const char* fa : {"fa=off", "fa=on", "openblas"}) {
      const std::string key = std::string("encoder 30s ") + fa;
      if (times[key + " ours"].empty()) continue;
      const double gflops = flop / median(times[key + " ours"]) * 1e-9;
      std::printf(
          "%-36s ours %7.1f GFLOP/s = %.2f of sgemm's %.1f at its shapes (products alone: ggml's %.2f, the "
          "OpenBLAS op's %.2f)\n",
          key.c_str(), gflops, gflops / limits.sgemm_gflops, limits.sgemm_gflops,
          limits.ggml_gflops / limits.sgemm_gflops, limits.op_gflops / limits.sgemm_gflops);
    }
    // 10 s of audio alone (500 frames): the streaming policies' encoder input,
    // against sgemm at its own shapes (fewer rows: a lower rate than the 30 s shapes').
    const int ctx10 = hp.n_audio_ctx / 3;
    const double flop10 = earshot::tools::encoder_flop(earshot::tools::encoder_products(hp, ctx10));
    const earshot::tools::MachineRates limits10 =
        earshot::tools::measure_machine(*model, ctx10, args.threads, 3, /*bandwidth=*/false);
    for (const char* k : {"fa=on", "openblas"}) {
      const std::string key = std::string("encoder 10s ") + k;
      if (times[key + " ours"].empty()) continue;
      const double t = median(times[key + " ours"]);
      const double gflops = flop10 / t * 1e-9;
      std::printf(
          "%-36s ours %9.3f ms %7.1f GFLOP/s = %.2f of sgemm's %.1f at its shapes (%.2f of the 30 s shapes' "
          "%.1f)\n",
          key.c_str(), t * 1e3, gflops, gflops / limits10.sgemm_gflops, limits10.sgemm_gflops,
          gflops / limits.sgemm_gflops, limits.sgemm_gflops);
    }
  }
  const double step_bytes = earshot::tools::decoder_step_weight_bytes(*model);
  for (int kv : kv_lengths) {
    const std::string key = "decoder step kv=" + std::to_string(kv);
    const double gbs = step_bytes / median(times[key + " ours"]) * 1e-9;
    std::printf("%-36s ours %7.1f GB/s of weights = %.2f of the %.1f GB/s streaming read\n", key.c_str(), gbs,
                gbs / limits.bandwidth_gbs, limits.bandwidth_gbs);
    // serve's step: the few-row op and the cache ops (--cpu-kernels auto).
    if (times[key + " ours rows"].empty()) continue;
    const double rows_gbs = step_bytes / median(times[key + " ours rows"]) * 1e-9;
    std::printf("%-36s ours %7.1f GB/s of weights = %.2f of the %.1f GB/s streaming read\n", (key + " rows op").c_str(),
                rows_gbs, rows_gbs / limits.bandwidth_gbs, limits.bandwidth_gbs);
  }
  std::printf("max_ratio=%.3f\n", max_ratio);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  earshot::tools::use_openblas_best_kernels(argv);
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-bench-model: %s\n", e.what());
    return 2;
  }
}
