// The decoder steps of several Voxtral streams, one slot each, run as one graph:
// every matrix of the decoder (26 layers and the output head: 2.2 GB at Q4_K_M,
// 3.6 GB at Q8_0 for the 4B model) is read once per step for all of them, where
// each stream alone reads it once per slot. Each stream's attention runs over its own ring with its
// own mask, and its ada-norm scales are its own delay's (build_decoder's parts).
//
// StepBatcher is the rendezvous the streams share (runtime/rendezvous.h, as the
// Whisper decoder's and the streaming transducer's batchers): a stream's step
// queues and blocks; whichever caller finds the batcher idle runs everything
// queued (up to max_batch, oldest first) on the batcher's own backend and hands
// each stream its logits. No timer: a lone step runs at once, and steps that
// arrive while a batch computes form the next one. Prompts and the encoder stay
// each stream's own graphs.
//
// Identity: a stream's logits equal its lone step's bit for bit where the
// products give each row the value it has alone: the few-row op the decoder's
// F16, F32 and Q8_0 weights run on (runtime/rows_ops.h), and ggml's k-quant
// products on x86 (tested on F32, Q8_0 and Q4_K_M files).
#pragma once

#include <ggml-cpp.h>

#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "model/runtime/graph_runner.h"
#include "model/runtime/rendezvous.h"
#include "model/voxtral/graph.h"
#include "model/voxtral/model.h"

namespace earshot::voxtral {

// One stream's decoder step: the position after those its ring holds
// (ring->positions()).
struct StepRequest {
  const Model* model = nullptr;
  const KvRing* ring = nullptr;                // with room for the position (KvRing::reserve)
  int delay = 6;                               // slots
  const std::vector<float>* scales = nullptr;  // [n_layer][d]: 1 + ada at that delay (Model::ada_scales)
  int token = 0;                               // the position's input: the token the one before produced
  const float* audio = nullptr;                // and its slot's audio embedding, d floats
};

// Runs the steps as one decoder graph (plan `plan` of `runner`; every request on
// one model, each on its own ring): their logits, n_vocab floats per step in
// order. The rings hold the new positions' K and V, not yet advanced. Throws
// Error naming the graph.
std::vector<float> run_steps(runtime::GraphRunner& runner, int plan, GraphKernels kernels,
                             std::span<const StepRequest> steps, std::vector<ggml_fp16_t>& mask_scratch);

class StepBatcher {
 public:
  // max_batch >= 1 streams per graph; n_threads: the graph's CPU threads (ignored
  // on a GPU); rows: the decoder's products on the few-row op (GraphKernels::rows),
  // as the streams' own (StreamOptions::rows_decoder).
  StepBatcher(std::shared_ptr<const Model> model, int max_batch, int n_threads, bool rows = true);
  ~StepBatcher();
  StepBatcher(const StepBatcher&) = delete;
  StepBatcher& operator=(const StepBatcher&) = delete;

  // Called by a stream's decoder step: blocks until the step ran, alone or with
  // the others pending, and returns its logits (n_vocab); the stream then advances
  // its ring. Rethrows the step's own error, the stream unchanged.
  std::vector<float> step(const StepRequest& request);

  const Model& model() const { return *model_; }
  int max_batch() const { return rendezvous_.max_batch(); }
  struct Counts {
    int64_t steps = 0;      // per-stream steps run
    int64_t graphs = 0;     // graphs they ran in
    int64_t max_batch = 0;  // the largest batch so far
  };
  Counts counts() const;

 private:
  struct Item {
    StepRequest request;
    std::vector<float> logits;  // out
    std::exception_ptr error;   // set instead: this item's step failed
  };
  // Runs the items' steps in one graph. Never throws: a stream on another model,
  // or twice in one batch, fails alone; if the batched graph fails, each runs
  // alone, so only a step that fails alone fails.
  void run(std::span<Item> items);

  std::shared_ptr<const Model> model_;
  runtime::Rendezvous<Item> rendezvous_;
  ggml_backend_ptr backend_;
  GraphKernels kernels_;
  std::unique_ptr<runtime::GraphRunner> runner_;
  std::vector<ggml_fp16_t> mask_scratch_;

 public:
  // Held by a stream while it runs its steps one after another (every slot it
  // has encoded): batches wait for its next step, so streams stepping at the same
  // time share every graph instead of alternating (runtime::Rendezvous).
  class Run {
   public:
    explicit Run(StepBatcher& batcher) : joined_(batcher.rendezvous_) {}

   private:
    runtime::Rendezvous<Item>::Participation joined_;
  };
};

}  // namespace earshot::voxtral
