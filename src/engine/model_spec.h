// What to load and how: the file, where and how it computes, and the policy
// settings every stream starts from. Each family reads the part that concerns
// it; the rest is ignored (a transducer has no AlignAtt settings).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "model/whisper/alignment_heads.h"
#include "model/whisper/session.h"
#include "policy/alignatt/alignatt_config.h"
#include "policy/localagreement/local_agreement_processor.h"

namespace earshot::engine {

struct RuntimeOptions {
  std::string device;  // a ggml device name; "" = the CPU
  int threads = 4;     // CPU threads per model pass
  bool flash_attention = true;
};

struct WhisperOptions {
  std::vector<whisper::AlignmentHead> alignment_heads;  // empty = the preset for the dimensions
  whisper::EncoderInput encoder_input = whisper::EncoderInput::kFullWindow;
};

struct TransducerOptions {
  double window_seconds = 20;  // audio an offline transducer encodes at once (1 to 120 s)
};

struct PolicySettings {
  policy::AlignAttConfig alignatt;              // language and on_warning come from the stream
  policy::LocalAgreementConfig localagreement;  // likewise
};

struct ModelSpec {
  std::filesystem::path path;
  RuntimeOptions runtime;
  WhisperOptions whisper;
  TransducerOptions transducer;
  PolicySettings policies;
};

}  // namespace earshot::engine
