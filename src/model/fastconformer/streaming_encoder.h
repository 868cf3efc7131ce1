// The cache-aware streaming FastConformer encoder (NVIDIA Nemotron streaming):
// mel frames go in as they arrive, and each chunk of right + 1 encoder frames is
// encoded as soon as the mel it depends on is there, with per-layer caches of the
// last attention inputs (left context) and depthwise conv inputs (kernel - 1).
// The subsampling re-reads 16 mel frames before each chunk (its causal convs'
// receptive field) instead of caching each stage. Chunks ready at once share one
// pass (masked as offline: the weights are read once). The output equals the offline
// Encoder's chunked_limited output frame for frame, whatever the split of the mel.
//
//   StreamingEncoder enc(model, backend, {.right_context = 6});
//   EncoderOutput chunk = enc.push(mel, n);   // 0 or more whole chunks
//   EncoderOutput rest = enc.finish();        // the last, possibly partial chunk
//
// With a StreamingBatcher (streaming_batch.h), the chunks of every stream that
// shares it and is ready at the same moment run as one graph: the weights are
// read once for all their rows; each stream's own attention, caches and mel stay
// in its StreamingEncoder, and its output equals its lone step bit for bit.
#pragma once

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpp.h>

#include <memory>
#include <span>
#include <vector>

#include "model/fastconformer/encoder.h"
#include "model/runtime/graph_runner.h"

namespace earshot::fastconformer {

class StreamingBatcher;
class StreamingBatchExecutor;

namespace detail {

// At most this many encoder frames (whole chunks) per step, to bound the graph's
// memory (a chunk longer than this is one step).
inline constexpr int kMaxStepFrames = 64;

// One stream's state between chunks (streaming_graph.cpp reads and advances it).
// The attention cache holds the last frames' keys and values, not their inputs:
// a column's projection is the same whenever it is computed, so the old frames
// are not projected again at every chunk (NeMo re-projects its cached inputs).
struct StreamState {
  int right = 0;         // the right context: chunks of right + 1 frames
  int cache_frames = 0;  // left context kept: left / (right + 1) whole chunks
  bool f16_subsampling = false;
  std::vector<float> mel;  // buffered mel frames from mel_base
  int mel_base = 0, n_mel = 0;
  int frames_done = 0;  // encoder frames output
  int att_frames = 0;   // frames in the attention cache (every layer alike: they were filled together)
  std::vector<std::vector<float>> keys, values;  // per layer: [att_frames][d]
  std::vector<std::vector<float>> conv_cache;    // per layer: [d][kernel - 1]
};

// Encoder frames [t0, t1] of a stream (whole chunks from t0; at the end, the last
// may be partial), appended to *out.
struct StreamStep {
  StreamState* state = nullptr;
  int t0 = 0, t1 = 0;
  bool at_end = false;
  EncoderOutput* out = nullptr;
};

// Each layer's linear_pos projection of every relative position a step can see,
// from `top` down one position per column: the same for every chunk of every
// stream, so computed once and shared by every StepGraph of the model on the
// same kind of buffer (held while one of them lives).
struct PositionTable {
  int top = 0;
  ggml_context_ptr ctx;
  ggml_backend_buffer_ptr buffer;
  std::vector<ggml_tensor*> layers;  // [d, columns]
};

// Runs steps of distinct streams of one model as one graph and advances each
// stream (its caches, mel, frames_done, output) once the graph has computed: a
// throw leaves every stream as it was. Owns the graph's compute buffer; shares
// the model's PositionTable (computed at the first step of the first one).
inline constexpr int kOpenBlasMinRows = 32;

class StepGraph {
 public:
  // kernels: the products' (runtime::step_products): kAuto, the few-row op
  // (runtime/rows_ops.h) up to runtime::kRowsOpMaxRows rows, OpenBLAS beyond;
  // kOpenBlas, OpenBLAS from kOpenBlasMinRows rows (a batch of streams' chunks), the
  // few-row op below; kGgml, ggml's. Throws Error(kUnsupported) for kOpenBlas where
  // OpenBLAS cannot run.
  explicit StepGraph(ggml_backend_t backend, runtime::CpuKernels kernels = runtime::CpuKernels::kGgml);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  void run(const Model& model, float batch_norm_eps, std::span<const StreamStep> steps);

 private:
  std::shared_ptr<const PositionTable> build_positions(const Model& model);

  ggml_backend_t backend_;
  runtime::CpuKernels kernels_;
  bool on_cpu_ = true;
  std::unique_ptr<runtime::GraphRunner> runner_;
  // Every layer's keys and values of a step, outside the compute buffer: kept
  // across steps and grown by half again when short, so that caches growing step
  // by step (a stream's first seconds, a batch gaining streams) do not reallocate
  // and fault in fresh pages at every step.
  ggml_backend_buffer_ptr keys_;
  const Model* positions_model_ = nullptr;
  std::shared_ptr<const PositionTable> positions_;
};

}  // namespace detail

class StreamingEncoder {
 public:
  // Throws Error(kUnsupported) for a model that cannot stream (check_streaming),
  // kInvalidArgument for a right context the file does not support. With a
  // batcher (on the same model), every chunk goes through it; the backend is
  // then used by the lone steps only (none).
  StreamingEncoder(std::shared_ptr<const Model> model, ggml_backend_t backend, EncoderOptions options = {},
                   std::shared_ptr<StreamingBatcher> batcher = nullptr);
  ~StreamingEncoder();
  StreamingEncoder(const StreamingEncoder&) = delete;
  StreamingEncoder& operator=(const StreamingEncoder&) = delete;

  // mel: [n_frames][n_mels], the stream's next frames. Returns the encoder frames
  // of every chunk now complete (first_frame: the stream's frame number).
  EncoderOutput push(std::span<const float> mel, int n_mel_frames);
  // The end of the stream: encodes what is left (the subsampling's right padding
  // as offline). The encoder then starts a new stream.
  EncoderOutput finish();
  // Drops the caches and buffered mel: a new stream.
  void reset();

  // push() in two halves, for a caller that steps several streams together
  // (StreamingBatchExecutor::run_ready): buffer the mel, then take the steps.
  void append_mel(std::span<const float> mel, int n_mel_frames);
  // The next step: frames [t0, t1] of the whole chunks now ready (push), or at
  // the end of the stream of what is left (finish: at_end says whether the
  // subsampling's right padding applies). False when there is none.
  bool next_step(bool end_of_stream, int& t0, int& t1, bool& at_end) const;

  // The stream's whole state (caches, buffered mel, frames done), to run a step
  // ahead and put it back (StreamingTransducer::prepare_finish).
  const detail::StreamState& state() const { return state_; }
  void restore(detail::StreamState state) { state_ = std::move(state); }

  int right_context() const { return state_.right; }
  int chunk_frames() const { return state_.right + 1; }
  // Encoder frames output so far in this stream.
  int frames_done() const { return state_.frames_done; }
  const Model& model() const { return *model_; }
  const EncoderOptions& options() const { return options_; }

 private:
  friend class StreamingBatchExecutor;
  // Encodes encoder frames [t0, t1] from the buffered mel: alone, or through the batcher.
  void encode_chunk(int t0, int t1, bool at_end, EncoderOutput& out);
  // Every step ready now (end_of_stream: the last, partial ones too), in one output.
  EncoderOutput encode_ready(bool end_of_stream);

  std::shared_ptr<const Model> model_;
  EncoderOptions options_;
  std::shared_ptr<StreamingBatcher> batcher_;
  std::unique_ptr<detail::StepGraph> graph_;  // the lone steps' (null with a batcher)
  detail::StreamState state_;
};

}  // namespace earshot::fastconformer
