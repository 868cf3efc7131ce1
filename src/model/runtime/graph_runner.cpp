#include "model/runtime/graph_runner.h"

#include <ggml-cpu.h>

#include <cstring>
#include <functional>

#include "common/error.h"
#include "common/pass_stop.h"
#include "common/pass_threads.h"
#include "model/runtime/device.h"

namespace earshot::runtime {

GraphRunner::GraphRunner(ggml_backend_t backend, std::string what)
    : GraphRunner(backend, std::vector<std::string>{std::move(what)}) {}

GraphRunner::GraphRunner(ggml_backend_t backend, std::vector<std::string> plans) : backend_(backend) {
  if (plans.empty()) throw Error(ErrorCode::kInternal, "a graph runner needs at least one plan");
  if (!backend_) throw Error(ErrorCode::kInternal, "a graph runner for the " + plans[0] + " needs a backend, got null");
  for (std::string& what : plans)
    plans_.push_back(
        {std::move(what), std::make_unique<GraphAllocator>(ggml_backend_get_default_buffer_type(backend_))});
}

GraphRunner::~GraphRunner() = default;

GraphRunner::Graph GraphRunner::begin(int max_nodes, int plan) {
  if (plan < 0 || plan >= static_cast<int>(plans_.size()))
    throw Error(ErrorCode::kInternal, "graph plan " + std::to_string(plan) + " out of range");
  // Room for twice as many tensors as nodes (leafs, views, inputs); untouched room
  // costs address space only.
  const size_t need = ggml_tensor_overhead() * 2 * max_nodes + ggml_graph_overhead_custom(max_nodes, false);
  if (meta_size_ < need) {
    meta_.reset(new uint8_t[need]);  // uninitialised on purpose (see meta_)
    meta_size_ = need;
  }
  ggml_init_params params{meta_size_, meta_.get(), true};
  Graph g;
  g.ctx_.reset(ggml_init(params));
  if (!g.ctx_) throw Error(ErrorCode::kInternal, "ggml_init failed for the " + plans_[plan].what + " graph");
  g.graph_ = ggml_new_graph_custom(g.ctx_.get(), max_nodes, false);
  g.plan_ = plan;
  return g;
}

namespace {
std::string with_detail(const std::string& text, const std::string& detail) {
  return detail.empty() ? text : text + " (" + detail + ")";
}
}  // namespace

void GraphRunner::allocate(const Graph& graph, const std::string& detail) {
  const Plan& plan = plans_[graph.plan_];
  if (!plan.alloc->alloc(graph.graph_))
    throw Error(ErrorCode::kInternal, with_detail("cannot allocate the " + plan.what + " graph", detail));
}

void GraphRunner::reserve(const Graph& graph, const std::string& detail) {
  const Plan& plan = plans_[graph.plan_];
  if (!plan.alloc->reserve(graph.graph_))
    throw Error(ErrorCode::kInternal, with_detail("cannot reserve the " + plan.what + " graph's buffer", detail));
}

void GraphRunner::check_supported(const Graph& graph) const {
  for (int i = 0; i < ggml_graph_n_nodes(graph.graph_); ++i) {
    ggml_tensor* node = ggml_graph_node(graph.graph_, i);
    if (!ggml_backend_supports_op(backend_, node)) {
      throw Error(ErrorCode::kUnsupported, std::string("the ") + ggml_backend_name(backend_) + " backend cannot run " +
                                               ggml_op_desc(node) + " (" + ggml_type_name(node->type) + ") of the " +
                                               plans_[graph.plan_].what + " graph; load the model on the CPU");
    }
  }
}

namespace {
// ggml's abort callback: a stoppable pass's listener (common/pass_stop.h), asked
// by the computing thread between nodes. It must not throw into ggml.
bool listener_says_stop(void* data) {
  try {
    return pass_listener_says_stop(*static_cast<const std::function<bool()>*>(data));
  } catch (...) {
    return false;
  }
}
}  // namespace

void GraphRunner::compute(const Graph& graph) {
  // Set on every compute: runners may share a backend (a session's KV-cache copy).
  if (const int threads = pass_threads(); follow_pass_threads_ && threads > 0) set_threads(backend_, threads);
  const std::function<bool()>* listener = pass_stop_listener();
  const bool cpu = ggml_backend_is_cpu(backend_);
  if (cpu)
    ggml_backend_cpu_set_abort_callback(backend_, listener ? listener_says_stop : nullptr,
                                        const_cast<std::function<bool()>*>(listener));
  const ggml_status status = ggml_backend_graph_compute(backend_, graph.graph_);
  if (listener &&
      (status == GGML_STATUS_ABORTED || (!cpu && status == GGML_STATUS_SUCCESS && pass_listener_says_stop(*listener))))
    throw PassStopped();
  if (status != GGML_STATUS_SUCCESS)
    throw Error(ErrorCode::kInternal, "the " + plans_[graph.plan_].what + " graph failed to compute");
}

template <typename T>
void set_input(ggml_tensor* tensor, std::span<const T> values, size_t byte_offset) {
  const size_t bytes = values.size_bytes();
  if (byte_offset + bytes > ggml_nbytes(tensor))
    throw Error(ErrorCode::kInternal, std::string("an input of ") + std::to_string(bytes) + " bytes at " +
                                          std::to_string(byte_offset) + " overruns " + ggml_get_name(tensor) + " (" +
                                          std::to_string(ggml_nbytes(tensor)) + " bytes)");
  if (bytes > 0) ggml_backend_tensor_set(tensor, values.data(), byte_offset, bytes);
}

template void set_input<float>(ggml_tensor*, std::span<const float>, size_t);
template void set_input<int32_t>(ggml_tensor*, std::span<const int32_t>, size_t);

std::vector<float> read_output(const ggml_tensor* tensor) {
  if (tensor->type != GGML_TYPE_F32 || !ggml_is_contiguous(tensor))
    throw Error(ErrorCode::kInternal, std::string("read_output reads contiguous f32 tensors; ") +
                                          ggml_get_name(tensor) + " is " + ggml_type_name(tensor->type));
  std::vector<float> out(static_cast<size_t>(ggml_nelements(tensor)));
  ggml_backend_tensor_get(tensor, out.data(), 0, out.size() * sizeof(float));
  return out;
}

}  // namespace earshot::runtime
