// Where and how the Whisper model runs, offered by every command that loads one
// (serve, transcribe, bench): --device auto (default) | cpu | a ggml device name
// (`earshot version` lists them; CUDA0 in a CUDA build), --flash-attention on | off.
#pragma once

#include "cli/args.h"
#include "model/whisper/model.h"

namespace earshot::cli {

void declare_model_options(Args& args);

// whisper::LoadOptions for --device: "cpu"; "auto" = the first GPU ggml offers,
// else the CPU; or a device by name. Throws earshot::Error(kInvalidArgument)
// naming the devices there are when the name is unknown.
whisper::LoadOptions read_model_options(const Args& args);

// --flash-attention: the encoder's fused attention (whisper::SessionOptions::flash_attention).
// Throws earshot::Error(kInvalidArgument) for anything but on or off.
bool read_flash_attention(const Args& args);

}  // namespace earshot::cli
