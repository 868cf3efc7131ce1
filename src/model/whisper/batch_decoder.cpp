#include "model/whisper/batch_decoder.h"

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpp.h>

#include <algorithm>
#include <string>

#include "common/error.h"
#include "model/runtime/device.h"
#include "model/runtime/graph_runner.h"
#include "model/whisper/graph.h"
#include "model/whisper/session.h"

namespace earshot::whisper {

struct BatchExecutor::Impl {
  std::shared_ptr<const Model> model;
  ggml_backend_ptr backend;
  std::unique_ptr<runtime::GraphRunner> runner;  // declared after the backend it borrows: goes first
  runtime::CpuKernels kernels = runtime::CpuKernels::kGgml;

  // The prepared steps as one graph; fills each step's result. Throws on failure.
  void run_batched(const std::vector<Session*>& sessions, const std::vector<detail::PreparedStep>& steps,
                   std::vector<DecodeResult>& results) {
    std::vector<detail::BatchPart> parts;
    for (size_t i = 0; i < steps.size(); ++i) parts.push_back({&sessions[i]->state(), &steps[i].spec});
    const runtime::GraphRunner::Graph graph =
        runner->begin(detail::batched_graph_size(*model, static_cast<int>(parts.size())));
    const detail::BatchedDecoderGraph g =
        detail::build_batched_decoder(graph.ctx(), graph.graph(), *model, parts, kernels);
    // A plan of its own unless the last batch had exactly this make-up
    // (runtime::GraphAllocator); the buffer itself only grows.
    runner->allocate(graph, std::to_string(parts.size()) + " sessions");
    runtime::set_input(g.indices, g.index_values);
    if (g.masks) runtime::set_input(g.masks, g.mask_values);
    runner->compute(graph);
    results.resize(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      const detail::BatchedDecoderGraph::Part& part = g.parts[i];
      results[i] = detail::read_step_outputs(backend.get(), *model, steps[i].spec, part.logits, part.logits_offset,
                                             part.cross_attention);
    }
  }
};

BatchExecutor::BatchExecutor(std::shared_ptr<const Model> model, int n_threads, runtime::CpuKernels kernels)
    : impl_(std::make_unique<Impl>()) {
  if (!model) throw Error(ErrorCode::kInvalidArgument, "the batched decoder needs a loaded model, got null");
  impl_->model = std::move(model);
  impl_->kernels = kernels;
  impl_->backend = runtime::create_backend(impl_->model->device(), n_threads);
  impl_->runner = std::make_unique<runtime::GraphRunner>(impl_->backend.get(), "batched decoder");
}

BatchExecutor::~BatchExecutor() = default;

void BatchExecutor::run(std::span<Item> items) {
  // Check and plan every request on its session; a bad one fails alone.
  std::vector<Item*> ready;
  std::vector<Session*> sessions;
  std::vector<detail::PreparedStep> steps;
  for (Item& item : items) {
    try {
      if (!item.session || !item.request) throw Error(ErrorCode::kInternal, "batched decode item without a request");
      if (&item.session->model() != impl_->model.get()) {
        throw Error(ErrorCode::kInvalidArgument, "a batched decode step came from a session on another model");
      }
      if (std::find(sessions.begin(), sessions.end(), item.session) != sessions.end()) {
        throw Error(ErrorCode::kInvalidArgument, "one session submitted two decode steps to the same batch");
      }
      steps.push_back(item.session->prepare_decode(*item.request));
      sessions.push_back(item.session);
      ready.push_back(&item);
    } catch (...) {
      item.error = std::current_exception();
    }
  }
  std::vector<DecodeResult> results;
  bool batched = false;
  if (ready.size() > 1) {
    try {
      impl_->run_batched(sessions, steps, results);
      batched = true;
    } catch (...) {
      results.clear();  // each runs alone below, so only a step that fails alone fails
    }
  }
  for (size_t i = 0; i < ready.size(); ++i) {
    try {
      DecodeResult r = batched ? std::move(results[i]) : sessions[i]->run_step(steps[i]);
      ready[i]->result = sessions[i]->finish_decode(steps[i], std::move(r));
    } catch (...) {
      ready[i]->error = std::current_exception();
    }
  }
}

DecodeBatcher::DecodeBatcher(std::shared_ptr<const Model> model, int max_batch, int n_threads,
                             runtime::CpuKernels kernels)
    : rendezvous_(max_batch), executor_(std::move(model), n_threads, kernels) {}

DecodeBatcher::~DecodeBatcher() = default;

DecodeBatcher::Counts DecodeBatcher::counts() const {
  const auto c = rendezvous_.counts();
  return Counts{c.items, c.batches};
}

DecodeResult DecodeBatcher::decode(Session& session, const DecodeRequest& request) {
  BatchExecutor::Item item;
  item.session = &session;
  item.request = &request;
  item = rendezvous_.submit(std::move(item), [this](std::span<BatchExecutor::Item> items) { executor_.run(items); });
  if (item.error) std::rethrow_exception(item.error);
  return std::move(item.result);
}

}  // namespace earshot::whisper
