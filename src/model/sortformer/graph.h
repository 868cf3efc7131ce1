// Sortformer's ggml graphs (internal to the family): the FastConformer encoder
// (fastconformer/conformer_blocks.h's pieces), the projection, the post-LN
// Transformer and the sigmoid head; offline over a whole recording, or one
// streaming step over [speaker cache, FIFO, chunk]. One Runner per stream (it
// owns its graph allocator); the model is shared.
#pragma once

#include <ggml-backend.h>
#include <ggml-cpp.h>

#include <memory>
#include <span>
#include <vector>

#include "features/nemo_mel.h"
#include "model/runtime/graph_runner.h"
#include "model/sortformer/model.h"

namespace earshot::sortformer::detail {

// The log-mel the encoder takes (NeMo's, without per-feature normalisation), for
// the offline and the streaming paths alike.
features::NemoMelConfig mel_config(const fastconformer::Hparams& encoder);

struct StepOutput {
  int n_chunk = 0;               // pre-encoded frames of the chunk's mel
  std::vector<float> chunk_emb;  // [n_chunk][d_enc]: the chunk's pre-encode embeddings (before xscaling)
  int n_preds = 0;               // n_prefix + n_chunk
  std::vector<float> preds;      // [n_preds][n_speakers]
};

class Runner {
 public:
  Runner(const Model& model, const RunOptions& options);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // mel [n_mel][n_mels] frame-major -> [T][n_speakers].
  FrameProbabilities offline(std::span<const float> mel, int n_mel);
  // One streaming step: the chunk's mel pre-encoded, appended to `prefix`
  // ([n_prefix][d_enc] pre-encode embeddings: speaker cache then FIFO), the
  // whole encoded and diarized.
  StepOutput step(std::span<const float> mel, int n_mel, std::span<const float> prefix, int n_prefix);

 private:
  const Model& model_;
  ggml_backend_ptr owned_;
  ggml_backend_t backend_ = nullptr;
  runtime::MatMul products_;  // options.cpu_kernels resolved for the graph
  std::unique_ptr<runtime::GraphRunner> runner_;
};

}  // namespace earshot::sortformer::detail
