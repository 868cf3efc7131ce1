// Where and how the model runs, offered by every command that loads one
// (serve, transcribe, bench): --device auto (default) | cpu | a ggml device name
// (`earshot version` lists them; CUDA0 in a CUDA build), --flash-attention on | off,
// the command's own --threads, Qwen3-ASR's --mmproj and --alignment-heads-file, and
// a streaming transducer's --lookahead-ms.
#pragma once

#include "common/command_line.h"
#include "engine/model_spec.h"

namespace earshot::cli {

void declare_model_options(Args& args);

// --device: "cpu"; "auto" = the first GPU ggml offers, else the CPU; or a device by
// name. --flash-attention: the encoder's fused attention, on or off. --threads >= 1.
// Throws earshot::Error(kInvalidArgument) for a bad value (an unknown device names
// the devices there are).
engine::RuntimeOptions read_runtime_options(const Args& args);

// --threads (CPU threads per model pass), the one check of it every command uses:
// Throws Error(kInvalidArgument) "--threads must be >= 1" below 1.
int read_threads(const Args& args);

// --batch-decode N (serve and bench, many streams): Whisper decoder steps of up to N
// streams pending at once run as one graph; 0 = off. The engine validates it.
void declare_batch_decode_option(Args& args);
int read_batch_decode(const Args& args);

// --mmproj and --alignment-heads-file (Qwen3-ASR; other families ignore them).
engine::Qwen3AsrOptions read_qwen3asr_options(const Args& args);

// --lookahead-ms (cache-aware streaming transducers; 0 = the model's default).
// Throws Error(kInvalidArgument) for a negative value; the engine checks it against the file.
engine::TransducerOptions read_transducer_options(const Args& args);

}  // namespace earshot::cli
