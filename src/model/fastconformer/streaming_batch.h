// Streaming steps of several live streams of one cache-aware FastConformer,
// run as one graph (streaming_graph.cpp): the weights are read once per step
// for every stream's rows (the FFNs, the attention projections, the pointwise
// convs, the subsampling's output linear); each stream's attention over its own
// cache, its depthwise conv cache and its mel window stay its own. Streams may
// be at any position and use any of the file's lookaheads. As the Whisper
// decoder's batcher (model/whisper/batch_decoder.h), two pieces:
//
// - StreamingBatchExecutor runs a given set of steps (one per stream) as one
//   graph and gives each its own frames or its own error. It owns the batched
//   graph's compute buffer and backend; one thread uses it at a time.
// - StreamingBatcher is the rendezvous the streams' encoders share: a
//   StreamingEncoder's chunk queues its step and blocks; whichever caller finds
//   the executor idle runs everything queued (up to max_batch, oldest first) and
//   hands the results back. No timer: a lone stream's chunk runs at once, and
//   chunks that arrive while a batch computes form the next one. A stream that
//   joins or leaves only changes which rows the next graph has.
//
// Identity: a stream's frames equal its lone step's bit for bit where the
// backend's matrix products give each column the value it has alone (ggml's
// x86 CPU kernels without llamafile: tested on f32, f16 and q8_0 weights).
#pragma once

#include <ggml-cpp.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>

#include "model/fastconformer/streaming_encoder.h"
#include "model/runtime/rendezvous.h"

namespace earshot::fastconformer {

class StreamingBatchExecutor {
 public:
  // n_threads: the batched graph's CPU compute threads (ignored on a GPU).
  // kernels: the batched steps' products (OpenBLAS from kOpenBlasMinRows rows).
  StreamingBatchExecutor(std::shared_ptr<const Model> model, int n_threads,
                         runtime::CpuKernels kernels = runtime::CpuKernels::kGgml);
  ~StreamingBatchExecutor();
  StreamingBatchExecutor(const StreamingBatchExecutor&) = delete;
  StreamingBatchExecutor& operator=(const StreamingBatchExecutor&) = delete;

  struct Item {
    StreamingEncoder* encoder = nullptr;
    int t0 = 0, t1 = 0;  // the encoder frames, as StreamingEncoder plans them
    bool at_end = false;
    EncoderOutput* out = nullptr;  // the frames are appended here
    std::exception_ptr error;      // set instead: this item's step failed (its stream unchanged)
  };
  // Runs every item's step in one graph. Never throws: an item on another model,
  // or a stream twice, fails alone; streams with another batch-norm epsilon than
  // the first run in a graph of their own; if the batched graph fails, each runs
  // alone, so only a step that fails alone fails.
  void run(std::span<Item> items);

  // A step loop over streams in the caller's hands (after each one's
  // append_mel): every chunk now ready in each stream is encoded, the streams'
  // first ready steps in one graph, then their second ones, and so on; with
  // end_of_stream, what is left of each (as finish(), without the reset).
  // outs[i] (first_frame set when empty) gets encoders[i]'s frames. Throws the
  // first failed step's error once every step ran (a failed stream stays where it was).
  void run_ready(std::span<StreamingEncoder* const> encoders, std::span<EncoderOutput> outs,
                 bool end_of_stream = false);
  // Graphs run by run_ready so far and the steps in them.
  int64_t graphs() const { return graphs_; }
  int64_t steps() const { return steps_; }

  const Model& model() const { return *model_; }

 private:
  std::shared_ptr<const Model> model_;
  ggml_backend_ptr backend_;
  detail::StepGraph graph_;
  int64_t graphs_ = 0, steps_ = 0;
};

class StreamingBatcher {
 public:
  // max_batch >= 1 streams per graph; n_threads and kernels as the executor's.
  StreamingBatcher(std::shared_ptr<const Model> model, int max_batch, int n_threads,
                   runtime::CpuKernels kernels = runtime::CpuKernels::kGgml);
  ~StreamingBatcher();
  StreamingBatcher(const StreamingBatcher&) = delete;
  StreamingBatcher& operator=(const StreamingBatcher&) = delete;

  // Called by StreamingEncoder: blocks until the step ran, alone or with the
  // others pending; rethrows the step's own error.
  void encode(StreamingEncoder& encoder, int t0, int t1, bool at_end, EncoderOutput& out);

  const Model& model() const { return executor_.model(); }
  int max_batch() const { return rendezvous_.max_batch(); }
  // Steps run and graphs computed so far (steps / graphs = mean batch size), and
  // the largest batch.
  struct Counts {
    int64_t steps = 0;
    int64_t graphs = 0;
    int64_t max_batch = 0;
  };
  Counts counts() const;

 private:
  runtime::Rendezvous<StreamingBatchExecutor::Item> rendezvous_;
  StreamingBatchExecutor executor_;
};

}  // namespace earshot::fastconformer
