// A FastConformer transducer behind the model-neutral transducer interface
// (model/transducer_stream.h): one stream's features, encoder and greedy
// decoder (the prompt kernel first, for a prompt model), for an offline model
// (whole stretches of audio) or a cache-aware streaming one (chunks).
#pragma once

#include <memory>
#include <string>

#include "features/nemo_mel.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/streaming_batch.h"
#include "model/model_pass.h"
#include "model/runtime/openblas_ops.h"
#include "model/transducer_stream.h"

namespace earshot::fastconformer {

// The offline stream: NeMo's features normalised over each stretch (as the model
// expects), the offline encoder on its own backend of `threads` CPU threads.
// `language`: a prompt model's slot (auto: its auto slot); else unused.
// `mel_frames`: the features' frame count (NeMo's, or libparakeet's one more).
// on_pass (optional) gets every pass's wall time: kEncoder, a stretch's features
// and encoder (or a streaming chunk's encoder step, its wait for the batch
// included); kDecoder, the greedy decoding of those frames (prompt kernel,
// encoder projection, prediction and joint networks).
std::unique_ptr<OfflineTransducer> open_offline_stream(
    std::shared_ptr<const Model> model, int threads, runtime::CpuKernels cpu_kernels, const std::string& language,
    features::NemoFrameCount mel_frames = features::NemoFrameCount::kNemo, PassReport on_pass = {});

// The streaming stream: the streaming mel and encoder with `right_context`
// frames; its chunks through `batcher` when given, else on its own backend with
// `cpu_kernels`' products (StepGraph).
// mel_frames as above; on_pass as above, for each push that ran at least one
// encoder step. steer (measurement only): bound now, then chooses every greedy
// step's output.
std::unique_ptr<StreamingTransducer> open_streaming_stream(
    std::shared_ptr<const Model> model, int threads, runtime::CpuKernels cpu_kernels, int right_context,
    std::shared_ptr<StreamingBatcher> batcher, const std::string& language,
    features::NemoFrameCount mel_frames = features::NemoFrameCount::kNemo, PassReport on_pass = {},
    std::shared_ptr<TransducerSteer> steer = {});

}  // namespace earshot::fastconformer
