// BatchedLlamaModel: several sessions' decode calls in one llama_decode give each
// session what its lone run gives (tokens exactly, logits and captured attention
// to rounding), whatever the batch's composition (prefills next to steps,
// verification batches, suffix removals, sessions joining and leaving), and a
// session's failure stays its own.
#include "model/llm/batched_llama.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include "common/error.h"
#include "llm_test_models.h"

namespace earshot::llm {
namespace {

using testing::tiny_model;

// What one session's script produced.
struct Trace {
  std::vector<Token> tokens;        // greedy choices, in order
  std::vector<AttentionRows> rows;  // every decode call's captured rows
  std::vector<float> log_probs;     // after the last call
};

// A draft-like script: prefill a prompt (capturing its span), greedy steps, a
// suffix removal and a verification batch of the old continuation, more steps.
struct Script {
  std::vector<Token> prompt;
  int steps_before = 6;
  int keep = 2;  // generated tokens kept before the re-verification
  int steps_after = 4;
};

std::vector<Script> scripts(int n, int n_vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Script> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int length = 6 + static_cast<int>(rng() % 25);
    for (int k = 0; k < length; ++k) out[i].prompt.push_back(static_cast<Token>(100 + rng() % (n_vocab - 200)));
    out[i].steps_before = 3 + static_cast<int>(rng() % 5);
    out[i].keep = static_cast<int>(rng() % 3);
    out[i].steps_after = 2 + static_cast<int>(rng() % 4);
  }
  return out;
}

Trace run_script(LlmSession& s, const Script& script, const ModelShape& shape) {
  Trace t;
  const int p = static_cast<int>(script.prompt.size());
  s.set_attention_capture({{0, 1}, {shape.n_layer - 1, shape.n_head - 1}}, 0, p);
  t.rows.push_back(s.decode(script.prompt));
  std::vector<Token> generated;
  for (int k = 0; k < script.steps_before; ++k) {
    const Token next = s.greedy();
    generated.push_back(next);
    t.tokens.push_back(next);
    t.rows.push_back(s.decode(std::span(&generated.back(), 1)));
  }
  // Drop all but `keep` generated tokens, then verify the dropped ones in one batch.
  s.remove_suffix(p + script.keep);
  std::vector<Token> proposal(generated.begin() + script.keep, generated.end());
  std::vector<Token> after;
  t.rows.push_back(s.decode_each(proposal, 0, after));
  t.tokens.insert(t.tokens.end(), after.begin(), after.end());
  for (int k = 0; k < script.steps_after; ++k) {
    const Token next = s.greedy();
    t.tokens.push_back(next);
    t.rows.push_back(s.decode(std::span(&next, 1)));
  }
  t.log_probs = s.last_log_probs();
  return t;
}

// Largest |difference| of rows and of log-probs; tokens and shapes must match exactly.
struct Diff {
  double rows = 0, log_probs = 0;
  double worst() const { return std::max(rows, log_probs); }
  void add(const Diff& d) {
    rows = std::max(rows, d.rows);
    log_probs = std::max(log_probs, d.log_probs);
  }
};

Diff compare_parts(const Trace& lone, const Trace& batched) {
  Diff d;
  EXPECT_EQ(lone.tokens, batched.tokens);
  EXPECT_EQ(lone.rows.size(), batched.rows.size());
  for (std::size_t c = 0; c < std::min(lone.rows.size(), batched.rows.size()); ++c) {
    const AttentionRows& a = lone.rows[c];
    const AttentionRows& b = batched.rows[c];
    EXPECT_EQ(a.n_tokens, b.n_tokens);
    EXPECT_EQ(a.values.size(), b.values.size());
    for (std::size_t i = 0; i < std::min(a.values.size(), b.values.size()); ++i)
      d.rows = std::max(d.rows, static_cast<double>(std::abs(a.values[i] - b.values[i])));
  }
  EXPECT_EQ(lone.log_probs.size(), batched.log_probs.size());
  for (std::size_t i = 0; i < std::min(lone.log_probs.size(), batched.log_probs.size()); ++i)
    d.log_probs = std::max(d.log_probs, static_cast<double>(std::abs(lone.log_probs[i] - batched.log_probs[i])));
  return d;
}

double compare(const Trace& lone, const Trace& batched) { return compare_parts(lone, batched).worst(); }

class BatchedLlama : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  std::shared_ptr<const LlamaModel> load() const {
    LlamaModelOptions o;
    o.threads = 1;
    o.cache_type = GGML_TYPE_F32;
    o.attention_route = parse_attention_route(std::get<1>(GetParam()));
    return LlamaModel::load(tiny_model(std::get<0>(GetParam())), o);
  }
  // Rounding of differently shaped products: a batch splits a session's rows
  // into other ubatch widths. Flash attention (the qk route) rounds Q, K and V
  // to F16 inside its kernel, whose tiling follows the ubatch.
  double tolerance() const { return std::get<1>(GetParam()) == "qk" ? 2e-3 : 1e-5; }
};

TEST_P(BatchedLlama, ConcurrentSessionsGetTheirLoneResults) {
  const auto model = load();
  const ModelShape shape = model->shape();
  const int n = 4;
  const std::vector<Script> work = scripts(n, shape.n_vocab, 5);
  std::vector<Trace> lone;
  for (const Script& s : work) lone.push_back(run_script(*model->open_session({.context_tokens = 256}), s, shape));

  BatchedLlamaModel batched(model, {.max_sessions = n, .context_tokens = 256, .threads = 1});
  std::vector<std::unique_ptr<LlmSession>> sessions;
  for (int i = 0; i < n; ++i) sessions.push_back(batched.open_session({.context_tokens = 256}));
  std::vector<Trace> got(n);
  {
    // The first calls form one batch for certain; the rest batch as they meet.
    auto hold = batched.hold();
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { got[i] = run_script(*sessions[i], work[i], shape); });
    while (batched.pending() < n) std::this_thread::yield();
    hold->release();
    for (auto& t : threads) t.join();
  }
  Diff diff;
  for (int i = 0; i < n; ++i) diff.add(compare_parts(lone[i], got[i]));
  std::printf("max |batched - lone|: attention %.3g, log-probs %.3g\n", diff.rows, diff.log_probs);
  EXPECT_LE(diff.worst(), tolerance());
  const BatchedLlamaModel::Counts c = batched.counts();
  EXPECT_EQ(c.max_batch, n);              // the held prefills
  EXPECT_GE(c.round_sessions[n - 1], 1);  // evaluated as one round of n sessions
  EXPECT_EQ(c.lone_sessions, 0);
}

TEST_P(BatchedLlama, SteppingSessionsShareEveryStep) {
  // Three greedy loops (set_stepping, as the translation engine declares them)
  // of 8, 8 and 3 steps after equal-length prompts: each batch waits for every
  // stepping session's next step, so the prompts and the first three steps run
  // as rounds of three and the last five as rounds of two, never alone, while
  // the outputs stay the lone ones.
  const auto model = load();
  const std::vector<int> steps = {8, 8, 3};
  std::vector<std::vector<Token>> prompts;
  for (int i = 0; i < 3; ++i) {
    std::vector<Token> p;
    for (int k = 0; k < 12; ++k) p.push_back(static_cast<Token>(200 + 37 * i + 11 * k));
    prompts.push_back(p);
  }
  auto greedy_run = [&](LlmSession& s, int i) {
    s.set_stepping(true);
    std::vector<Token> out;
    s.decode(prompts[i]);
    for (int k = 0; k < steps[i]; ++k) {
      out.push_back(s.greedy());
      s.decode(std::span(&out.back(), 1));
    }
    s.set_stepping(false);
    return out;
  };
  std::vector<std::vector<Token>> lone;
  for (int i = 0; i < 3; ++i) lone.push_back(greedy_run(*model->open_session({.context_tokens = 256}), i));

  BatchedLlamaModel batched(model, {.max_sessions = 3, .context_tokens = 256, .threads = 1});
  std::vector<std::unique_ptr<LlmSession>> sessions;
  for (int i = 0; i < 3; ++i) sessions.push_back(batched.open_session({.context_tokens = 256}));
  // The loops are declared before any thread starts (else the first prompt
  // may run before the others' loops exist, which is as right, but another count).
  for (auto& s : sessions) s->set_stepping(true);
  std::vector<std::vector<Token>> got(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back([&, i] { got[i] = greedy_run(*sessions[i], i); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, lone);
  const BatchedLlamaModel::Counts c = batched.counts();
  EXPECT_EQ(c.batches, 9);
  EXPECT_EQ(c.round_sessions, (std::vector<int64_t>{0, 5, 4}));
}

TEST_P(BatchedLlama, SessionsJoiningAndLeavingDoNotDisturbOthers) {
  const auto model = load();
  const ModelShape shape = model->shape();
  const std::vector<Script> work = scripts(6, shape.n_vocab, 9);
  std::vector<Trace> lone;
  for (const Script& s : work) lone.push_back(run_script(*model->open_session({.context_tokens = 256}), s, shape));

  BatchedLlamaModel batched(model, {.max_sessions = 3, .context_tokens = 256, .threads = 1});
  // Three streams run while others open and close: a slot's previous owner's
  // cells never leak into the next one, and a fourth session at once runs lone.
  double worst = 0;
  std::vector<std::thread> threads;
  std::vector<Trace> got(work.size());
  for (std::size_t i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      got[i] = run_script(*batched.open_session({.context_tokens = 256}), work[i], shape);
      got[i + 3] = run_script(*batched.open_session({.context_tokens = 256}), work[i + 3], shape);
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < work.size(); ++i) worst = std::max(worst, compare(lone[i], got[i]));
  EXPECT_LE(worst, tolerance());
  {
    std::vector<std::unique_ptr<LlmSession>> full;
    for (int i = 0; i < 3; ++i) full.push_back(batched.open_session({.context_tokens = 256}));
    auto extra = batched.open_session({.context_tokens = 256});
    EXPECT_EQ(batched.counts().lone_sessions, 1);
    worst = std::max(worst, compare(lone[0], run_script(*extra, work[0], shape)));
    auto big = batched.open_session({.context_tokens = 1024});  // larger than a slot: lone too
    EXPECT_EQ(batched.counts().lone_sessions, 2);
  }
  EXPECT_LE(worst, tolerance());
}

TEST_P(BatchedLlama, AFailingCallFailsAlone) {
  const auto model = load();
  const ModelShape shape = model->shape();
  const std::vector<Script> work = scripts(2, shape.n_vocab, 13);
  const Trace lone = run_script(*model->open_session({.context_tokens = 256}), work[0], shape);

  BatchedLlamaModel batched(model, {.max_sessions = 2, .context_tokens = 256, .threads = 1});
  auto good = batched.open_session({.context_tokens = 256});
  auto bad = batched.open_session({.context_tokens = 256});
  const std::vector<Token> too_long(300, 5);
  EXPECT_THROW(bad->decode(too_long), Error);
  const Token outside = shape.n_vocab;
  EXPECT_THROW(bad->decode(std::span(&outside, 1)), Error);
  EXPECT_EQ(bad->position(), 0);
  EXPECT_THROW(bad->greedy(), Error);
  EXPECT_LE(compare(lone, run_script(*good, work[0], shape)), tolerance());
  // The failed session still works afterwards.
  EXPECT_LE(compare(lone, run_script(*bad, work[0], shape)), tolerance());
}

INSTANTIATE_TEST_SUITE_P(RandomWeights, BatchedLlama,
                         ::testing::Combine(::testing::Values("hunyuan-dense", "qwen3"),
                                            ::testing::Values("softmax", "qk")),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace earshot::llm
