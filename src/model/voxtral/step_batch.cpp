#include "model/voxtral/step_batch.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "model/runtime/device.h"

namespace earshot::voxtral {

std::vector<float> run_steps(runtime::GraphRunner& runner, int plan, GraphKernels kernels,
                             std::span<const StepRequest> steps, std::vector<ggml_fp16_t>& mask_scratch) {
  if (steps.empty()) return {};
  const Model& model = *steps.front().model;
  const Hparams& hp = model.hparams();
  const int n = static_cast<int>(steps.size());
  std::vector<DecoderPart> parts;
  parts.reserve(steps.size());
  for (const StepRequest& s : steps) parts.push_back(DecoderPart{s.ring, 1, s.delay});
  runtime::GraphRunner::Graph g = runner.begin(decoder_graph_nodes(hp, n), plan);
  const DecoderGraph dg = build_decoder(g.ctx(), g.graph(), model, parts, kernels);
  runner.allocate(g, n == 1 ? "a step" : std::to_string(n) + " streams' steps");
  std::vector<int32_t> tokens(n), positions(n);
  std::vector<float> audio(static_cast<size_t>(n) * hp.d);
  // [d, parts, n_layer]: layer l's scales of part p at (l * parts + p) * d.
  std::vector<float> scales(static_cast<size_t>(n) * hp.n_layer * hp.d);
  for (int p = 0; p < n; ++p) {
    const StepRequest& s = steps[p];
    tokens[p] = s.token;
    positions[p] = static_cast<int32_t>(s.ring->positions());
    std::copy(s.audio, s.audio + hp.d, audio.begin() + static_cast<std::ptrdiff_t>(p) * hp.d);
    for (int l = 0; l < hp.n_layer; ++l)
      std::copy(s.scales->begin() + static_cast<std::ptrdiff_t>(l) * hp.d,
                s.scales->begin() + static_cast<std::ptrdiff_t>(l + 1) * hp.d,
                scales.begin() + (static_cast<std::ptrdiff_t>(l) * n + p) * hp.d);
  }
  runtime::set_input(dg.tokens, tokens);
  runtime::set_input(dg.audio, audio);
  runtime::set_input(dg.positions, positions);
  runtime::set_input(dg.scales, scales);
  for (int p = 0; p < n; ++p) steps[p].ring->set_mask(dg.masks[p], 1, hp.window, mask_scratch);
  runner.compute(g);
  return runtime::read_output(dg.logits);
}

StepBatcher::StepBatcher(std::shared_ptr<const Model> model, int max_batch, int n_threads, bool rows)
    : model_(model
                 ? std::move(model)
                 : throw Error(ErrorCode::kInvalidArgument, "the Voxtral step batcher needs a loaded model, got null")),
      rendezvous_(max_batch),
      backend_(runtime::create_backend(model_->device(), n_threads)) {
  kernels_.cpu = runtime::is_cpu(runtime::device_of(backend_.get()));
  kernels_.rows = rows;
  runner_ = std::make_unique<runtime::GraphRunner>(backend_.get(), "Voxtral batched decoder");
}

StepBatcher::~StepBatcher() = default;

StepBatcher::Counts StepBatcher::counts() const {
  const auto c = rendezvous_.counts();
  return Counts{c.items, c.batches, c.max_batch};
}

std::vector<float> StepBatcher::step(const StepRequest& request) {
  Item item;
  item.request = request;
  item = rendezvous_.submit(std::move(item), [this](std::span<Item> items) { run(items); });
  if (item.error) std::rethrow_exception(item.error);
  return std::move(item.logits);
}

void StepBatcher::run(std::span<Item> items) {
  // Check every item; a bad one fails alone.
  std::vector<Item*> batch;
  std::vector<StepRequest> requests;
  for (Item& item : items) {
    try {
      const StepRequest& r = item.request;
      if (r.model != model_.get())
        throw Error(ErrorCode::kInvalidArgument, "a Voxtral step came from a stream on another model");
      if (!r.ring || !r.scales || !r.audio) throw Error(ErrorCode::kInternal, "a Voxtral step without its state");
      for (const StepRequest& other : requests)
        if (other.ring == r.ring)
          throw Error(ErrorCode::kInvalidArgument, "one stream submitted two steps to the same batch");
      requests.push_back(r);
      batch.push_back(&item);
    } catch (...) {
      item.error = std::current_exception();
    }
  }
  const size_t n_vocab = static_cast<size_t>(model_->hparams().n_vocab);
  if (batch.size() > 1) {
    try {
      const std::vector<float> logits = run_steps(*runner_, 0, kernels_, requests, mask_scratch_);
      for (size_t i = 0; i < batch.size(); ++i)
        batch[i]->logits.assign(logits.begin() + static_cast<std::ptrdiff_t>(i * n_vocab),
                                logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * n_vocab));
      return;
    } catch (...) {
      // No ring has advanced: each runs alone below, so only a step that fails alone fails.
    }
  }
  for (Item* item : batch) {
    try {
      item->logits = run_steps(*runner_, 0, kernels_, std::span<const StepRequest>(&item->request, 1), mask_scratch_);
    } catch (...) {
      item->error = std::current_exception();
    }
  }
}

}  // namespace earshot::voxtral
