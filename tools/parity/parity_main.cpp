// earshot-parity: runs earshot's Whisper engine and libwhisper (the pinned
// whisper.cpp 1.9.1, flash attention off) on the same model file and audio,
// end to end (each engine computes its own log-mel from the same samples),
// teacher-forces the same tokens into both and compares the logits step by
// step, the language-detection probabilities and the no-speech probability.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "common/error.h"
#include "model/whisper/model.h"
#include "model/whisper/session.h"
#include "tools/common/libwhisper_context.h"
#include "tools/common/oracle_without_amx.h"
#include "tools/common/tool_args.h"

namespace {

using earshot::DecodeRequest;
using earshot::DecodeResult;
namespace ew = earshot::whisper;

// Tolerances, derived from measurements on generated random-weight models whose
// logits span about +-13 (tests/model/CMakeLists.txt shapes, jfk.wav):
// - Fed the SAME mel, our graphs reproduce libwhisper's logits bit for bit
//   (measured difference exactly 0 on every shape and weight type), so the
//   same-mel check allows only float-noise: 1e-4.
// - End to end, each engine computes its own mel; ours differs from whisper.cpp's
//   by ~3e-5, which moves f16/f32-weight logits by <= 6e-3 (tolerance 2e-2) and
//   quantised-weight logits by <= 0.16 (tolerance 0.5: the activations are
//   quantised to 8 bits before each product, which amplifies tiny input changes).
// - Language and no-speech probabilities: measured <= 1e-4 (float weights) and
//   <= 1.7e-2 (quantised); tolerances 2e-3 and 5e-2.
constexpr double kSameMelTolerance = 1e-4;
// Our log-mel vs a whisper.cpp dump (--reference-mel): the features part's target.
constexpr double kMelTolerance = 1e-4;
constexpr double kFloatLogitTolerance = 2e-2;
constexpr double kQuantLogitTolerance = 0.5;
// On a GPU (CUDA, H200) the same mel difference moves logits further, since CUDA
// rounds activations to f16 in multi-token products and quantises them in its own
// blocks: measured 1.8e-2 (f16) and 0.62 (q5_0, 64-wide model), while the same-mel
// check there measured exactly 0 on every shape.
constexpr double kGpuFloatLogitTolerance = 5e-2;
constexpr double kGpuQuantLogitTolerance = 1.0;
constexpr double kFloatProbTolerance = 2e-3;
constexpr double kQuantProbTolerance = 5e-2;

const char* kUsage =
    "usage: earshot-parity --model FILE --audio WAV [--tokens N] [--threads T] [--language CODE]\n"
    "                      [--tolerance X] [--reference-mel FILE] [--device cpu|NAME]\n"
    "                      [--cpu-kernels ggml|openblas]\n"
    "\n"
    "Runs earshot's engine and libwhisper 1.9.1 (flash attention off) on the same model and\n"
    "audio (first 30 s), each computing its own log-mel from the same samples. Teacher-forces\n"
    "the SOT sequence, then N tokens (default 8) chosen by earshot's greedy argmax, into both,\n"
    "and prints per step the max abs logit difference and whether the argmaxes agree; then the\n"
    "language-detection probabilities (multilingual models) and the no-speech probability.\n"
    "Last line: max_abs_logit_diff=X argmax_agree=K/N\n"
    "\n"
    "Also runs libwhisper on OUR mel for the SOT step (same-mel check: must match within 1e-4;\n"
    "measured: bit-identical). Exit status 1 when a difference exceeds its tolerance, derived\n"
    "from measurements on generated models with logits spanning about +-13: end-to-end logits\n"
    "2e-2 for f16/f32 weights (measured <= 6e-3, all from the ~3e-5 mel difference), 0.5 for\n"
    "quantised weights (measured <= 0.16: activations are quantised to 8 bits); on a GPU 5e-2\n"
    "and 1.0 (measured 1.8e-2 and 0.62 on CUDA); language and no-speech probabilities 2e-3\n"
    "(quantised 5e-2). --tolerance overrides the logit one. --reference-mel compares our\n"
    "log-mel with a raw f32 [n_mels][frames] dump of whisper.cpp's (libwhisper does not expose\n"
    "its mel; fails above 1e-4), e.g. ../shared/reference/jfk-mel80-whispercpp.f32 for jfk.wav.\n"
    "--device runs both engines on that ggml GPU (CUDA0 in a CUDA build; default cpu).\n"
    "--cpu-kernels openblas runs earshot's encoder on OpenBLAS (f32 products and attention)\n"
    "instead of ggml's kernels: no longer the same rounding as libwhisper, so the same-mel check\n"
    "takes the logit tolerance, and with float weights every argmax must agree.\n";

struct Args {
  std::string model, audio, reference_mel, language = "en", device = "cpu";
  int tokens = 8;
  int threads = 4;
  double tolerance = -1.0;  // by weight type unless given
  earshot::runtime::CpuKernels cpu_kernels = earshot::runtime::CpuKernels::kGgml;
};

Args parse_args(int argc, char** argv) {
  Args args;
  earshot::tools::parse_options(
      argc, argv, kUsage,
      {
          {"--model", [&](const std::string& v) { args.model = v; }},
          {"--audio", [&](const std::string& v) { args.audio = v; }},
          {"--tokens", [&](const std::string& v) { args.tokens = std::stoi(v); }},
          {"--threads", [&](const std::string& v) { args.threads = std::stoi(v); }},
          {"--language", [&](const std::string& v) { args.language = v; }},
          {"--tolerance", [&](const std::string& v) { args.tolerance = std::stod(v); }},
          {"--reference-mel", [&](const std::string& v) { args.reference_mel = v; }},
          {"--device", [&](const std::string& v) { args.device = v; }},
          {"--cpu-kernels",
           [&](const std::string& v) { args.cpu_kernels = earshot::runtime::parse_cpu_kernels(v, "--cpu-kernels"); }},
      });
  if (args.model.empty() || args.audio.empty()) {
    throw earshot::Error(earshot::ErrorCode::kInvalidArgument,
                         std::string("--model and --audio are required\n") + kUsage);
  }
  if (args.tokens < 0 || args.threads < 1) {
    throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--tokens must be >= 0 and --threads >= 1");
  }
  return args;
}

struct Compare {
  double max_abs = 0.0;
  int ours_argmax = 0;
  int theirs_argmax = 0;
};

Compare compare_logits(const float* ours, const float* theirs, int n) {
  Compare c;
  for (int i = 0; i < n; ++i) {
    c.max_abs = std::max(c.max_abs, static_cast<double>(std::fabs(ours[i] - theirs[i])));
    if (ours[i] > ours[c.ours_argmax]) c.ours_argmax = i;
    if (theirs[i] > theirs[c.theirs_argmax]) c.theirs_argmax = i;
  }
  return c;
}

int run(const Args& args) {
  const earshot::tools::EngineDevice device = earshot::tools::find_engine_device(args.device);
  std::vector<float> pcm = earshot::audio::load_wav_file(args.audio);
  ew::LoadOptions load_options;
  load_options.backend = device.backend;
  auto model = ew::Model::load(args.model, load_options);
  const ew::Hparams& hp = model->hparams();
  const size_t max_samples = static_cast<size_t>(hp.n_audio_ctx) * 2 * 160;
  if (pcm.size() > max_samples) pcm.resize(max_samples);
  std::printf("model %s: n_vocab=%d n_mels=%d audio %dx%d text %dx%d heads %d/%d type %s\n", args.model.c_str(),
              hp.n_vocab, hp.n_mels, hp.n_audio_state, hp.n_audio_layer, hp.n_text_state, hp.n_text_layer,
              hp.n_audio_head, hp.n_text_head, ggml_type_name(model->weight_type()));
  std::printf("audio %s: %zu samples (%.2f s); device %s\n", args.audio.c_str(), pcm.size(), pcm.size() / 16000.0,
              device.name());

  const bool quantised = ggml_is_quantized(model->weight_type());
  const bool gpu = !device.backend.empty();
  const double logit_tolerance = args.tolerance >= 0 ? args.tolerance
                                 : quantised         ? (gpu ? kGpuQuantLogitTolerance : kQuantLogitTolerance)
                                                     : (gpu ? kGpuFloatLogitTolerance : kFloatLogitTolerance);
  const double prob_tolerance = quantised ? kQuantProbTolerance : kFloatProbTolerance;
  ew::SessionOptions options;
  options.n_threads = args.threads;
  options.flash_attention = false;  // whisper.cpp's explicit-softmax encoder, as libwhisper here
  options.cpu_kernels = args.cpu_kernels;
  ew::Session ours(model, options);
  const bool openblas = ours.openblas_encoder();
  const double same_mel_tolerance = openblas ? logit_tolerance : kSameMelTolerance;
  std::printf("earshot's encoder kernels: %s\n", openblas ? earshot::runtime::openblas_status().c_str() : "ggml");
  ours.encode(pcm);
  const ew::Tokenizer& tok = ours.tokenizer();
  bool failed = false;

  if (!args.reference_mel.empty()) {
    const auto& mel = ours.last_mel();
    std::ifstream in(args.reference_mel, std::ios::binary | std::ios::ate);
    if (!in) throw earshot::Error(earshot::ErrorCode::kIo, "cannot open reference mel " + args.reference_mel);
    const size_t n = static_cast<size_t>(in.tellg()) / sizeof(float);
    std::vector<float> ref(n);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(n * sizeof(float)));
    const int ref_frames = static_cast<int>(n / mel.n_mel);
    const int frames = std::min(ref_frames, mel.n_frames);
    double diff = 0.0;
    for (int m = 0; m < mel.n_mel; ++m) {
      for (int f = 0; f < frames; ++f) {
        diff = std::max(diff, static_cast<double>(std::fabs(mel.data[static_cast<size_t>(m) * mel.n_frames + f] -
                                                            ref[static_cast<size_t>(m) * ref_frames + f])));
      }
    }
    std::printf("mel: max_abs_diff=%.3g over %d frames x %d bins (ours %d frames, reference %d)\n", diff, frames,
                mel.n_mel, mel.n_frames, ref_frames);
    if (diff > kMelTolerance || frames == 0) failed = true;
  }

  earshot::tools::silence_libwhisper_log();
  earshot::tools::LibWhisperContext whisper(args.model, /*flash_attention=*/false, device.whisper_gpu);
  whisper_context* ctx = whisper.get();
  whisper.pcm_to_mel(pcm, args.threads);

  // Language detection first: libwhisper's detection re-encodes and decodes at n_past 0.
  if (tok.is_multilingual()) {
    std::vector<float> theirs(whisper_lang_max_id() + 1);
    if (whisper_lang_auto_detect(ctx, 0, args.threads, theirs.data()) < 0) {
      throw earshot::Error(earshot::ErrorCode::kInternal, "whisper_lang_auto_detect failed");
    }
    std::vector<float> mine = ours.detect_language();
    // libwhisper softmaxes over all 100 language ids even for 99-language models,
    // where id 99's "token" is <|translate|>; renormalise over the model's languages.
    theirs.resize(mine.size());
    double sum = 0.0;
    for (float p : theirs) sum += p;
    double diff = 0.0;
    size_t best_ours = 0, best_theirs = 0;
    for (size_t i = 0; i < mine.size(); ++i) {
      theirs[i] = static_cast<float>(theirs[i] / sum);
      diff = std::max(diff, static_cast<double>(std::fabs(mine[i] - theirs[i])));
      if (mine[i] > mine[best_ours]) best_ours = i;
      if (theirs[i] > theirs[best_theirs]) best_theirs = i;
    }
    std::printf("language: max_abs_prob_diff=%.3g top ours=%s (%.4f) whisper=%s (%.4f)\n", diff,
                std::string(ew::languages()[best_ours].code).c_str(), mine[best_ours],
                std::string(ew::languages()[best_theirs].code).c_str(), theirs[best_theirs]);
    if (diff > prob_tolerance) failed = true;
  }
  whisper.encode(args.threads);

  const int n_vocab = hp.n_vocab;
  std::vector<int32_t> prompt = tok.sot_sequence(tok.is_multilingual() ? args.language : "", ew::Task::kTranscribe);
  const int n_steps = std::min(args.tokens, hp.n_text_ctx - static_cast<int>(prompt.size()));
  double max_diff = 0.0;
  int agree = 0, compared = 0;
  auto step = [&](const std::vector<int32_t>& tokens, const std::string& label) -> int {
    const int n_past = ours.n_past();
    DecodeRequest request;
    request.tokens = {tokens};
    request.want_attention = false;
    DecodeResult mine = ours.decode(request);
    if (whisper_decode(ctx, tokens.data(), static_cast<int>(tokens.size()), n_past, args.threads) != 0) {
      throw earshot::Error(earshot::ErrorCode::kInternal, "whisper_decode failed at n_past " + std::to_string(n_past));
    }
    const float* theirs = whisper_get_logits(ctx) + static_cast<size_t>(tokens.size() - 1) * n_vocab;
    Compare c = compare_logits(mine.logits_at(0), theirs, n_vocab);
    max_diff = std::max(max_diff, c.max_abs);
    ++compared;
    if (c.ours_argmax == c.theirs_argmax) ++agree;
    std::printf("step %-12s n_past=%3d max_abs_logit_diff=%.3g argmax ours=%d whisper=%d %s\n", label.c_str(), n_past,
                c.max_abs, c.ours_argmax, c.theirs_argmax, c.ours_argmax == c.theirs_argmax ? "agree" : "DIFFER");
    if (label == "sot") {
      const float p_ours = ew::no_speech_probability({mine.logits_at(0), static_cast<size_t>(n_vocab)}, tok);
      const float p_theirs = ew::no_speech_probability({theirs, static_cast<size_t>(n_vocab)}, tok);
      std::printf("no_speech: ours=%.6f whisper=%.6f abs_diff=%.3g\n", p_ours, p_theirs, std::fabs(p_ours - p_theirs));
      if (std::fabs(p_ours - p_theirs) > prob_tolerance) failed = true;
    }
    return c.ours_argmax;
  };

  // SOT alone (its logits give the no-speech probability), the rest of the SOT
  // sequence as one multi-token step, then N single-token greedy steps.
  int next = step({prompt[0]}, "sot");
  if (prompt.size() > 1) next = step(std::vector<int32_t>(prompt.begin() + 1, prompt.end()), "sot-rest");
  for (int i = 0; i < n_steps; ++i) next = step({next}, "greedy-" + std::to_string(i));

  // Diagnostic: the SOT step again with libwhisper fed OUR mel, separating the graph
  // difference from the mel difference.
  {
    const auto& mel = ours.last_mel();
    if (whisper_set_mel(ctx, mel.data.data(), mel.n_frames, mel.n_mel) != 0 ||
        whisper_encode(ctx, 0, args.threads) != 0 || whisper_decode(ctx, &prompt[0], 1, 0, args.threads) != 0) {
      throw earshot::Error(earshot::ErrorCode::kInternal, "libwhisper failed on our mel");
    }
    ours.rollback(0);
    DecodeRequest request;
    request.tokens = {{prompt[0]}};
    request.want_attention = false;
    DecodeResult mine = ours.decode(request);
    Compare c = compare_logits(mine.logits_at(0), whisper_get_logits(ctx), n_vocab);
    const auto [lo, hi] = std::minmax_element(mine.logits.begin(), mine.logits.end());
    std::printf("same-mel sot: max_abs_logit_diff=%.3g (logits span %.2f..%.2f)\n", c.max_abs, *lo, *hi);
    if (c.max_abs > same_mel_tolerance) failed = true;
  }
  // Another rounding than libwhisper's: the logits stay within the tolerance and, with
  // float weights, the greedy choices are the same. (Quantised weights quantise the
  // activations to 8 bits, so near-ties of random weights flip either way: ggml's own
  // kernels fed a mel that differs by 3e-5 disagree once in 9 steps on q8_0 too.)
  if (openblas && !quantised && agree != compared) failed = true;

  if (max_diff > logit_tolerance) failed = true;
  std::printf("tolerances: logits %.3g, probabilities %.3g, same-mel %.3g\n", logit_tolerance, prob_tolerance,
              same_mel_tolerance);
  std::printf("max_abs_logit_diff=%.6g argmax_agree=%d/%d\n", max_diff, agree, compared);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  earshot::tools::deny_amx_to_this_process();  // oracle_without_amx.h
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-parity: %s\n", e.what());
    return 2;
  }
}
