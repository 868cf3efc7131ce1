// Decoder steps of several Whisper sessions on one shared Model, run as one graph
// (batch_graph.cpp): the weights are read once per step for every session's rows,
// each session attends over its own caches. Two pieces:
//
// - BatchExecutor runs a given set of requests (one per session) as one graph and
//   gives each its own result or its own error. It owns the batched graph's
//   compute buffers (the Model stays immutable, the per-stream state stays in the
//   sessions) and is used by one thread at a time.
// - DecodeBatcher is the rendezvous sessions reach through SessionOptions::batcher:
//   a session's decode() queues its request and blocks; whichever caller finds the
//   executor idle runs everything queued (up to max_batch, oldest first) and hands
//   the results back. Continuous batching without a timer: a lone request runs at
//   once, and requests arriving while a batch computes form the next one.
//
// Identity: a session's result equals its lone decode() bit for bit where the
// backend's matrix products give each column the same value whatever the number
// of columns (ggml's x86 CPU kernels without llamafile: tested on f32, f16 and q8_0
// weights). Where one-column products take another kernel than wider ones (ggml's
// llamafile tinyBLAS, on by default in scripts/bootstrap.sh; ARM's int8 kernels;
// CUDA) a batched step differs from the lone one by rounding (x86 with llamafile:
// max |logit diff| 5.8e-3 at tiny.en dimensions, batches of 2 to 16).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "model/asr_decoder.h"
#include "model/runtime/openblas_ops.h"
#include "model/runtime/rendezvous.h"
#include "model/whisper/model.h"

namespace earshot::whisper {

class Session;

class BatchExecutor {
 public:
  // n_threads: the batched graph's CPU compute threads (ignored on a GPU); kernels:
  // its weight products' (the sessions' SessionOptions::cpu_kernels: a batched
  // step's values equal the lone step's only with the same kernels).
  BatchExecutor(std::shared_ptr<const Model> model, int n_threads,
                runtime::CpuKernels kernels = runtime::CpuKernels::kGgml);
  ~BatchExecutor();
  BatchExecutor(const BatchExecutor&) = delete;
  BatchExecutor& operator=(const BatchExecutor&) = delete;

  struct Item {
    Session* session = nullptr;
    const DecodeRequest* request = nullptr;
    DecodeResult result;
    std::exception_ptr error;  // set instead of result: this item's request failed
  };
  // Decodes every item's request on its session as Session::decode would, in one
  // graph. Never throws: a bad request (or a session on another model, or the same
  // session twice) fails that item only; if the batched graph itself fails, each
  // item runs alone, so only a request that fails alone fails.
  void run(std::span<Item> items);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class DecodeBatcher {
 public:
  // max_batch >= 1 sessions per graph; n_threads and kernels as BatchExecutor's.
  DecodeBatcher(std::shared_ptr<const Model> model, int max_batch, int n_threads,
                runtime::CpuKernels kernels = runtime::CpuKernels::kGgml);
  ~DecodeBatcher();
  DecodeBatcher(const DecodeBatcher&) = delete;
  DecodeBatcher& operator=(const DecodeBatcher&) = delete;

  // Called by Session::decode: blocks until the request ran, alone or with the
  // others pending; rethrows the request's own error.
  DecodeResult decode(Session& session, const DecodeRequest& request);

  int max_batch() const { return rendezvous_.max_batch(); }
  // Requests decoded and graphs run so far (requests / graphs = mean batch size).
  struct Counts {
    int64_t requests = 0;
    int64_t graphs = 0;
  };
  Counts counts() const;

 private:
  runtime::Rendezvous<BatchExecutor::Item> rendezvous_;
  BatchExecutor executor_;
};

}  // namespace earshot::whisper
