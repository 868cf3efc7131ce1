// The Whisper family's own settings (ModelSpec::options<WhisperOptions>()).
#pragma once

#include <vector>

#include "model/whisper/alignment_heads.h"
#include "model/whisper/session.h"

namespace earshot::engine {

struct WhisperOptions {
  static constexpr const char* kFamily = "whisper";
  std::vector<whisper::AlignmentHead> alignment_heads;  // empty = the preset for the dimensions
  // --encoder-input: the 30 s window (whisper.cpp's) or only the audio present.
  whisper::EncoderInput encoder_input = whisper::EncoderInput::kFullWindow;
};

}  // namespace earshot::engine
