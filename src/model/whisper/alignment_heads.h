// Cross-attention heads whose attention follows the audio (per model size), used
// by AlignAtt to know which audio frame a decoded token belongs to.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/whisper/hparams.h"

namespace earshot::whisper {

struct AlignmentHead {
  int layer = 0;  // decoder layer, 0-based
  int head = 0;   // head within that layer, 0-based
  bool operator==(const AlignmentHead&) const = default;
};

// The preset for a model size name ("tiny.en", "large-v3-turbo", ...); empty if unknown.
std::vector<AlignmentHead> alignment_heads_preset(std::string_view size_name);

// Size name guessed from the dimensions and vocabulary ("" when they match no release).
std::string model_size_name(const Hparams& hparams);

// The heads for this model: the preset for its size, or, for an unknown shape,
// every head of the last half of the decoder layers.
std::vector<AlignmentHead> default_alignment_heads(const Hparams& hparams);

// Parses a user override "L,H;L,H;..." (0-based); throws kInvalidArgument on
// malformed text or a head outside the model's layers/heads.
std::vector<AlignmentHead> parse_alignment_heads(std::string_view text, const Hparams& hparams);

}  // namespace earshot::whisper
