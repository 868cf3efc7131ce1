// Decode calls of several Qwen3-ASR streams of one model in ONE llama_decode,
// one sequence per stream, so a memory-bound step reads the decoder's weights
// once for every stream stepping at that moment, and prompts of several
// streams are multiplied by the weights as one matrix (`--batch-decode N`).
//
//   auto shared = std::make_shared<SharedContext>(model, 2, 1024);
//   Session a(model, heads, 1024, shared), b(model, heads, 1024, shared);  // a slot each
//
// One llama_context holds `slots` KV streams (kv_unified off: each sequence its
// own cells, cell == position, as in a lone context). A session with a slot
// queues its prefill's or step's rows (always as embeddings: the text tokens'
// rows of token_embd, as Session::prefill takes them) and blocks. One executor
// thread evaluates the batches, so one OpenMP team runs them and stays warm
// (with the batches run by whichever stream's worker came, a lone step took 42
// ms instead of 30 on 2 Zen 5 cores). It takes the model's compute lock
// (Model::compute_mutex: no encode runs meanwhile, so the cores are never
// shared by two computations), then evaluates everything queued. A stream
// whose pass is under way (Session::encode to Session::end_pass) is awaited:
// the next batch waits for its call (or until every slot has one), so the
// streams' prompts and steps go together instead of alternating (the rule of
// llm::BatchedLlamaModel, there for steps only).
//
// libllama evaluates several streams in one ubatch only when each brings the
// same number of rows and their sequence ids are consecutive, so a batch runs
// as rounds: each round takes the same count of rows from a run of consecutive
// slots (steps of every stream: one round; a prompt beside steps: a round of one
// row each, then the rest of the prompt alone). Prompts within kMaxPadRows of
// each other go in one round, the shorter padded with rows whose outputs are
// dropped (causally after its own, so they change none of its values).
//
// Identity: a stream's tokens, logits and captured attention are its lone run's
// to rounding (tests/model/qwen3asr/qwen3asr_shared_test.cpp, F16 test models:
// logits within 2e-3, attention rows within 1e-4): rows are multiplied
// independently in the int8 op and the few-row op, and the OpenBLAS attention
// takes each stream of a round as it takes a lone one; but a round sizes its
// products by its row count (pads included), so where sgemm's blocking follows
// the count (float weights, the attention's scores) a row may differ by rounding.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "model/qwen3asr/model.h"

namespace earshot::qwen3asr {

// The most streams one shared context batches (--batch-decode's range).
inline constexpr int kMaxSharedStreams = 16;
// The most rows by which a round pads a stream's rows to another's (shared_context.cpp).
inline constexpr int kMaxPadRows = 32;

class SharedContext {
 public:
  // slots >= 1 sequences of slot_tokens positions. Throws Error(kInvalidArgument)
  // for fewer, Error(kInternal) when libllama cannot create the context.
  SharedContext(std::shared_ptr<const Model> model, int slots, int slot_tokens);
  ~SharedContext();
  SharedContext(const SharedContext&) = delete;
  SharedContext& operator=(const SharedContext&) = delete;

  int slots() const;
  int slot_tokens() const;

  // A free slot, or -1 when every slot is taken; release() gives it back (its
  // cells are dropped at its next owner's first decode).
  int acquire();
  void release(int slot);

  // One stream's rows. `first_pos` is the position of its first row: the slot's
  // cells from there on are removed before they are decoded.
  struct Request {
    Session* session = nullptr;  // whose capture reads the round's attention (capture set)
    int slot = 0;
    int first_pos = 0;
    int rows = 0;
    const float* embd = nullptr;   // rows x n_embd
    const int32_t* pos = nullptr;  // 4 x rows, section-major (M-RoPE: pos[s * rows + r])
    bool capture = false;          // the alignment heads' rows of this call (steps)
    std::vector<float> logits;     // out: the last row's
    std::exception_ptr error;      // out: this request's failure (the others go on)
  };
  // Blocks until the request ran in a batch.
  void decode(Request& request);
  // A slot whose pass is under way: the next batch awaits its call (see the header).
  void set_in_pass(int slot, bool on);

  // Decode calls, batches formed, llama_decode rounds and the streams in each
  // (round_streams[k]: rounds of k + 1 streams), rows evaluated, pad rows among them.
  struct Counts {
    int64_t calls = 0;
    int64_t batches = 0;
    int64_t rounds = 0;
    int64_t rows = 0;
    int64_t pad_rows = 0;  // of those, rows padding a stream's to another's (kMaxPadRows)
    std::vector<int64_t> round_streams;
  };
  Counts counts() const;

  struct State;  // shared_context.cpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace earshot::qwen3asr
