// The decoding context every Qwen3-ASR stream runs on (a lone Session's, or the
// one a SharedContext's slots share): earshot's products and attention inside
// libllama's graph where the model's options put them, flash attention off (the
// alignment heads' kq_soft_max nodes exist only without it). Internal to the family.
#pragma once

#include <llama.h>

#include "model/qwen3asr/model.h"

namespace earshot::qwen3asr::detail {

// n_ctx positions over n_seq sequences; n_batch = n_ubatch = n_ctx / n_seq; one
// output (logits) row per sequence per call. cb_eval is left to the caller.
llama_context_params decoding_context_params(const Model& model, int n_ctx, int n_seq);

}  // namespace earshot::qwen3asr::detail
