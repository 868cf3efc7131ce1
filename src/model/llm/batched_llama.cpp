#include "model/llm/batched_llama.h"

#include <llama.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

#include "common/error.h"
#include "model/runtime/slot_rounds.h"

namespace earshot::llm {

// Named (not anonymous): BatchedLlamaModel::Shared, a class of the header, holds them.
namespace batched {

class SlotSession;

// One session's decode call, as the scheduler carries it.
struct Item {
  SlotSession* session = nullptr;
  std::span<const Token> tokens;
  int first = 0;  // rows from `first` get logits and a greedy choice (each = true)
  bool each = false;
  std::vector<Token> greedy_after;
  std::vector<float> last_logits;
  AttentionRows rows;
  std::exception_ptr error;
  std::function<void(std::span<Item>)> hold;  // a Hold's placeholder: waits for release() before the batch runs
};

}  // namespace batched

using batched::Item;
using batched::SlotSession;

struct BatchedLlamaModel::Shared {
  std::shared_ptr<const LlamaModel> model;
  llama_context* ctx = nullptr;
  int slots = 0;
  int slot_tokens = 0;
  int round_tokens = 0;  // n_batch == n_ubatch: a round is one ubatch

  std::mutex slot_mutex;
  std::vector<bool> taken;  // per slot

  // The scheduler: runtime::Rendezvous's continuous batching without a timer
  // (a caller that finds the context idle runs everything queued, up to
  // max_batch), plus one rule that keeps stepping sessions in step: while a
  // session that declared a greedy loop (set_stepping) has no call queued, it
  // is about to queue one, so the next batch waits for it (or for a full
  // batch). Without it two stepping sessions alternate, each one's step
  // running alone while the other's waits. A lone session never waits.
  struct Pending {
    Item item;
    bool done = false;
  };
  int max_batch = 1;
  mutable std::mutex sched_mutex;
  std::condition_variable sched_changed;
  std::deque<Pending*> queue;
  bool running = false;
  int waiting_for = 0;  // stepping sessions with no call queued
  int64_t calls = 0, batches = 0, largest_batch = 0;

  Item submit(Item item);
  void set_stepping(SlotSession* session, bool on);

  // Written only by the caller running a batch (the scheduler runs one at a
  // time); read by counts() under count_mutex.
  mutable std::mutex count_mutex;
  int64_t rounds = 0;
  int64_t tokens = 0;
  std::vector<int64_t> round_sessions;
  int64_t lone_sessions = 0;

  // The captures of the round being evaluated, by stream (the eval callback's view).
  std::vector<AttentionCapture*> round_captures;

  Shared(std::shared_ptr<const LlamaModel> m, const LlamaBatchOptions& options);
  ~Shared() {
    if (ctx != nullptr) llama_free(ctx);
  }

  static bool eval_callback(ggml_tensor* tensor, bool ask, void* user_data) {
    auto* self = static_cast<Shared*>(user_data);
    if (ask) {
      for (const AttentionCapture* c : self->round_captures)
        if (c->claims(tensor)) return true;
      return false;
    }
    for (std::size_t s = 0; s < self->round_captures.size(); ++s)
      self->round_captures[s]->take_stream(tensor, static_cast<int>(s));
    return true;
  }

  void run(std::span<Item> items);
};

namespace batched {

// A slot of the shared context. Everything that touches the context (decodes,
// removing cells) happens in the scheduler's run, one batch at a time; the
// session itself only keeps its position and the cells it still has to drop.
class SlotSession final : public LlmSession {
 public:
  SlotSession(std::shared_ptr<BatchedLlamaModel::Shared> shared, int slot)
      : shared_(std::move(shared)),
        slot_(slot),
        capture_(std::make_unique<AttentionCapture>(shared_->model->options().attention_route)) {}
  ~SlotSession() override {
    shared_->set_stepping(this, false);
    std::lock_guard lock(shared_->slot_mutex);
    shared_->taken[static_cast<std::size_t>(slot_)] = false;  // its cells go at the next owner's first decode
  }
  void set_stepping(bool on) override { shared_->set_stepping(this, on); }

  void set_attention_capture(std::vector<AttentionHead> heads, int column_begin, int column_end) override {
    detail::check_capture_heads(*shared_->model, heads);
    capture_->set(std::move(heads), column_begin, column_end);
  }
  AttentionRows decode(std::span<const Token> tokens) override {
    std::vector<Token> unused;
    return submit(tokens, 0, false, unused);
  }
  AttentionRows decode_each(std::span<const Token> tokens, int first, std::vector<Token>& greedy_after) override {
    greedy_after.clear();
    return submit(tokens, std::max(first, 0), true, greedy_after);
  }
  Token greedy() const override {
    check_logits();
    return argmax_token(last_logits_);
  }
  std::vector<float> last_log_probs() const override {
    check_logits();
    return log_probabilities(last_logits_);
  }
  int position() const override { return position_; }
  void remove_suffix(int from) override {
    if (from < 0 || from > position_) {
      throw Error(ErrorCode::kInvalidArgument, "remove_suffix(" + std::to_string(from) +
                                                   ") outside the session's positions [0, " +
                                                   std::to_string(position_) + "]");
    }
    if (from == position_) return;
    position_ = from;
    drop_from_ = drop_from_ < 0 ? from : std::min(drop_from_, from);
    last_logits_.clear();
  }

  // For the run (one batch at a time): the slot, the cells to drop first, the capture.
  int slot() const { return slot_; }
  int drop_from() const { return drop_from_; }
  void dropped() { drop_from_ = -1; }
  AttentionCapture& capture() { return *capture_; }
  // The scheduler's view (under its mutex).
  bool stepping = false;
  bool queued = false;

 private:
  AttentionRows submit(std::span<const Token> tokens, int first, bool each, std::vector<Token>& greedy_after) {
    if (tokens.empty()) return {};
    const int n = static_cast<int>(tokens.size());
    if (position_ + n > shared_->slot_tokens) {
      throw Error(ErrorCode::kInvalidArgument, "LLM context full: " + std::to_string(position_) + " + " +
                                                   std::to_string(n) + " tokens exceed the session's " +
                                                   std::to_string(shared_->slot_tokens));
    }
    const int n_vocab = shared_->model->shape().n_vocab;
    for (Token t : tokens) {
      if (t < 0 || t >= n_vocab) {
        throw Error(ErrorCode::kInvalidArgument,
                    "token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(n_vocab));
      }
    }
    last_logits_.clear();
    Item item;
    item.session = this;
    item.tokens = tokens;
    item.first = first;
    item.each = each;
    item = shared_->submit(std::move(item));
    if (item.error) std::rethrow_exception(item.error);
    position_ += n;
    greedy_after = std::move(item.greedy_after);
    last_logits_ = std::move(item.last_logits);
    return std::move(item.rows);
  }
  void check_logits() const {
    if (last_logits_.empty())
      throw Error(ErrorCode::kInvalidArgument, "no logits: decode tokens first (remove_suffix drops them)");
  }

  std::shared_ptr<BatchedLlamaModel::Shared> shared_;
  int slot_;
  std::unique_ptr<AttentionCapture> capture_;
  int position_ = 0;
  int drop_from_ = 0;  // a new slot's previous owner's cells go at the first decode
  std::vector<float> last_logits_;
};

}  // namespace batched

BatchedLlamaModel::Shared::Shared(std::shared_ptr<const LlamaModel> m, const LlamaBatchOptions& options)
    : model(std::move(m)), max_batch(std::max(options.max_sessions, 1)) {
  if (options.max_sessions < 1 || options.context_tokens < 1) {
    throw Error(ErrorCode::kInvalidArgument, "batched LLM sessions need >= 1 slot of >= 1 token, got " +
                                                 std::to_string(options.max_sessions) + " x " +
                                                 std::to_string(options.context_tokens));
  }
  const LlamaModelOptions& mo = model->options();
  const int threads = options.threads > 0 ? options.threads : detail::default_threads(mo);
  slots = options.max_sessions;
  round_tokens = 512;
  llama_context_params p = llama_context_default_params();
  p.n_ctx = static_cast<uint32_t>(options.context_tokens) * static_cast<uint32_t>(slots);
  p.n_batch = static_cast<uint32_t>(round_tokens);
  p.n_ubatch = static_cast<uint32_t>(round_tokens);
  p.n_seq_max = static_cast<uint32_t>(slots);
  p.kv_unified = false;  // one KV stream per sequence: cell == position in each
  p.n_threads = threads;
  p.n_threads_batch = threads;
  const bool flash = mo.flash_attention || mo.attention_route == AttentionRoute::kQk;
  p.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  p.type_k = mo.cache_type;
  p.type_v = mo.cache_type;
  p.cb_eval = &Shared::eval_callback;
  p.cb_eval_user_data = this;
  p.no_perf = true;
  ctx = llama_init_from_model(model->raw(), p);
  if (ctx == nullptr) {
    const std::string why = detail::take_last_llama_error();
    throw Error(ErrorCode::kInvalidArgument, "libllama could not create a context of " + std::to_string(slots) + " x " +
                                                 std::to_string(options.context_tokens) + " tokens for " + model->id() +
                                                 (why.empty() ? std::string() : ": " + why));
  }
  slot_tokens = std::min(options.context_tokens, static_cast<int>(llama_n_ctx_seq(ctx)));
  taken.assign(static_cast<std::size_t>(slots), false);
  round_sessions.assign(static_cast<std::size_t>(slots), 0);
}

Item BatchedLlamaModel::Shared::submit(Item item) {
  Pending me{std::move(item)};
  std::unique_lock lock(sched_mutex);
  SlotSession* self = me.item.session;
  if (self != nullptr) {
    self->queued = true;
    if (self->stepping) --waiting_for;
  }
  queue.push_back(&me);
  sched_changed.notify_all();  // the batch may have been waiting for this call
  while (!me.done) {
    const bool ready = !running && !queue.empty() && (waiting_for == 0 || static_cast<int>(queue.size()) >= max_batch);
    if (!ready) {
      sched_changed.wait(lock);
      continue;
    }
    running = true;
    const std::size_t n = std::min(queue.size(), static_cast<std::size_t>(max_batch));
    std::vector<Pending*> batch(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(n));
    queue.erase(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(n));
    lock.unlock();
    std::vector<Item> items;
    items.reserve(n);
    for (Pending* p : batch) items.push_back(std::move(p->item));
    for (Item& it : items)
      if (it.hold) it.hold(items);  // a Hold's placeholder
    run(items);                     // never throws: each item keeps its own error
    lock.lock();
    for (std::size_t i = 0; i < n; ++i) {
      batch[i]->item = std::move(items[i]);
      batch[i]->done = true;
      if (SlotSession* s = batch[i]->item.session) {
        s->queued = false;
        if (s->stepping) ++waiting_for;  // its next step is coming
      }
    }
    calls += static_cast<int64_t>(n);
    batches += 1;
    largest_batch = std::max(largest_batch, static_cast<int64_t>(n));
    running = false;
    sched_changed.notify_all();
  }
  return std::move(me.item);
}

void BatchedLlamaModel::Shared::set_stepping(SlotSession* session, bool on) {
  std::lock_guard lock(sched_mutex);
  if (session->stepping == on) return;
  session->stepping = on;
  if (!session->queued) waiting_for += on ? 1 : -1;
  sched_changed.notify_all();
}

// One batch: each item's pending cell removal, then rounds of equal token counts
// over runs of consecutive slots until every item's tokens are in. An item whose
// round fails gets the error and loses the cells of this call; the others go on.
void BatchedLlamaModel::Shared::run(std::span<Item> items) {
  llama_memory_t memory = llama_get_memory(ctx);
  const int n_vocab = model->shape().n_vocab;
  std::vector<std::size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<int> start(items.size()), done(items.size(), 0);
  for (std::size_t i = 0; i < items.size(); ++i) {
    SlotSession* s = items[i].session;
    if (s == nullptr) continue;  // a Hold's placeholder
    start[i] = s->position();
    if (s->drop_from() >= 0) {
      llama_memory_seq_rm(memory, s->slot(), s->drop_from(), -1);
      s->dropped();
    }
    s->capture().begin_decode(start[i], static_cast<int>(items[i].tokens.size()));
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return items[a].session->slot() < items[b].session->slot(); });
  auto remaining = [&](std::size_t i) {
    return items[i].error ? 0 : static_cast<int>(items[i].tokens.size()) - done[i];
  };
  llama_batch batch = llama_batch_init(round_tokens, 0, 1);
  while (true) {
    const runtime::SlotRound round = runtime::next_slot_round(
        order, [&](std::size_t i) { return items[i].session->slot(); }, remaining, round_tokens);
    if (round.rows == 0) break;
    const std::vector<std::size_t>& group = round.members;
    const int m = round.rows;
    batch.n_tokens = 0;
    round_captures.clear();
    for (std::size_t i : group) {
      const Item& it = items[i];
      const int n = static_cast<int>(it.tokens.size());
      for (int k = done[i]; k < done[i] + m; ++k) {
        const int b = batch.n_tokens++;
        batch.token[b] = it.tokens[static_cast<std::size_t>(k)];
        batch.pos[b] = start[i] + k;
        batch.n_seq_id[b] = 1;
        batch.seq_id[b][0] = it.session->slot();
        batch.logits[b] = (it.each && k >= it.first) || k == n - 1;
      }
      round_captures.push_back(&items[i].session->capture());
    }
    const int status = llama_decode(ctx, batch);
    round_captures.clear();
    {
      std::lock_guard lock(count_mutex);
      rounds += 1;
      tokens += batch.n_tokens;
      round_sessions[group.size() - 1] += 1;
    }
    int base = 0;  // the item's first row in the batch
    for (std::size_t i : group) {
      Item& it = items[i];
      const int n = static_cast<int>(it.tokens.size());
      std::string failure;
      if (status != 0) failure = "llama_decode failed (" + std::to_string(status) + ")";
      for (int k = done[i]; k < done[i] + m && failure.empty(); ++k) {
        const int b = base + (k - done[i]);
        if (!batch.logits[b]) continue;
        const float* logits = llama_get_logits_ith(ctx, b);
        if (logits == nullptr) {
          failure = "libllama returned no logits for row " + std::to_string(k);
          break;
        }
        if (it.each && k >= it.first)
          it.greedy_after.push_back(static_cast<Token>(std::max_element(logits, logits + n_vocab) - logits));
        if (k == n - 1) it.last_logits.assign(logits, logits + n_vocab);
      }
      base += m;
      if (failure.empty()) {
        done[i] += m;
        continue;
      }
      const std::string why = detail::take_last_llama_error();
      it.error = std::make_exception_ptr(
          Error(ErrorCode::kInternal, failure + " at position " + std::to_string(start[i] + done[i]) +
                                          " of batched session slot " + std::to_string(it.session->slot()) +
                                          (why.empty() ? std::string() : ": " + why)));
    }
  }
  llama_batch_free(batch);
  for (std::size_t i = 0; i < items.size(); ++i) {
    Item& it = items[i];
    SlotSession* s = it.session;
    if (s == nullptr) continue;
    if (!it.error) {
      try {
        it.rows = s->capture().finish();
      } catch (...) {
        it.error = std::current_exception();
      }
    }
    if (it.error) {
      // The session stays at its last consistent position.
      llama_memory_seq_rm(memory, s->slot(), start[i], -1);
      it.greedy_after.clear();
      it.last_logits.clear();
    }
  }
}

BatchedLlamaModel::BatchedLlamaModel(std::shared_ptr<const LlamaModel> model, const LlamaBatchOptions& options)
    : model_(std::move(model)), shared_(std::make_shared<Shared>(model_, options)) {}

BatchedLlamaModel::~BatchedLlamaModel() = default;

int BatchedLlamaModel::max_sessions() const { return shared_->slots; }
int BatchedLlamaModel::slot_tokens() const { return shared_->slot_tokens; }

std::unique_ptr<LlmSession> BatchedLlamaModel::open_session(const SessionOptions& options) const {
  if (options.context_tokens <= shared_->slot_tokens) {
    std::lock_guard lock(shared_->slot_mutex);
    for (int s = 0; s < shared_->slots; ++s) {
      if (shared_->taken[static_cast<std::size_t>(s)]) continue;
      shared_->taken[static_cast<std::size_t>(s)] = true;
      return std::make_unique<SlotSession>(shared_, s);
    }
  }
  {
    std::lock_guard lock(shared_->count_mutex);
    shared_->lone_sessions += 1;
  }
  return model_->open_session(options);
}

struct BatchedLlamaModel::Hold::State {
  std::mutex mutex;
  std::condition_variable changed;
  bool running = false;  // the placeholder holds the context
  bool released = false;
  std::thread thread;
};

BatchedLlamaModel::Hold::Hold(std::unique_ptr<State> state) : state_(std::move(state)) {}

BatchedLlamaModel::Hold::~Hold() { release(); }

void BatchedLlamaModel::Hold::release() {
  {
    std::lock_guard lock(state_->mutex);
    state_->released = true;
  }
  state_->changed.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

std::unique_ptr<BatchedLlamaModel::Hold> BatchedLlamaModel::hold() const {
  auto state = std::make_unique<Hold::State>();
  Hold::State* st = state.get();
  Shared* shared = shared_.get();
  st->thread = std::thread([st, shared] {
    // A placeholder call that holds the context until release() (it runs
    // alone when the hold is taken with nothing queued).
    Item placeholder;
    placeholder.hold = [st](std::span<Item>) {
      std::unique_lock lock(st->mutex);
      st->running = true;
      st->changed.notify_all();
      st->changed.wait(lock, [st] { return st->released; });
    };
    shared->submit(std::move(placeholder));
  });
  std::unique_lock lock(st->mutex);
  st->changed.wait(lock, [st] { return st->running; });
  lock.unlock();
  return std::unique_ptr<Hold>(new Hold(std::move(state)));
}

int64_t BatchedLlamaModel::pending() const {
  std::lock_guard lock(shared_->sched_mutex);
  return static_cast<int64_t>(shared_->queue.size());
}

double BatchedLlamaModel::Counts::mean_round_sessions() const {
  int64_t sessions = 0;
  for (std::size_t k = 0; k < round_sessions.size(); ++k) sessions += round_sessions[k] * static_cast<int64_t>(k + 1);
  return rounds > 0 ? static_cast<double>(sessions) / static_cast<double>(rounds) : 0.0;
}

BatchedLlamaModel::Counts BatchedLlamaModel::counts() const {
  Counts c;
  {
    std::lock_guard lock(shared_->sched_mutex);
    c.calls = shared_->calls;
    c.batches = shared_->batches;
    c.max_batch = shared_->largest_batch;
  }
  std::lock_guard lock(shared_->count_mutex);
  c.rounds = shared_->rounds;
  c.tokens = shared_->tokens;
  c.round_sessions = shared_->round_sessions;
  c.lone_sessions = shared_->lone_sessions;
  return c;
}

}  // namespace earshot::llm
