// Decode calls of several sessions on one LlamaModel evaluated in ONE
// llama_decode, one sequence per session, so a memory-bound greedy step reads
// the weights once for all the sessions stepping at that moment.
//
//   auto shared = llm::LlamaModel::load(path, {});
//   auto model = std::make_shared<llm::BatchedLlamaModel>(shared, llm::LlamaBatchOptions{.max_sessions = 4});
//   auto a = model->open_session({.context_tokens = 1024});  // one per stream, as with LlamaModel
//
// One llama_context holds max_sessions KV streams (kv_unified off: each
// sequence its own cells, cell == position, so attention capture and the
// numbers stay as in a lone context). Sessions are slots of it. A session's
// decode() queues its tokens and blocks; whichever caller finds the context
// idle evaluates everything queued (runtime::Rendezvous's continuous batching,
// no timer: a lone call runs at once, calls arriving while a batch computes
// form the next one). One rule more keeps greedy loops in step: a session that
// declared one (LlmSession::set_stepping, as the translation engine does
// around a generation) and has just got its result is about to queue its next
// step, so the next batch waits for that step (or for a full batch) rather
// than running the others' steps without it; otherwise two stepping sessions
// alternate and never share a step.
// libllama evaluates several streams in one ubatch only when every stream
// brings the same number of tokens and the sequence ids are consecutive, so a
// batch runs as rounds: each round takes the same count of tokens from a run of
// consecutive slots (a 1-token step of each session: one round; a prefill next
// to steps: a round of one token each, then the rest of the prefill alone).
//
// Identity: a session's tokens, logits and captured attention are the ones its
// lone run gives, to rounding (a token's row is computed with other rows in the
// matrix products; ggml's llamafile kernels on x86 differ in the last bits
// between widths), tested in tests/model/llm/batched_llama_test.cpp.
//
// Isolation: a session's KV cells are its stream's; its capture reads only its
// stream; a session that fails (context full, bad token) fails alone; opening
// and closing sessions touches only their slot. When every slot is taken, or a
// session asks for a larger context than a slot holds, open_session returns a
// lone LlamaSession (its own context): the stream still runs, unbatched.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/llm/llama_backend.h"

namespace earshot::llm {

struct LlamaBatchOptions {
  int max_sessions = 4;       // slots (sequences) of the shared context, >= 1
  int context_tokens = 2048;  // KV positions per slot
  int threads = 0;            // 0: the model's default
};

class BatchedLlamaModel final : public LlmModel {
 public:
  // Throws Error(kInvalidArgument) for max_sessions < 1 or context_tokens < 1,
  // or when libllama cannot create the shared context.
  BatchedLlamaModel(std::shared_ptr<const LlamaModel> model, const LlamaBatchOptions& options);
  ~BatchedLlamaModel() override;

  std::string id() const override { return model_->id(); }
  std::string architecture() const override { return model_->architecture(); }
  ModelShape shape() const override { return model_->shape(); }
  std::vector<Token> tokenize(std::string_view text, bool parse_special) const override {
    return model_->tokenize(text, parse_special);
  }
  std::string token_bytes(Token token) const override { return model_->token_bytes(token); }
  std::vector<Token> find_tokens(std::string_view text) const override { return model_->find_tokens(text); }
  bool is_end_of_generation(Token token) const override { return model_->is_end_of_generation(token); }
  // A slot of the shared context, or a lone LlamaSession when none is free or
  // options.context_tokens exceeds a slot.
  std::unique_ptr<LlmSession> open_session(const SessionOptions& options) const override;

  const std::shared_ptr<const LlamaModel>& inner() const { return model_; }
  int max_sessions() const;
  int slot_tokens() const;

  // What ran so far: decode calls of slot sessions (`calls`), batches the
  // rendezvous formed (`batches`, the largest `max_batch` calls), llama_decode
  // rounds (`rounds`) and the sessions in each (`round_sessions[k]`: rounds of
  // k + 1 sessions), tokens evaluated, and sessions that got a lone context.
  struct Counts {
    int64_t calls = 0;
    int64_t batches = 0;
    int64_t max_batch = 0;
    int64_t rounds = 0;
    int64_t tokens = 0;
    std::vector<int64_t> round_sessions;
    int64_t lone_sessions = 0;
    double mean_round_sessions() const;
  };
  Counts counts() const;

  // Forms a batch deterministically (tests, benchmarks): while a Hold lives the
  // context evaluates nothing and calls queue; pending() counts them; release()
  // (or the destructor) lets the queued calls run, up to max_sessions of them as
  // one batch. Take it only when no call is running or queued.
  class Hold {
   public:
    ~Hold();
    void release();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    struct State;

   private:
    friend class BatchedLlamaModel;
    explicit Hold(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
  };
  std::unique_ptr<Hold> hold() const;
  int64_t pending() const;

  struct Shared;  // the context, its slots and the rendezvous (batched_llama.cpp)

 private:
  std::shared_ptr<const LlamaModel> model_;
  std::shared_ptr<Shared> shared_;  // sessions hold it too: it outlives the model wrapper
};

}  // namespace earshot::llm
