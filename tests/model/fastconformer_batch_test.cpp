// The batched streaming step (streaming_batch.h): several cache-aware streams'
// chunks in one graph give each stream exactly its lone step's frames (bit for
// bit where ggml's x86 CPU products give a column the same value whatever the
// number of columns, i.e. without llamafile; with llamafile a one-column product,
// such as a lone 80 ms chunk's, takes ggml's dot products and a batch tinyBLAS,
// so frames agree to rounding: decode_compare.h), at different positions, lookaheads and piece sizes, with streams
// joining and leaving, in rotating orders, on f32, f16 and q8_0 weights; the
// rendezvous batcher gives streams on threads their lone frames; a bad step
// fails alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <tuple>

#include "decode_compare.h"
#include "error_of.h"
#include "features/nemo_mel_stream.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/random_model.h"
#include "model/fastconformer/streaming_batch.h"
#include "model/fastconformer/streaming_encoder.h"
#include "model/runtime/device.h"
#include "model/runtime/openblas_ops.h"
#include "model_test_util.h"

namespace earshot::fastconformer {
namespace {

using earshot::testing::error_of;
using whisper::testing::TempDir;

// Encoder frames (O(1) values, layer-normed): with llamafile, batched and lone
// differ by float rounding only, carried through the layers: measured at most
// 7e-4 on f16 weights (f32 and q8_0 less); 2e-3 leaves room.
constexpr float kRoundingFrames = 2e-3f;

void expect_same_frames(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (earshot::testing::across_batch_widths() == earshot::testing::Exactness::kBitForBit) {
    EXPECT_EQ(got, want) << what;
  } else {
    EXPECT_LT(earshot::testing::max_abs_difference(got, want), kRoundingFrames) << what;
  }
}

std::shared_ptr<const Model> streaming_model(const TempDir& dir, ggml_type type, unsigned seed = 3) {
  RandomModelOptions o;
  o.streaming = true;
  o.seed = seed;
  o.matrix_type = type;
  ModelData data = random_model(o);
  // Rows that are not whole blocks of the type (pre_encode.out at small dims: 17 x 16) stay f32.
  for (runtime::ExpectedTensor& t : data.tensors)
    if (t.type != GGML_TYPE_F32 && t.ne[0] % ggml_blck_size(t.type) != 0) t.type = GGML_TYPE_F32;
  const auto path = dir / ("nemotron-" + std::string(ggml_type_name(type)) + ".gguf");
  write_gguf(path, data);
  return Model::load(path);
}

// A stream's mel (noise-like, its own seed): [frames][n_mels].
std::vector<float> random_mel(int n_frames, int n_mels, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> mel(static_cast<size_t>(n_frames) * n_mels);
  for (float& v : mel) v = normal(rng);
  return mel;
}

// A stream of the test: its lookahead, mel, the pieces it arrives in, the round it joins.
struct Plan {
  int right = 0;
  int joins = 0;
  std::vector<float> mel;
  std::vector<int> pieces;  // mel frames per round
};

std::vector<Plan> plans(int n_mels) {
  const int rights[] = {0, 1, 6, 13, 0, 6};
  std::vector<Plan> out;
  for (int s = 0; s < 6; ++s) {
    Plan p;
    p.right = rights[s];
    p.joins = 2 * s;  // later streams join later: every step mixes positions
    const int n_frames = 150 + 37 * s;
    p.mel = random_mel(n_frames, n_mels, 100 + s);
    std::mt19937 rng(7 + s);
    std::uniform_int_distribution<int> size(1, 14 + 6 * s);  // from a frame to several chunks a round
    for (int done = 0; done < n_frames;) {
      const int n = std::min(size(rng), n_frames - done);
      p.pieces.push_back(n);
      done += n;
    }
    out.push_back(std::move(p));
  }
  return out;
}

// Stream s alone: every piece pushed, then finished; the frames in order.
std::vector<float> lone(const std::shared_ptr<const Model>& model, ggml_backend_t backend, const Plan& p,
                        runtime::CpuKernels kernels = runtime::CpuKernels::kGgml) {
  const int n_mels = model->hparams().n_mels;
  StreamingEncoder encoder(model, backend, {.right_context = p.right, .cpu_kernels = kernels});
  std::vector<float> frames;
  size_t at = 0;
  for (int n : p.pieces) {
    const EncoderOutput out = encoder.push(std::span<const float>(p.mel).subspan(at * n_mels, size_t(n) * n_mels), n);
    frames.insert(frames.end(), out.data.begin(), out.data.end());
    at += n;
  }
  const EncoderOutput rest = encoder.finish();
  frames.insert(frames.end(), rest.data.begin(), rest.data.end());
  return frames;
}

// The weight type, and the products' kernels: ggml's, or kAuto's few-row op
// (runtime/rows_ops.h: every row's value is its lone product's, whatever the rows).
using BatchCase = std::tuple<ggml_type, runtime::CpuKernels>;
class FastConformerBatch : public ::testing::TestWithParam<BatchCase> {};

TEST_P(FastConformerBatch, BatchedStepsEqualLoneStepsBitForBit) {
  const auto [type, kernels] = GetParam();
  TempDir dir("nemotron-batch");
  const auto model = streaming_model(dir, type);
  const int n_mels = model->hparams().n_mels;
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 2);
  const std::vector<Plan> streams = plans(n_mels);
  std::vector<std::vector<float>> want;
  for (const Plan& p : streams) want.push_back(lone(model, backend.get(), p, kernels));

  StreamingBatchExecutor executor(model, 2, kernels);
  std::vector<std::unique_ptr<StreamingEncoder>> encoders;
  for (const Plan& p : streams)
    encoders.push_back(std::make_unique<StreamingEncoder>(
        model, backend.get(), EncoderOptions{.right_context = p.right, .cpu_kernels = kernels}));
  std::vector<std::vector<float>> got(streams.size());
  std::vector<size_t> next_piece(streams.size(), 0), at(streams.size(), 0);
  std::vector<bool> finished(streams.size(), false);
  for (int round = 0; std::find(finished.begin(), finished.end(), false) != finished.end(); ++round) {
    // This round's live streams, in an order that rotates every round.
    std::vector<int> live, ending;
    for (size_t s = 0; s < streams.size(); ++s) {
      if (finished[s] || round < streams[s].joins) continue;
      const Plan& p = streams[s];
      if (next_piece[s] < p.pieces.size()) {
        const int n = p.pieces[next_piece[s]++];
        encoders[s]->append_mel(std::span<const float>(p.mel).subspan(at[s] * n_mels, size_t(n) * n_mels), n);
        at[s] += n;
        live.push_back(static_cast<int>(s));
      } else {
        ending.push_back(static_cast<int>(s));
      }
    }
    auto step = [&](std::vector<int> ids, bool end) {
      if (ids.empty()) return;
      std::rotate(ids.begin(), ids.begin() + round % ids.size(), ids.end());
      std::vector<StreamingEncoder*> e;
      for (int s : ids) e.push_back(encoders[s].get());
      std::vector<EncoderOutput> outs(ids.size());
      executor.run_ready(e, outs, end);
      for (size_t i = 0; i < ids.size(); ++i) {
        EXPECT_EQ(outs[i].n_frames * model->hparams().n_state, static_cast<int>(outs[i].data.size()));
        got[ids[i]].insert(got[ids[i]].end(), outs[i].data.begin(), outs[i].data.end());
      }
    };
    step(live, false);
    // A stream whose mel is all in leaves (its last steps batched with the others that end now).
    step(ending, true);
    for (int s : ending) finished[s] = true, encoders[s]->reset();
  }
  EXPECT_LT(executor.graphs(), executor.steps()) << "no step was batched";
  for (size_t s = 0; s < streams.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size()) << "stream " << s;
    ASSERT_FALSE(want[s].empty());
    expect_same_frames(got[s], want[s], "stream " + std::to_string(s) + " (" + ggml_type_name(type) + ")");
  }
}

INSTANTIATE_TEST_SUITE_P(Types, FastConformerBatch,
                         // ggml's kernels on each type; the few-row op on the types models ship in.
                         ::testing::Values(std::tuple{GGML_TYPE_F32, runtime::CpuKernels::kGgml},
                                           std::tuple{GGML_TYPE_F16, runtime::CpuKernels::kGgml},
                                           std::tuple{GGML_TYPE_Q8_0, runtime::CpuKernels::kGgml},
                                           std::tuple{GGML_TYPE_F16, runtime::CpuKernels::kAuto},
                                           std::tuple{GGML_TYPE_Q8_0, runtime::CpuKernels::kAuto}),
                         [](const auto& info) {
                           return std::string(ggml_type_name(std::get<0>(info.param))) + "_" +
                                  std::string(runtime::to_string(std::get<1>(info.param)));
                         });

TEST(FastConformerBatchErrors, ABadStepFailsAloneAndTheOthersRun) {
  TempDir dir("nemotron-batch");
  const auto model = streaming_model(dir, GGML_TYPE_F32);
  const auto other = streaming_model(dir, GGML_TYPE_F16);
  const int n_mels = model->hparams().n_mels;
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 1);
  Plan p;
  p.right = 1;
  p.mel = random_mel(40, n_mels, 5);
  p.pieces = {40};
  // The reference: the same step alone (the end of a 40-frame stream).
  StreamingEncoder reference(model, backend.get(), {.right_context = 1});
  reference.append_mel(p.mel, 40);
  const std::vector<float> want = reference.finish().data;
  StreamingEncoder good(model, backend.get(), {.right_context = 1});
  StreamingEncoder stranger(other, backend.get(), {.right_context = 1});
  good.append_mel(p.mel, 40);
  stranger.append_mel(p.mel, 40);
  StreamingBatchExecutor executor(model, 1);
  EncoderOutput out_good, out_stranger, out_twice;
  StreamingBatchExecutor::Item items[3];
  items[0].encoder = &stranger, items[0].out = &out_stranger;
  items[1].encoder = &good, items[1].out = &out_good;
  items[2].encoder = &good, items[2].out = &out_twice;
  int t0, t1;
  bool at_end;
  ASSERT_TRUE(good.next_step(true, t0, t1, at_end));
  for (auto& item : items) item.t0 = t0, item.t1 = t1, item.at_end = at_end;
  executor.run(items);
  EXPECT_TRUE(items[0].error);
  EXPECT_FALSE(items[1].error);
  EXPECT_TRUE(items[2].error);
  EXPECT_EQ(out_stranger.n_frames, 0);
  EXPECT_EQ(out_twice.n_frames, 0);
  expect_same_frames(out_good.data, want, "the good step");
  EXPECT_EQ(stranger.frames_done(), 0);  // untouched
  // An encoder cannot take a batcher on another model.
  auto batcher = std::make_shared<StreamingBatcher>(model, 4, 1);
  EXPECT_EQ(error_of([&] { StreamingEncoder(other, backend.get(), {}, batcher); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { StreamingBatcher(model, 0, 1); }).code(), ErrorCode::kInvalidArgument);
}

TEST(FastConformerBatchErrors, StreamsOnThreadsThroughTheBatcherGetTheirLoneFrames) {
  TempDir dir("nemotron-batch");
  const auto model = streaming_model(dir, GGML_TYPE_F16);
  const int n_mels = model->hparams().n_mels;
  ggml_backend_ptr backend = runtime::create_backend(nullptr, 1);
  const std::vector<Plan> streams = plans(n_mels);
  std::vector<std::vector<float>> want;
  for (const Plan& p : streams) want.push_back(lone(model, backend.get(), p));
  auto batcher = std::make_shared<StreamingBatcher>(model, 4, 1);
  std::vector<std::vector<float>> got(streams.size());
  std::vector<std::thread> threads;
  for (size_t s = 0; s < streams.size(); ++s) {
    threads.emplace_back([&, s] {
      const Plan& p = streams[s];
      StreamingEncoder encoder(model, nullptr, {.right_context = p.right}, batcher);
      size_t at = 0;
      for (int n : p.pieces) {
        const EncoderOutput out =
            encoder.push(std::span<const float>(p.mel).subspan(at * n_mels, size_t(n) * n_mels), n);
        got[s].insert(got[s].end(), out.data.begin(), out.data.end());
        at += n;
      }
      const EncoderOutput rest = encoder.finish();
      got[s].insert(got[s].end(), rest.data.begin(), rest.data.end());
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t s = 0; s < streams.size(); ++s) expect_same_frames(got[s], want[s], "stream " + std::to_string(s));
  const StreamingBatcher::Counts c = batcher->counts();
  EXPECT_GE(c.steps, c.graphs);
  EXPECT_LE(c.max_batch, 4);
  EXPECT_GT(c.steps, 0);
}

}  // namespace
}  // namespace earshot::fastconformer
