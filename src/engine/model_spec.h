// What to load and how: the file, where and how it computes, and the policy
// settings every stream starts from. Each family reads the part that concerns
// it; the rest is ignored (a transducer has no AlignAtt settings).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "model/runtime/openblas_ops.h"
#include "model/whisper/alignment_heads.h"
#include "model/whisper/session.h"
#include "policy/alignatt/alignatt_config.h"
#include "policy/alignatt/prompted_alignatt.h"
#include "policy/commit/revising_processor.h"
#include "policy/commit/rolling_decoder.h"
#include "policy/localagreement/local_agreement_processor.h"

namespace earshot::engine {

struct RuntimeOptions {
  std::string device;  // a ggml device name; "" = the CPU
  int threads = 4;     // CPU threads per model pass
  bool flash_attention = true;
  // The Whisper encoder's products: OpenBLAS where it loads on the CPU (auto), or as asked.
  runtime::CpuKernels cpu_kernels = runtime::CpuKernels::kAuto;
};

struct WhisperOptions {
  std::vector<whisper::AlignmentHead> alignment_heads;  // empty = the preset for the dimensions
  whisper::EncoderInput encoder_input = whisper::EncoderInput::kFullWindow;
  // Decoder steps of up to this many streams pending at once run as one graph
  // (whisper::DecodeBatcher, shared by the engine's streams); 0 = every step alone.
  int batch_decode = 0;
};

struct TransducerOptions {
  double window_seconds = 20;  // audio an offline transducer encodes at once (1 to 120 s)
  // A cache-aware streaming model's chunk, (right context + 1) x 80 ms: 80, 160,
  // 560, 1120 for Nemotron streaming, validated against the file; 0 = the file's
  // default. A non-streaming model refuses any other value than 0.
  int lookahead_ms = 0;
  // A streaming model: the chunks of up to this many streams ready at once run
  // as one graph (fastconformer::StreamingBatcher, shared by the engine's
  // streams); 0 = every chunk alone. An offline model ignores it.
  int batch_streams = 0;
};

// Qwen3-ASR: a text GGUF (--model) and its audio encoder (--mmproj).
struct Qwen3AsrOptions {
  std::filesystem::path mmproj;           // "" = found next to the model (PREFIX-mmproj.gguf, mmproj-NAME.gguf)
  std::filesystem::path alignment_heads;  // a file with alignment_heads_compact; "" = the last quarter of layers
  int n_ctx = 1024;                       // decoder context per stream (prompt, 15 s of audio, context, output)
  bool hf_mel_frames = false;             // --qwen3-mel-frames hf: n/160 mel frames (HF) instead of mtmd's n/160 + 1
  policy::commit::RollingConfig rolling;  // the rolling policy's prefix: previous pass minus its last tokens
};

struct PolicySettings {
  policy::AlignAttConfig alignatt;                   // language and on_warning come from the stream
  policy::LocalAgreementConfig localagreement;       // likewise
  policy::PromptedAlignAttConfig prompted_alignatt;  // Qwen3-ASR's AlignAtt (seed 002)
  policy::commit::RevisingConfig rolling = [] {      // Qwen3-ASR's rolling mode through the commit layer
    policy::commit::RevisingConfig c;
    c.commit.hold_back = 6;  // WhisperLiveKit's stable-commit defaults: ~6 units held, 2 agreeing passes
    c.commit.agreeing_passes = 2;
    return c;
  }();
};

struct ModelSpec {
  std::filesystem::path path;
  RuntimeOptions runtime;
  WhisperOptions whisper;
  TransducerOptions transducer;
  Qwen3AsrOptions qwen3asr;
  PolicySettings policies;
};

}  // namespace earshot::engine
