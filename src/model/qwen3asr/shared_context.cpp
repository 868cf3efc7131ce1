#include "model/qwen3asr/shared_context.h"

#include <llama.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "common/error.h"
#include "model/qwen3asr/context_params.h"
#include "model/runtime/slot_rounds.h"

namespace earshot::qwen3asr {

struct SharedContext::State {
  std::shared_ptr<const Model> model;
  llama_context* ctx = nullptr;
  int slots = 0;
  int slot_tokens = 0;
  int round_rows = 0;  // n_batch == n_ubatch: a round is one ubatch

  std::mutex slot_mutex;
  std::vector<bool> taken;

  // The executor runs everything queued once no slot whose pass is under way
  // has its call still to come (or once every slot has one).
  struct Pending {
    Request* request = nullptr;
    bool done = false;
  };
  std::mutex sched_mutex;
  std::condition_variable changed, finished;
  std::deque<Pending*> queue;
  bool stopping = false;
  std::thread executor;
  void execute();
  std::vector<bool> in_pass, queued;  // per slot
  int waiting_for = 0;                // slots in a pass with no call queued

  mutable std::mutex count_mutex;
  Counts counts;

  // The round being evaluated: its sessions' captures by stream, for the callback.
  std::vector<Session*> round_sessions;

  void run(std::vector<Request*>& batch);
  int padded_rows(const std::vector<Request*>& batch, const std::vector<std::size_t>& group,
                  const std::vector<int>& done, int rows) const;

  static bool eval_callback(ggml_tensor* t, bool ask, void* user) {
    auto* self = static_cast<State*>(user);
    bool wanted = false;
    for (std::size_t s = 0; s < self->round_sessions.size(); ++s) {
      Session* session = self->round_sessions[s];
      if (session != nullptr) wanted = session->on_stream_node(t, ask, static_cast<int>(s)) || wanted;
    }
    return ask ? wanted : true;
  }
};

SharedContext::SharedContext(std::shared_ptr<const Model> model, int slots, int slot_tokens)
    : state_(std::make_unique<State>()) {
  if (slots < 1 || slot_tokens < 1) {
    throw Error(ErrorCode::kInvalidArgument, "a shared Qwen3-ASR context needs >= 1 slot of >= 1 position, got " +
                                                 std::to_string(slots) + " x " + std::to_string(slot_tokens));
  }
  State& s = *state_;
  s.model = std::move(model);
  s.slots = slots;
  s.round_rows = slot_tokens;
  llama_context_params cp = detail::decoding_context_params(*s.model, slot_tokens * slots, slots);
  cp.kv_unified = false;  // one KV stream per sequence: cell == position in each
  cp.cb_eval = &State::eval_callback;
  cp.cb_eval_user_data = &s;
  s.ctx = llama_init_from_model(s.model->llama(), cp);
  if (s.ctx == nullptr) {
    throw Error(ErrorCode::kInternal, "libllama could not create a shared decoding context of " +
                                          std::to_string(slots) + " x " + std::to_string(slot_tokens) + " positions");
  }
  s.slot_tokens = std::min(slot_tokens, static_cast<int>(llama_n_ctx_seq(s.ctx)));
  s.taken.assign(static_cast<std::size_t>(slots), false);
  s.in_pass.assign(static_cast<std::size_t>(slots), false);
  s.queued.assign(static_cast<std::size_t>(slots), false);
  s.counts.round_streams.assign(static_cast<std::size_t>(slots), 0);
  s.executor = std::thread([&s] { s.execute(); });
}

SharedContext::~SharedContext() {
  {
    std::lock_guard lock(state_->sched_mutex);
    state_->stopping = true;
  }
  state_->changed.notify_all();
  state_->executor.join();
  if (state_->ctx != nullptr) llama_free(state_->ctx);
}

int SharedContext::slots() const { return state_->slots; }
int SharedContext::slot_tokens() const { return state_->slot_tokens; }

int SharedContext::acquire() {
  std::lock_guard lock(state_->slot_mutex);
  for (int i = 0; i < state_->slots; ++i) {
    if (state_->taken[static_cast<std::size_t>(i)]) continue;
    state_->taken[static_cast<std::size_t>(i)] = true;
    return i;
  }
  return -1;
}

void SharedContext::release(int slot) {
  set_in_pass(slot, false);
  std::lock_guard lock(state_->slot_mutex);
  state_->taken[static_cast<std::size_t>(slot)] = false;
}

void SharedContext::set_in_pass(int slot, bool on) {
  State& s = *state_;
  std::lock_guard lock(s.sched_mutex);
  const auto i = static_cast<std::size_t>(slot);
  if (s.in_pass[i] == on) return;
  s.in_pass[i] = on;
  if (!s.queued[i]) s.waiting_for += on ? 1 : -1;
  s.changed.notify_all();
}

void SharedContext::decode(Request& request) {
  State& s = *state_;
  State::Pending me{&request, false};
  std::unique_lock lock(s.sched_mutex);
  const auto slot = static_cast<std::size_t>(request.slot);
  s.queued[slot] = true;
  if (s.in_pass[slot]) --s.waiting_for;
  s.queue.push_back(&me);
  s.changed.notify_all();  // the executor may be waiting for this call
  s.finished.wait(lock, [&] { return me.done; });
}

// The executor: one thread evaluates every batch (one OpenMP team, kept warm).
void SharedContext::State::execute() {
  std::unique_lock lock(sched_mutex);
  while (true) {
    changed.wait(lock, [&] {
      return stopping || (!queue.empty() && (waiting_for == 0 || static_cast<int>(queue.size()) >= slots));
    });
    if (stopping) return;
    // The compute lock first (an encode may hold it), then everything queued by
    // then: calls that came in while the encode ran join this batch.
    lock.unlock();
    std::unique_lock compute(model->compute_mutex());
    lock.lock();
    std::vector<Pending*> pending(queue.begin(), queue.end());
    queue.clear();
    lock.unlock();
    std::vector<Request*> batch;
    for (Pending* p : pending) batch.push_back(p->request);
    run(batch);  // never throws: each request keeps its own error
    compute.unlock();
    lock.lock();
    for (Pending* p : pending) {
      p->done = true;
      const auto i = static_cast<std::size_t>(p->request->slot);
      queued[i] = false;
      if (in_pass[i]) ++waiting_for;  // its next call is coming
    }
    {
      std::lock_guard count_lock(count_mutex);
      counts.calls += static_cast<int64_t>(pending.size());
      counts.batches += 1;
    }
    finished.notify_all();
  }
}

SharedContext::Counts SharedContext::counts() const {
  std::lock_guard lock(state_->count_mutex);
  return state_->counts;
}

// The rows each member of a round gives: the round's `rows` (what every member
// has), or, where the others have at most kMaxPadRows more, the longest's, the
// shorter members padded to it. A pad row repeats its stream's last row one
// position on: causal attention keeps it out of the real rows' values, its output
// is dropped, and its KV cells go with the stream's next call (which removes the
// slot's cells from its first position on). A round of two prompts of 66 and 80
// rows is then one pass over the weights instead of a round of 66 each and one of
// 14 alone: the second reads every weight again (~30 ms for the 0.6B on 2 Zen 5
// cores, its panels laid out again for the int8 op) where 14 rows more cost ~1.2 ms
// each. Steps (their attention is read: capture) are never padded, nor a stream
// whose pads would pass its slot's end.
int SharedContext::State::padded_rows(const std::vector<Request*>& batch, const std::vector<std::size_t>& group,
                                      const std::vector<int>& done, int rows) const {
  const int cap = round_rows / static_cast<int>(group.size());
  int longest = rows;
  for (std::size_t i : group) longest = std::max(longest, std::min(cap, batch[i]->rows - done[i]));
  if (longest == rows || longest - rows > kMaxPadRows) return rows;
  for (std::size_t i : group) {
    const Request& r = *batch[i];
    if (r.rows - done[i] >= longest) continue;
    if (r.capture || r.first_pos + done[i] + longest > slot_tokens) return rows;
  }
  return longest;
}

// One batch: each request's cells from its first position on are dropped, then
// rounds of equal row counts over runs of consecutive slots until every request's
// rows are in. A request whose round fails gets the error; the others go on.
void SharedContext::State::run(std::vector<Request*>& batch) {
  llama_memory_t memory = llama_get_memory(ctx);
  const int n_embd = model->n_embd();
  const int n_vocab = model->n_vocab();
  std::sort(batch.begin(), batch.end(), [](const Request* a, const Request* b) { return a->slot < b->slot; });
  std::vector<int> done(batch.size(), 0);
  for (Request* r : batch) {
    r->logits.clear();
    r->error = nullptr;
    if (r->rows < 1 || r->first_pos < 0 || r->first_pos + r->rows > slot_tokens) {
      r->error = std::make_exception_ptr(
          Error(ErrorCode::kInvalidArgument, "Qwen3-ASR context full: " + std::to_string(r->first_pos) + " + " +
                                                 std::to_string(r->rows) + " positions exceed the stream's " +
                                                 std::to_string(slot_tokens)));
    } else if (!llama_memory_seq_rm(memory, r->slot, r->first_pos, -1)) {
      r->error = std::make_exception_ptr(Error(ErrorCode::kInternal, "libllama could not remove a KV suffix"));
    }
  }
  auto remaining = [&](std::size_t i) { return batch[i]->error ? 0 : batch[i]->rows - done[i]; };
  std::vector<float> embd;
  std::vector<llama_pos> pos;
  std::vector<int32_t> n_seq;
  std::vector<llama_seq_id> seq_ids;
  std::vector<llama_seq_id*> seq;
  std::vector<int8_t> logits;
  std::vector<std::size_t> order(batch.size());  // batch is in slot order
  std::iota(order.begin(), order.end(), 0);
  while (true) {
    const runtime::SlotRound round = runtime::next_slot_round(
        order, [&](std::size_t i) { return batch[i]->slot; }, remaining, round_rows);
    if (round.rows == 0) break;
    const std::vector<std::size_t>& group = round.members;
    const int m = padded_rows(batch, group, done, round.rows);
    const int n = m * static_cast<int>(group.size());
    embd.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(n_embd));
    pos.resize(static_cast<std::size_t>(n) * 4);
    n_seq.assign(static_cast<std::size_t>(n), 1);
    seq_ids.resize(static_cast<std::size_t>(n));
    seq.resize(static_cast<std::size_t>(n));
    logits.assign(static_cast<std::size_t>(n), 0);
    round_sessions.clear();
    std::vector<int> real(group.size());  // each member's own rows in the round; the rest pad it
    int b = 0;
    for (std::size_t g = 0; g < group.size(); ++g) {
      const std::size_t i = group[g];
      const Request& r = *batch[i];
      real[g] = std::min(m, remaining(i));
      const auto row_bytes = static_cast<std::size_t>(n_embd) * sizeof(float);
      std::memcpy(embd.data() + static_cast<std::size_t>(b) * static_cast<std::size_t>(n_embd),
                  r.embd + static_cast<std::size_t>(done[i]) * static_cast<std::size_t>(n_embd),
                  static_cast<std::size_t>(real[g]) * row_bytes);
      for (int k = 0; k < m; ++k) {
        const int last = done[i] + std::min(k, real[g] - 1);  // a pad repeats the last row, one position on
        if (k >= real[g]) {
          std::memcpy(embd.data() + static_cast<std::size_t>(b + k) * static_cast<std::size_t>(n_embd),
                      r.embd + static_cast<std::size_t>(last) * static_cast<std::size_t>(n_embd), row_bytes);
        }
        for (int sec = 0; sec < 4; ++sec)
          pos[static_cast<std::size_t>(sec * n + b + k)] = r.pos[sec * r.rows + last] + (k - std::min(k, real[g] - 1));
        seq_ids[static_cast<std::size_t>(b + k)] = r.slot;
        seq[static_cast<std::size_t>(b + k)] = &seq_ids[static_cast<std::size_t>(b + k)];
      }
      if (done[i] + real[g] == r.rows) logits[static_cast<std::size_t>(b + real[g] - 1)] = 1;
      round_sessions.push_back(r.capture ? r.session : nullptr);
      b += m;
    }
    llama_batch lb{n, nullptr, embd.data(), pos.data(), n_seq.data(), seq.data(), logits.data()};
    const int status = llama_decode(ctx, lb);
    round_sessions.clear();
    {
      std::lock_guard lock(count_mutex);
      counts.rounds += 1;
      counts.rows += n;
      for (int rg : real) counts.pad_rows += m - rg;
      counts.round_streams[group.size() - 1] += 1;
    }
    b = 0;
    for (std::size_t g = 0; g < group.size(); ++g) {
      const std::size_t i = group[g];
      Request& r = *batch[i];
      const int first = b;
      b += m;
      if (status != 0) {
        r.error = std::make_exception_ptr(
            Error(ErrorCode::kInternal, "libllama could not decode a stream's rows (" + std::to_string(status) + ")"));
        continue;
      }
      done[i] += real[g];
      if (done[i] < r.rows) continue;
      const float* l = llama_get_logits_ith(ctx, first + real[g] - 1);
      if (l == nullptr) {
        r.error = std::make_exception_ptr(Error(ErrorCode::kInternal, "libllama returned no logits"));
        continue;
      }
      r.logits.assign(l, l + n_vocab);
    }
  }
  for (Request* r : batch) {
    // What the slot holds after a failure is unknown: the next call removes it from its first position on.
    if (r->error) llama_memory_seq_rm(memory, r->slot, r->first_pos, -1);
  }
}

}  // namespace earshot::qwen3asr
