#include "engine/model_options.h"

#include <ggml-backend.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/text.h"
#include "engine/families.h"
#include "model/runtime/device.h"
#include "model/runtime/openblas_ops.h"
#include "policy/options.h"

namespace earshot::engine {

namespace {

bool serves_many_streams(CommandKind command) {
  return command == CommandKind::kServe || command == CommandKind::kBench;
}

// The ggml device name for --device ("" = the CPU).
std::string read_device(const Args& args) {
  ggml_backend_dev_t device = runtime::resolve_device(args.get("device"), "--device");
  return runtime::is_cpu(device) ? "" : ggml_backend_dev_name(device);
}

int read_batch_decode(const Args& args) {
  const long n = args.get_int("batch-decode");
  if (n < 0 || n > 1000000) throw Error(ErrorCode::kInvalidArgument, "--batch-decode must be 0 (off) or 2..64");
  return static_cast<int>(n);
}

}  // namespace

void declare_model_options(Args& args, CommandKind command) {
  policy::declare_options(args, command);
  args.option("device",
              "where the model runs: auto (the first GPU this build has, else the CPU), cpu, or a device "
              "from `earshot version` (e.g. CUDA0)",
              "auto");
  args.option("flash-attention",
              "fused attention in the encoder: on (about 40% faster on the CPU) or off (whisper.cpp's explicit "
              "softmax, bit-identical to libwhisper with flash attention off)",
              "on");
  args.option("cpu-kernels",
              "the encoders' matrix products on the CPU (and a float Qwen3-ASR text model's): auto (a quantised "
              "model's on ggml's AMX kernels where the CPU has AMX, the rest on OpenBLAS where Debian's libopenblas0 "
              "loads, else ggml; a Whisper decoder step's, a streaming transducer chunk's and a Voxtral decoder "
              "step's few rows on earshot's few-row kernels), openblas (sgemm in f32, about twice ggml's rate; "
              "--flash-attention then unused; "
              "steps of few rows as auto) or ggml (ggml's own kernels, as libwhisper)",
              "auto");
  for (const Family& f : families())
    if (f.declare_options) f.declare_options(args, command);
  if (serves_many_streams(command)) {
    args.option("batch-decode",
                "Whisper: run the decoder steps of up to N streams that wait at the same time as one graph (weights "
                "read once per step; results equal unbatched ones to rounding, bit for bit in a build without "
                "ggml's llamafile kernels); at most --workers wait at once. A cache-aware streaming transducer: the "
                "same for the chunks of up to N streams (bit for bit likewise). Qwen3-ASR: the prompts and steps of up "
                "to N streams in one llama context (N workers, one model computation at a time; bit for bit). "
                "Voxtral Realtime: the decoder steps of up to N streams (one per 80 ms slot) as one graph (bit for "
                "bit). Offline transducers refuse it. 0 = off",
                "0");
  }
}

ModelSpec read_model_spec(const Args& args, CommandKind command) {
  ModelSpec spec;
  spec.runtime.device = read_device(args);
  spec.runtime.flash_attention = args.get_on_off("flash-attention");
  spec.runtime.cpu_kernels = runtime::parse_cpu_kernels(args.get("cpu-kernels"), "--cpu-kernels");
  spec.runtime.threads = read_threads(args);
  if (serves_many_streams(command)) spec.runtime.batch_streams = read_batch_decode(args);
  policy::read_options(args, command, spec.policies);
  for (const Family& f : families())
    if (f.read_options) f.read_options(args, command, spec);
  return spec;
}

int read_threads(const Args& args) {
  if (args.get("threads") == "auto") return std::stoi(default_thread_count());
  const long threads = args.get_int("threads");
  if (threads < 1) throw Error(ErrorCode::kInvalidArgument, "--threads must be >= 1");
  return static_cast<int>(threads);
}

std::string policy_choices() {
  std::vector<std::string> parts;
  for (const Family& f : families())
    for (const PolicyOffer& o : f.offers) parts.push_back(join_list(o.policies) + " (" + o.models + ")");
  return join_list(parts, ", ");
}

std::string policy_lists() {
  std::string out;
  for (const Family& f : families())
    for (const PolicyOffer& o : f.offers)
      out += (out.empty() ? "" : "; ") + o.models + ": " + join_list(o.policies, ", ");
  return out;
}

}  // namespace earshot::engine
