// earshot-bench-model --parts batch: the weight-bound half of a decoder step
// (a decoder layer's MLP and the token-embedding product for the logits) for B
// sequences in one ggml graph against the same B rows as B one-row graphs: what
// batching decoder steps across streams saves, since a one-row step reads every
// weight once per stream and a B-row step reads them once for all B. It also
// checks that each row's logits equal the one-row graph's bit for bit.
#pragma once

#include <memory>

#include "model/whisper/model.h"

namespace earshot::tools {

// Prints one line per batch size (1, 2, 4, 8, 16): batched and one-by-one
// times (medians of `reps`), rows per second, and the largest logit difference.
void bench_batched_steps(const std::shared_ptr<const whisper::Model>& model, int threads, int reps);

}  // namespace earshot::tools
