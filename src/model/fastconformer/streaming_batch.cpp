#include "model/fastconformer/streaming_batch.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/runtime/device.h"

namespace earshot::fastconformer {

StreamingBatchExecutor::StreamingBatchExecutor(std::shared_ptr<const Model> model, int n_threads,
                                               runtime::CpuKernels kernels)
    : model_(model ? std::move(model)
                   : throw Error(ErrorCode::kInvalidArgument, "the streaming batcher needs a loaded model, got null")),
      backend_(runtime::create_backend(model_->device(), n_threads)),
      graph_(backend_.get(), kernels) {}

StreamingBatchExecutor::~StreamingBatchExecutor() = default;

void StreamingBatchExecutor::run(std::span<Item> items) {
  // Check every item; a bad one fails alone.
  std::vector<Item*> batch, alone;
  std::vector<detail::StreamStep> steps;
  float eps = 0;
  for (Item& item : items) {
    try {
      if (!item.encoder || !item.out) throw Error(ErrorCode::kInternal, "a streaming step without an encoder");
      if (&item.encoder->model() != model_.get())
        throw Error(ErrorCode::kInvalidArgument, "a streaming step came from a stream on another model");
      for (const detail::StreamStep& s : steps)
        if (s.state == &item.encoder->state_)
          throw Error(ErrorCode::kInvalidArgument, "one stream submitted two steps to the same batch");
      for (const Item* a : alone)
        if (a->encoder == item.encoder)
          throw Error(ErrorCode::kInvalidArgument, "one stream submitted two steps to the same batch");
      const float item_eps = item.encoder->options().batch_norm_eps;
      if (!batch.empty() && item_eps != eps) {
        alone.push_back(&item);
        continue;
      }
      eps = item_eps;
      steps.push_back({&item.encoder->state_, item.t0, item.t1, item.at_end, item.out});
      batch.push_back(&item);
    } catch (...) {
      item.error = std::current_exception();
    }
  }
  if (batch.size() > 1) {
    try {
      graph_.run(*model_, eps, steps);
      batch.clear();
    } catch (...) {
      // Every stream is as it was: each runs alone below, so only a step that fails alone fails.
    }
  }
  alone.insert(alone.begin(), batch.begin(), batch.end());
  for (Item* item : alone) {
    try {
      const detail::StreamStep step{&item->encoder->state_, item->t0, item->t1, item->at_end, item->out};
      graph_.run(*model_, item->encoder->options().batch_norm_eps, std::span<const detail::StreamStep>(&step, 1));
    } catch (...) {
      item->error = std::current_exception();
    }
  }
}

void StreamingBatchExecutor::run_ready(std::span<StreamingEncoder* const> encoders, std::span<EncoderOutput> outs,
                                       bool end_of_stream) {
  if (encoders.size() != outs.size())
    throw Error(ErrorCode::kInternal, "run_ready: " + std::to_string(encoders.size()) + " streams but " +
                                          std::to_string(outs.size()) + " outputs");
  for (size_t i = 0; i < encoders.size(); ++i) {
    if (outs[i].n_frames == 0) outs[i].first_frame = encoders[i]->frames_done();
    outs[i].n_state = model_->hparams().n_state;
  }
  std::exception_ptr first_error;
  std::vector<bool> failed(encoders.size(), false);
  for (;;) {
    std::vector<Item> items;
    for (size_t i = 0; i < encoders.size(); ++i) {
      Item item;
      if (failed[i] || !encoders[i]->next_step(end_of_stream, item.t0, item.t1, item.at_end)) continue;
      item.encoder = encoders[i];
      item.out = &outs[i];
      items.push_back(item);
    }
    if (items.empty()) break;
    run(items);
    ++graphs_;
    steps_ += static_cast<int64_t>(items.size());
    for (const Item& item : items) {
      if (!item.error) continue;
      if (!first_error) first_error = item.error;
      for (size_t i = 0; i < encoders.size(); ++i)
        if (encoders[i] == item.encoder) failed[i] = true;
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

StreamingBatcher::StreamingBatcher(std::shared_ptr<const Model> model, int max_batch, int n_threads,
                                   runtime::CpuKernels kernels)
    : rendezvous_(max_batch), executor_(std::move(model), n_threads, kernels) {}

StreamingBatcher::~StreamingBatcher() = default;

StreamingBatcher::Counts StreamingBatcher::counts() const {
  const auto c = rendezvous_.counts();
  return Counts{c.items, c.batches, c.max_batch};
}

void StreamingBatcher::encode(StreamingEncoder& encoder, int t0, int t1, bool at_end, EncoderOutput& out) {
  StreamingBatchExecutor::Item item;
  item.encoder = &encoder;
  item.t0 = t0, item.t1 = t1, item.at_end = at_end;
  item.out = &out;
  item = rendezvous_.submit(std::move(item),
                            [this](std::span<StreamingBatchExecutor::Item> items) { executor_.run(items); });
  if (item.error) std::rethrow_exception(item.error);
}

}  // namespace earshot::fastconformer
