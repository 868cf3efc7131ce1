// Qwen3-ASR streams on the slots of one shared llama context (--batch-decode):
// each stream's prompts and steps, decoded in batches with the other streams',
// give its lone run's logits and alignment rows to rounding, with the prompt's
// KV rows kept across passes as a lone stream keeps them; streams in their passes
// share every step round; a stream whose pass ended holds no one; with every slot
// taken a stream gets a context of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <latch>
#include <thread>

#include "audio/audio.h"
#include "model/qwen3asr/model.h"
#include "model/qwen3asr/model_writer.h"
#include "model/qwen3asr/shared_context.h"

namespace earshot::qwen3asr {
namespace {

namespace fs = std::filesystem;

struct Qwen3AsrShared : ::testing::Test {
  static inline fs::path dir;
  static inline std::shared_ptr<const Model> model;
  static inline std::vector<float> speech;
  static void SetUpTestSuite() {
    dir = fs::temp_directory_path() / ("earshot-qwen3asr-shared-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const WrittenPair pair = write_random_pair(PairDims::tiny(), EARSHOT_QWEN2_VOCAB, dir / "tiny", 13);
    ModelOptions o;
    o.n_threads = 2;
    o.exclusive_compute = true;
    model = Model::load(pair.text, pair.mmproj, o);
    speech = audio::load_file(fs::path(EARSHOT_SHARED_DIR) / "data" / "librivox" /
                              "sense_and_sensibility_01_austen_64kb-0870.wav");
  }
  static void TearDownTestSuite() {
    model.reset();
    fs::remove_all(dir);
  }
};

const std::vector<Head> kHeads = {{3, 0}, {3, 3}, {2, 1}};

// What one stream's passes gave: per decode (prefill, then each step) the
// logits, and per step the alignment heads' rows.
struct Trace {
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<std::vector<float>>> rows;
  std::vector<int> reused;  // prompt rows kept per prefill
};

// Passes over a growing buffer (`ends` in samples), each a prefill and `steps`
// teacher-forced steps (the same tokens whatever the logits say, so that two
// runs decode the same positions). `ready`: waited on after each prefill, so that
// every stream is in its pass's steps before any steps (the rounds then pair every step).
Trace run_stream(Session& s, std::span<const float> audio, const std::vector<size_t>& ends, int steps,
                 std::latch* ready = nullptr) {
  Trace t;
  const std::vector<int32_t> forced = {11, 220, 1000, 42, 7, 3000, 5, 99};
  std::vector<int32_t> context;
  for (size_t pass = 0; pass < ends.size(); ++pass) {
    s.encode(audio.first(ends[pass]));
    s.prefill({"", "English", context});
    t.logits.push_back(s.logits());
    t.reused.push_back(s.last_prefill().reused);
    if (ready != nullptr && pass == 0) ready->arrive_and_wait();
    for (int k = 0; k < steps; ++k) {
      s.step(forced[static_cast<size_t>(k) % forced.size()]);
      t.logits.push_back(s.logits());
      t.rows.push_back(s.step_rows());
    }
    s.end_pass();
    context.push_back(forced[pass % forced.size()]);  // committed text grows as a policy's does
  }
  return t;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(double{a[i]} - b[i]));
  return d;
}

void expect_same(const Trace& shared, const Trace& lone, const char* what) {
  ASSERT_EQ(shared.logits.size(), lone.logits.size()) << what;
  for (size_t i = 0; i < lone.logits.size(); ++i) {
    EXPECT_LT(max_diff(shared.logits[i], lone.logits[i]), 2e-3) << what << ", decode " << i;
  }
  ASSERT_EQ(shared.rows.size(), lone.rows.size()) << what;
  for (size_t i = 0; i < lone.rows.size(); ++i) {
    ASSERT_EQ(shared.rows[i].size(), lone.rows[i].size());
    for (size_t k = 0; k < lone.rows[i].size(); ++k) {
      EXPECT_LT(max_diff(shared.rows[i][k], lone.rows[i][k]), 1e-4) << what << ", step " << i << " head " << k;
    }
  }
  EXPECT_EQ(shared.reused, lone.reused) << what;
}

TEST_F(Qwen3AsrShared, StreamsOnSlotsDecodeAsAloneAndShareTheirSteps) {
  const std::span<const float> a(speech), b = std::span<const float>(speech).subspan(16000);
  const std::vector<size_t> ends_a = {3 * 16000, 4 * 16000, 4 * 16000 + 9000};
  const std::vector<size_t> ends_b = {2 * 16000 + 5000, 3 * 16000 + 5000, 5 * 16000};
  constexpr int kSteps = 5;
  Trace lone_a, lone_b;
  {
    Session sa(model, kHeads), sb(model, kHeads);
    lone_a = run_stream(sa, a, ends_a, kSteps);
    lone_b = run_stream(sb, b, ends_b, kSteps);
  }
  auto shared = std::make_shared<SharedContext>(model, 2, 1024);
  Session sa(model, kHeads, 1024, shared), sb(model, kHeads, 1024, shared);
  ASSERT_TRUE(sa.shares_context());
  ASSERT_TRUE(sb.shares_context());
  std::latch ready(2);
  Trace got_a, got_b;
  std::thread ta([&] { got_a = run_stream(sa, a, ends_a, kSteps, &ready); });
  std::thread tb([&] { got_b = run_stream(sb, b, ends_b, kSteps, &ready); });
  ta.join();
  tb.join();
  expect_same(got_a, lone_a, "stream a");
  expect_same(got_b, lone_b, "stream b");
  // The later passes kept their prompt's rows before the first changed one, in the slot as alone.
  EXPECT_GT(got_a.reused[1], 0);
  // Both were in their passes before the first pass's steps: each of those rounds held both streams.
  const SharedContext::Counts c = shared->counts();
  EXPECT_GE(c.round_streams[1], kSteps);
  EXPECT_EQ(c.calls, 2 * static_cast<int64_t>(ends_a.size()) * (1 + kSteps));
  // Their prompts (b's 0.7 s shorter at first, then kept rows and a few new ones)
  // went as rounds of both, the shorter padded (rows that changed nothing above):
  // every round held both streams.
  EXPECT_GT(c.pad_rows, 0);
  EXPECT_EQ(c.round_streams[1], c.rounds);
}

TEST_F(Qwen3AsrShared, AStreamWhosePassEndedHoldsNoOne) {
  auto shared = std::make_shared<SharedContext>(model, 2, 1024);
  Session idle(model, kHeads, 1024, shared), busy(model, kHeads, 1024, shared);
  idle.encode(std::span<const float>(speech).first(2 * 16000));
  idle.prefill({"", "English", {}});  // in its pass: the others' next batch would wait for its call
  idle.end_pass();                    // ... until its pass says it ended
  busy.encode(std::span<const float>(speech).first(3 * 16000));
  int32_t token = busy.prefill({"", "English", {}});
  for (int k = 0; k < 4; ++k) token = busy.step(token);  // alone: would block forever if idle still held the batch
  EXPECT_EQ(busy.n_past(), busy.last_prefill().tokens + 4);
  EXPECT_EQ(shared->counts().round_streams[1], 0);
}

TEST_F(Qwen3AsrShared, WithEverySlotTakenAStreamGetsAContextOfItsOwn) {
  auto shared = std::make_shared<SharedContext>(model, 1, 512);
  auto first = std::make_unique<Session>(model, kHeads, 512, shared);
  Session second(model, kHeads, 512, shared), wide(model, kHeads, 1024, shared);
  EXPECT_TRUE(first->shares_context());
  EXPECT_FALSE(second.shares_context());
  EXPECT_FALSE(wide.shares_context());  // longer than a slot
  for (Session* s : {first.get(), &second}) {
    s->encode(std::span<const float>(speech).first(16000));
    s->step(s->prefill({"", "English", {}}));
    s->end_pass();
  }
  EXPECT_LT(max_diff(first->logits(), second.logits()), 2e-3);
  // A slot's session gone, the next one takes the slot, its cells dropped at its first decode.
  const std::vector<float> before = first->logits();
  first.reset();
  Session again(model, kHeads, 512, shared);
  ASSERT_TRUE(again.shares_context());
  again.encode(std::span<const float>(speech).first(16000));
  again.step(again.prefill({"", "English", {}}));
  again.end_pass();
  EXPECT_EQ(again.last_prefill().reused, 0);
  EXPECT_LT(max_diff(again.logits(), before), 1e-6);
}

TEST_F(Qwen3AsrShared, ASharedContextNeedsASlotOfAPosition) {
  EXPECT_THROW(SharedContext(model, 0, 512), Error);
  EXPECT_THROW(SharedContext(model, 2, 0), Error);
}

}  // namespace
}  // namespace earshot::qwen3asr
