// Decoder steps of several sessions in one graph (BatchExecutor, DecodeBatcher):
// every session's results equal what its own decode() gives, bit for bit (with
// ggml's llamafile kernels, to rounding: decode_compare.h), on
// random models of each weight kind, with greedy and beam sessions at different
// lengths and audio sizes, shared prompts, logits positions, vocabulary limits
// and attention on or off; a bad request fails alone; sessions decoding on
// several threads through one batcher get their own results.
#include "model/whisper/batch_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <tuple>

#include "common/error.h"
#include "decode_compare.h"
#include "model/whisper/session.h"
#include "model_test_util.h"

namespace earshot::whisper {
namespace {

using testing::noise_audio;
using testing::small_spec;
using testing::TempDir;

void expect_same(const DecodeResult& a, const DecodeResult& b, const std::string& what) {
  earshot::testing::expect_same_decode(a, b, what, earshot::testing::across_batch_widths());
}

DecodeRequest request(std::vector<std::vector<int32_t>> tokens, std::vector<int> positions = {}, bool attention = true,
                      int vocabulary_limit = 0) {
  DecodeRequest r;
  r.tokens = std::move(tokens);
  r.logits_positions = std::move(positions);
  r.want_attention = attention;
  r.vocabulary_limit = vocabulary_limit;
  return r;
}

// One stream's script: its audio, beams, and per step the request plus what to do
// to the cache before it (a reorder or a rollback), so every stream is at its own
// length when the steps are batched.
struct Stream {
  size_t samples = 0;
  uint32_t seed = 0;
  int beams = 1;
  std::vector<DecodeRequest> steps;
  std::vector<std::vector<int>> reorders;  // before step i (empty: none)
  std::vector<int> rollbacks;              // before step i (-1: none)
};

std::vector<Stream> streams() {
  const int sot = 50257;
  std::vector<Stream> out(4);
  // Greedy, a 3-token prompt with two logits positions, then single steps, a rollback.
  out[0] = {3000, 1, 1, {}, {}, {}};
  out[0].steps = {request({{sot, 220, 1000}}, {0, 2}), request({{11}}), request({{12}}, {}, false),
                  request({{13}}, {}, true, 50257), request({{14}})};
  out[0].rollbacks = {-1, -1, -1, 3, -1};
  // Three beams sharing a 2-token prompt (computed once), then diverging with reorders.
  out[1] = {5000, 2, 3, {}, {}, {}};
  out[1].steps = {request({{sot, 50362}, {sot, 50362}, {sot, 50362}}, {}, true, 50257),
                  request({{21}, {22}, {23}}, {}, true, 50257), request({{24}, {25}, {26}}),
                  request({{27}, {28}, {29}}, {}, false), request({{30}, {31}, {32}}, {}, true, 50257)};
  out[1].reorders = {{}, {}, {2, 0, 0}, {1, 1, 2}, {}};
  // Two beams with different prompts (not shared), 4 tokens, every position's logits.
  out[2] = {1000, 3, 2, {}, {}, {}};
  out[2].steps = {request({{sot, 400, 401, 402}, {sot, 500, 501, 502}}, {0, 1, 2, 3}), request({{41}, {42}}),
                  request({{43, 44}, {45, 46}}, {1}), request({{47}, {48}}, {}, true, 1000), request({{49}, {50}})};
  out[2].reorders = {{}, {1, 0}, {}, {0, 0}, {}};
  // Greedy on the longest audio, a single-token prompt, without attention.
  out[3] = {7680, 4, 1, {}, {}, {}};
  out[3].steps = {request({{sot}}, {}, false), request({{61}}, {}, false), request({{62}}),
                  request({{63, 64, 65}}, {0, 2}), request({{66}}, {}, false, 50257)};
  for (Stream& s : out) {
    s.reorders.resize(s.steps.size());
    s.rollbacks.resize(s.steps.size(), -1);
  }
  return out;
}

SessionOptions options_for(std::shared_ptr<DecodeBatcher> batcher = nullptr, int threads = 2,
                           runtime::CpuKernels kernels = runtime::CpuKernels::kGgml) {
  SessionOptions o;
  o.n_threads = threads;
  o.cpu_kernels = kernels;
  o.encoder_input = EncoderInput::kAudioOnly;  // a different encoder length per stream
  o.audio_bucket_frames = 8;
  o.audio_pad_frames = 0;
  o.batcher = std::move(batcher);
  return o;
}

void start(Session& s, const Stream& stream) {
  s.encode(noise_audio(stream.samples, stream.seed));
  s.reset(stream.beams);
}

void before_step(Session& s, const Stream& stream, size_t i) {
  if (!stream.reorders[i].empty()) s.reorder(stream.reorders[i]);
  if (stream.rollbacks[i] >= 0) s.rollback(stream.rollbacks[i]);
}

// Every stream decoded alone, step by step: the reference (and each stream's
// cache length after each step, in n_past when given).
std::vector<std::vector<DecodeResult>> decode_alone(const std::shared_ptr<const Model>& model,
                                                    const std::vector<Stream>& script,
                                                    std::vector<std::vector<int>>* n_past = nullptr, int threads = 2,
                                                    runtime::CpuKernels kernels = runtime::CpuKernels::kGgml) {
  std::vector<std::vector<DecodeResult>> out;
  for (const Stream& stream : script) {
    Session s(model, options_for(nullptr, threads, kernels));
    start(s, stream);
    out.emplace_back();
    if (n_past) n_past->emplace_back();
    for (size_t i = 0; i < stream.steps.size(); ++i) {
      before_step(s, stream, i);
      out.back().push_back(s.decode(stream.steps[i]));
      if (n_past) n_past->back().push_back(s.n_past());
    }
  }
  return out;
}

// The weight type, and the products' kernels: ggml's, or kAuto's few-row op
// (runtime/rows_ops.h: every row's value is its lone product's, whatever the rows).
using StepCase = std::tuple<ggml_type, runtime::CpuKernels>;
class BatchedStepTest : public ::testing::TestWithParam<StepCase> {};

TEST_P(BatchedStepTest, EverySessionsResultEqualsItsLoneDecode) {
  const auto [type, kernels] = GetParam();
  TempDir dir("batch-step");
  write_random_model(small_spec("tiny.en", type), dir / "m.bin");
  auto model = Model::load(dir / "m.bin");
  ASSERT_FALSE(model->alignment_heads().empty());
  const std::vector<Stream> script = streams();
  std::vector<std::vector<int>> n_past;
  const auto alone = decode_alone(model, script, &n_past, 2, kernels);

  std::vector<std::unique_ptr<Session>> sessions;
  for (const Stream& stream : script) {
    sessions.push_back(std::make_unique<Session>(model, options_for(nullptr, 2, kernels)));
    start(*sessions.back(), stream);
  }
  // The streams really differ in audio length (so in cross-attention shape).
  EXPECT_NE(sessions[0]->n_audio_frames(), sessions[3]->n_audio_frames());
  BatchExecutor executor(model, 2, kernels);
  for (size_t i = 0; i < script[0].steps.size(); ++i) {
    std::vector<BatchExecutor::Item> items;
    for (size_t k = 0; k < script.size(); ++k) {
      before_step(*sessions[k], script[k], i);
      items.push_back({sessions[k].get(), &script[k].steps[i], {}, nullptr});
    }
    executor.run(items);
    for (size_t k = 0; k < script.size(); ++k) {
      const std::string what = "stream " + std::to_string(k) + ", step " + std::to_string(i);
      ASSERT_FALSE(items[k].error) << what;
      expect_same(items[k].result, alone[k][i], what);
      EXPECT_EQ(sessions[k]->n_past(), n_past[k][i]) << what;
    }
  }
  // The comparison is not vacuous: streams and beams computed different logits.
  EXPECT_NE(alone[0].back().logits, alone[3].back().logits);
  EXPECT_NE(std::vector<float>(alone[1].back().logits_at(0), alone[1].back().logits_at(1)),
            std::vector<float>(alone[1].back().logits_at(1), alone[1].back().logits_at(2)));
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, BatchedStepTest,
                         // ggml's kernels on each type; the few-row op on the types models ship in.
                         ::testing::Values(std::tuple{GGML_TYPE_F32, runtime::CpuKernels::kGgml},
                                           std::tuple{GGML_TYPE_F16, runtime::CpuKernels::kGgml},
                                           std::tuple{GGML_TYPE_Q8_0, runtime::CpuKernels::kGgml},
                                           std::tuple{GGML_TYPE_F16, runtime::CpuKernels::kAuto},
                                           std::tuple{GGML_TYPE_Q8_0, runtime::CpuKernels::kAuto}),
                         [](const ::testing::TestParamInfo<StepCase>& info) {
                           return std::string(ggml_type_name(std::get<0>(info.param))) + "_" +
                                  std::string(runtime::to_string(std::get<1>(info.param)));
                         });

TEST(BatchedStep, ABadRequestFailsAloneAndTheOthersStillEqualTheirLoneDecode) {
  TempDir dir("batch-bad");
  write_random_model(small_spec(), dir / "m.bin");
  auto model = Model::load(dir / "m.bin");
  const std::vector<Stream> script = streams();
  const auto alone = decode_alone(model, script);
  std::vector<std::unique_ptr<Session>> sessions;
  for (const Stream& stream : script) {
    sessions.push_back(std::make_unique<Session>(model, options_for()));
    start(*sessions.back(), stream);
  }
  const DecodeRequest bad = request({{model->hparams().n_vocab + 5}});
  BatchExecutor executor(model, 1);
  std::vector<BatchExecutor::Item> items;
  for (size_t k = 0; k < 3; ++k) items.push_back({sessions[k].get(), &script[k].steps[0], {}, nullptr});
  items.insert(items.begin() + 1, {sessions[3].get(), &bad, {}, nullptr});
  items.push_back({sessions[0].get(), &script[0].steps[1], {}, nullptr});  // the same session twice
  executor.run(items);
  ASSERT_TRUE(items[1].error);
  EXPECT_THROW(std::rethrow_exception(items[1].error), Error);
  ASSERT_TRUE(items[4].error);
  EXPECT_EQ(sessions[3]->n_past(), 0);  // the failed request left its session as it was
  expect_same(items[0].result, alone[0][0], "stream 0");
  expect_same(items[2].result, alone[1][0], "stream 1");
  expect_same(items[3].result, alone[2][0], "stream 2");

  // A session on another model is refused, not computed against the wrong weights.
  write_random_model(small_spec("tiny.en", GGML_TYPE_F16, 99), dir / "other.bin");
  Session foreign(Model::load(dir / "other.bin"), options_for());
  start(foreign, script[3]);
  std::vector<BatchExecutor::Item> mixed{{&foreign, &script[3].steps[0], {}, nullptr}};
  executor.run(mixed);
  EXPECT_TRUE(mixed[0].error);
  EXPECT_EQ(foreign.n_past(), 0);
}

TEST(BatchedStep, AnyOrderAndGroupingOfTheStreamsGivesEachItsLoneResult) {
  // Every step batches the streams in another order and in pairs (the make-up of a
  // batch depends on arrival in the batcher).
  TempDir dir("batch-plan");
  write_random_model(small_spec(), dir / "m.bin");
  auto model = Model::load(dir / "m.bin");
  const std::vector<Stream> script = streams();
  const auto alone = decode_alone(model, script, nullptr, 1);
  std::vector<std::unique_ptr<Session>> sessions;
  for (const Stream& stream : script) {
    sessions.push_back(std::make_unique<Session>(model, options_for(nullptr, 1)));
    start(*sessions.back(), stream);
  }
  BatchExecutor executor(model, 1);
  const size_t n = script.size();
  for (size_t i = 0; i < script[0].steps.size(); ++i) {
    for (size_t k = 0; k < n; ++k) before_step(*sessions[k], script[k], i);
    std::vector<size_t> order(n);
    for (size_t k = 0; k < n; ++k) order[k] = (k + i) % n;
    if (i % 2) std::reverse(order.begin(), order.end());
    for (size_t half = 0; half < 2; ++half) {
      std::vector<BatchExecutor::Item> items;
      for (size_t j = half * n / 2; j < (half + 1) * n / 2; ++j) {
        items.push_back({sessions[order[j]].get(), &script[order[j]].steps[i], {}, nullptr});
      }
      executor.run(items);
      for (size_t j = 0; j < items.size(); ++j) {
        const size_t k = order[half * n / 2 + j];
        ASSERT_FALSE(items[j].error);
        expect_same(items[j].result, alone[k][i], "stream " + std::to_string(k) + ", step " + std::to_string(i));
      }
    }
  }
}

TEST(DecodeBatcher, SessionsOnSeveralThreadsGetTheirLoneResults) {
  TempDir dir("batcher");
  write_random_model(small_spec(), dir / "m.bin");
  auto model = Model::load(dir / "m.bin");
  const std::vector<Stream> script = streams();
  // One compute thread per graph: the run stays cheap under ThreadSanitizer (scripts/test.sh),
  // where ggml's OpenMP teams make every kernel a suppressed report.
  const auto alone = decode_alone(model, script, nullptr, 1);
  EXPECT_THROW(DecodeBatcher(model, 0, 1), Error);

  auto batcher = std::make_shared<DecodeBatcher>(model, 3, 1);  // fewer than the streams: batches split
  std::vector<std::vector<DecodeResult>> got(script.size());
  std::vector<std::exception_ptr> errors(script.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < script.size(); ++k) {
    threads.emplace_back([&, k] {
      try {
        Session s(model, options_for(batcher, 1));
        start(s, script[k]);
        for (int round = 0; round < 2; ++round) {  // twice: the second pass starts from a fresh encode
          if (round == 1) start(s, script[k]);
          got[k].clear();
          for (size_t i = 0; i < script[k].steps.size(); ++i) {
            before_step(s, script[k], i);
            got[k].push_back(s.decode(script[k].steps[i]));
          }
        }
        // A bad request through the batcher throws in its own thread only.
        EXPECT_THROW(s.decode(request({{-1}})), Error);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t k = 0; k < script.size(); ++k) {
    ASSERT_FALSE(errors[k]) << "stream " << k;
    ASSERT_EQ(got[k].size(), alone[k].size());
    for (size_t i = 0; i < got[k].size(); ++i) {
      expect_same(got[k][i], alone[k][i], "stream " + std::to_string(k) + ", step " + std::to_string(i));
    }
  }
  const DecodeBatcher::Counts counts = batcher->counts();
  EXPECT_EQ(counts.requests, static_cast<int64_t>(script.size() * (2 * script[0].steps.size() + 1)));
  EXPECT_GE(counts.graphs, counts.requests / 3);
}

}  // namespace
}  // namespace earshot::whisper
