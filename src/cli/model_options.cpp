#include "cli/model_options.h"

#include <ggml-backend.h>

#include <string>

#include "common/error.h"
#include "model/runtime/device.h"
#include "model/runtime/openblas_ops.h"

namespace earshot::cli {

void declare_model_options(Args& args) {
  args.option("device",
              "where the model runs: auto (the first GPU this build has, else the CPU), cpu, or a device "
              "from `earshot version` (e.g. CUDA0)",
              "auto");
  args.option("flash-attention",
              "fused attention in the encoder: on (about 40% faster on the CPU) or off (whisper.cpp's explicit "
              "softmax, bit-identical to libwhisper with flash attention off)",
              "on");
  args.option("cpu-kernels",
              "the encoders' matrix products on the CPU: auto (a quantised model's on ggml's AMX kernels where the "
              "CPU has AMX, the rest on OpenBLAS where Debian's libopenblas0 loads, else ggml), openblas (sgemm in "
              "f32, about twice ggml's rate; --flash-attention then unused) or ggml (ggml's own kernels, as "
              "libwhisper)",
              "auto");
  args.option("mmproj",
              "Qwen3-ASR's audio encoder (the mmproj GGUF) for a --model of arch qwen3vl; default: "
              "PREFIX-mmproj.gguf or mmproj-NAME.gguf beside the model",
              "");
  args.option("alignment-heads-file",
              "Qwen3-ASR: a JSON file with alignment_heads_compact ([[layer, head], ...], top 20 used); default: "
              "every head of the last quarter of the layers",
              "");
  args.option("lookahead-ms",
              "a cache-aware streaming transducer's chunk (Nemotron streaming: 80, 160, 560 or 1120 ms, as the "
              "model file allows): words come that much after their audio; 0 = the model's default",
              "0");
  args.option("qwen3-mel-frames",
              "Qwen3-ASR: mel frames of n samples, hence audio tokens: mtmd (n/160 + 1, as libmtmd and llama.cpp "
              "count them) or hf (n/160, as Hugging Face's WhisperFeatureExtractor and openai/whisper do)",
              "mtmd");
  args.option("rolling-unfixed-tokens",
              "Qwen3-ASR --policy rolling: tokens of the previous pass dropped from its end before it is forced as "
              "the next pass's prefix (Qwen3-ASR's unfixed_token_num)",
              "5");
  args.option("rolling-unfixed-passes",
              "Qwen3-ASR --policy rolling: passes of each segment decoded without a prefix (Qwen3-ASR's "
              "unfixed_chunk_num)",
              "2");
}

namespace {

bool read_flash_attention(const Args& args) {
  const std::string value = args.get("flash-attention");
  if (value == "on") return true;
  if (value == "off") return false;
  throw Error(ErrorCode::kInvalidArgument, "--flash-attention must be on or off, not '" + value + "'");
}

// The ggml device name for --device ("" = the CPU).
std::string read_device(const Args& args) {
  ggml_backend_dev_t device = runtime::resolve_device(args.get("device"), "--device");
  return runtime::is_cpu(device) ? "" : ggml_backend_dev_name(device);
}

}  // namespace

engine::RuntimeOptions read_runtime_options(const Args& args) {
  engine::RuntimeOptions options;
  options.device = read_device(args);
  options.flash_attention = read_flash_attention(args);
  options.cpu_kernels = runtime::parse_cpu_kernels(args.get("cpu-kernels"), "--cpu-kernels");
  options.threads = read_threads(args);
  return options;
}

int read_threads(const Args& args) {
  const long threads = args.get_int("threads");
  if (threads < 1) throw Error(ErrorCode::kInvalidArgument, "--threads must be >= 1");
  return static_cast<int>(threads);
}

void declare_batch_decode_option(Args& args) {
  args.option("batch-decode",
              "Whisper: run the decoder steps of up to N streams that wait at the same time as one graph (weights "
              "read once per step; results equal unbatched ones to rounding, bit for bit in a build without ggml's "
              "llamafile kernels); at most --workers wait at once. A cache-aware streaming transducer: the same for "
              "the chunks of up to N streams (bit for bit likewise). "
              "0 = off",
              "0");
}

int read_batch_decode(const Args& args) {
  const long n = args.get_int("batch-decode");
  if (n < 0 || n > 1000000) throw Error(ErrorCode::kInvalidArgument, "--batch-decode must be 0 (off) or 2..64");
  return static_cast<int>(n);
}

engine::Qwen3AsrOptions read_qwen3asr_options(const Args& args) {
  engine::Qwen3AsrOptions options;
  options.mmproj = args.get("mmproj");
  options.alignment_heads = args.get("alignment-heads-file");
  const std::string mel_frames = args.get("qwen3-mel-frames");
  if (mel_frames != "mtmd" && mel_frames != "hf")
    throw Error(ErrorCode::kInvalidArgument, "--qwen3-mel-frames must be mtmd or hf, not '" + mel_frames + "'");
  options.hf_mel_frames = mel_frames == "hf";
  options.rolling.unfixed_tokens = static_cast<int>(args.get_int("rolling-unfixed-tokens"));
  options.rolling.unfixed_passes = static_cast<int>(args.get_int("rolling-unfixed-passes"));
  try {
    options.rolling.validate();
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("--rolling-unfixed-tokens/--rolling-unfixed-passes: ") + e.what());
  }
  return options;
}

engine::TransducerOptions read_transducer_options(const Args& args) {
  engine::TransducerOptions options;
  const long ms = args.get_int("lookahead-ms");
  if (ms < 0 || ms > 100000) throw Error(ErrorCode::kInvalidArgument, "--lookahead-ms must be 0 to 100000");
  options.lookahead_ms = static_cast<int>(ms);
  return options;
}

}  // namespace earshot::cli
