// runtime::KvCache on the CPU backend: every operation moves exactly the
// positions it names (all layers, K and V) and nothing else, in f32 and f16.
#include "model/runtime/kv_cache.h"

#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/error.h"

namespace earshot::runtime {
namespace {

struct BackendDeleter {
  void operator()(ggml_backend_t b) const { ggml_backend_free(b); }
};

class KvCacheTest : public ::testing::TestWithParam<ggml_type> {
 protected:
  static constexpr int kLayers = 3, kEmbd = 8, kCtx = 10;

  void SetUp() override {
    backend_.reset(ggml_backend_cpu_init());
    ggml_backend_cpu_set_n_threads(backend_.get(), 2);
  }
  KvCacheShape shape(int n_scratch = 2) const { return {kLayers, kEmbd, kCtx, GetParam(), n_scratch}; }

  // Element indices of the documented layout: per layer, per sequence; K rows of
  // positions, V transposed (rows of channels).
  static size_t k_index(int cap, int layer, int seq, int pos, int c) {
    return ((static_cast<size_t>(layer) * cap + seq) * kCtx + pos) * kEmbd + c;
  }
  static size_t v_index(int cap, int layer, int seq, int pos, int c) {
    return ((static_cast<size_t>(layer) * cap + seq) * kEmbd + c) * kCtx + pos;
  }
  // A value naming its place (exact in f16: integers below 2048).
  static float value(int layer, int seq, int pos, int c, bool is_v) {
    return static_cast<float>((layer * 331 + seq * 97 + pos * 17 + c * 5 + (is_v ? 1 : 0)) % 2039);
  }

  static std::vector<float> read(ggml_tensor* t) {
    const size_t n = ggml_nelements(t);
    std::vector<float> out(n);
    if (t->type == GGML_TYPE_F32) {
      ggml_backend_tensor_get(t, out.data(), 0, n * sizeof(float));
    } else {
      std::vector<ggml_fp16_t> half(n);
      ggml_backend_tensor_get(t, half.data(), 0, n * sizeof(ggml_fp16_t));
      ggml_fp16_to_fp32_row(half.data(), out.data(), static_cast<int64_t>(n));
    }
    return out;
  }
  static void write(ggml_tensor* t, const std::vector<float>& values) {
    if (t->type == GGML_TYPE_F32) {
      ggml_backend_tensor_set(t, values.data(), 0, values.size() * sizeof(float));
    } else {
      std::vector<ggml_fp16_t> half(values.size());
      ggml_fp32_to_fp16_row(values.data(), half.data(), static_cast<int64_t>(values.size()));
      ggml_backend_tensor_set(t, half.data(), 0, half.size() * sizeof(ggml_fp16_t));
    }
  }
  // Fills every position of every sequence with value(layer, seq, ...).
  static void fill(KvCache& kv) {
    const int cap = kv.capacity();
    std::vector<float> k(ggml_nelements(kv.k())), v(ggml_nelements(kv.v()));
    for (int l = 0; l < kLayers; ++l) {
      for (int s = 0; s < cap; ++s) {
        for (int p = 0; p < kCtx; ++p) {
          for (int c = 0; c < kEmbd; ++c) {
            k[k_index(cap, l, s, p, c)] = value(l, s, p, c, false);
            v[v_index(cap, l, s, p, c)] = value(l, s, p, c, true);
          }
        }
      }
    }
    write(kv.k(), k);
    write(kv.v(), v);
  }
  // Sequence seq's first n positions hold what fill() put in sequence `from`.
  static void expect_holds(KvCache& kv, int seq, int from, int n) {
    const int cap = kv.capacity();
    const std::vector<float> k = read(kv.k()), v = read(kv.v());
    for (int l = 0; l < kLayers; ++l) {
      for (int p = 0; p < n; ++p) {
        for (int c = 0; c < kEmbd; ++c) {
          ASSERT_EQ(k[k_index(cap, l, seq, p, c)], value(l, from, p, c, false)) << l << " " << seq << " " << p;
          ASSERT_EQ(v[v_index(cap, l, seq, p, c)], value(l, from, p, c, true)) << l << " " << seq << " " << p;
        }
      }
    }
  }

  std::unique_ptr<ggml_backend, BackendDeleter> backend_;
};

TEST_P(KvCacheTest, ReorderGivesEverySequenceItsSourcesPositionsAndLength) {
  KvCache kv(backend_.get(), shape(), 4);
  ASSERT_EQ(kv.capacity(), 4);
  fill(kv);
  const int lengths[] = {5, 3, 0, 7};
  for (int s = 0; s < 4; ++s) kv.set_length(s, lengths[s]);
  // A fan-out (0 twice), a sequence moved away (1), one overwritten that is a source (0, 3).
  const std::vector<int> source = {3, 0, 0, 1};
  kv.reorder(source);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(kv.length(s), lengths[source[s]]) << s;
    expect_holds(kv, s, source[s], lengths[source[s]]);
  }
}

TEST_P(KvCacheTest, SwapsAndCyclesReadNoSequenceAlreadyOverwritten) {
  KvCache kv(backend_.get(), shape(), 3);
  fill(kv);
  for (int s = 0; s < 3; ++s) kv.set_length(s, kCtx);
  const std::vector<int> cycle = {1, 2, 0};
  kv.reorder(cycle);
  for (int s = 0; s < 3; ++s) expect_holds(kv, s, cycle[s], kCtx);
  const std::vector<int> swap = {1, 0};  // a prefix of the sequences: sequence 2 stays
  kv.reorder(swap);
  expect_holds(kv, 0, cycle[1], kCtx);
  expect_holds(kv, 1, cycle[0], kCtx);
  expect_holds(kv, 2, cycle[2], kCtx);
}

TEST_P(KvCacheTest, CopyAndRemoveSuffixTouchOnlyTheirSequence) {
  KvCache kv(backend_.get(), shape(), 3);
  fill(kv);
  kv.set_length(0, 6);
  kv.set_length(1, 2);
  kv.set_length(2, 4);
  kv.copy(0, 2);
  EXPECT_EQ(kv.length(2), 6);
  expect_holds(kv, 2, 0, 6);
  expect_holds(kv, 0, 0, kCtx);
  expect_holds(kv, 1, 1, kCtx);
  kv.remove_suffix(2, 3);
  EXPECT_EQ(kv.length(2), 3);
  EXPECT_EQ(kv.length(0), 6);
  EXPECT_THROW(kv.remove_suffix(2, 4), Error);  // only a suffix can go
  EXPECT_THROW(kv.copy(0, 3), Error);
  kv.clear();
  for (int s = 0; s < 3; ++s) EXPECT_EQ(kv.length(s), 0);
}

TEST_P(KvCacheTest, ScratchRestoresTheSavedPositionsAndNothingElseMoves) {
  KvCache kv(backend_.get(), shape(/*n_scratch=*/2), 3);
  fill(kv);
  const std::vector<float> k_before = read(kv.k()), v_before = read(kv.v());
  kv.save_to_scratch(1, 4, 2);
  // A step overwrites those positions (here: sequence 2's values written over them).
  std::vector<float> k = k_before, v = v_before;
  for (int l = 0; l < kLayers; ++l) {
    for (int p = 4; p < 6; ++p) {
      for (int c = 0; c < kEmbd; ++c) {
        k[k_index(3, l, 1, p, c)] = value(l, 2, p, c, false);
        v[v_index(3, l, 1, p, c)] = value(l, 2, p, c, true);
      }
    }
  }
  write(kv.k(), k);
  write(kv.v(), v);
  ASSERT_NE(read(kv.k()), k_before);
  kv.restore_from_scratch(1, 4, 2);
  EXPECT_EQ(read(kv.k()), k_before);
  EXPECT_EQ(read(kv.v()), v_before);
  EXPECT_THROW(kv.save_to_scratch(1, 4, 3), Error);  // more than the scratch holds
  EXPECT_THROW(kv.save_to_scratch(1, kCtx - 1, 2), Error);
}

TEST_P(KvCacheTest, ReserveGrowsEmptyAndKeepsASmallerRequest) {
  KvCache kv(backend_.get(), shape(), 1);
  EXPECT_EQ(kv.capacity(), 1);
  kv.set_length(0, 4);
  kv.reserve(1);
  EXPECT_EQ(kv.length(0), 4);
  kv.reserve(5);
  EXPECT_EQ(kv.capacity(), 5);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(kv.length(s), 0);
  kv.reserve(2);
  EXPECT_EQ(kv.capacity(), 5);
  EXPECT_THROW(kv.reserve(0), Error);
  EXPECT_THROW(kv.length(5), Error);
  EXPECT_THROW(kv.set_length(0, kCtx + 1), Error);
  const std::vector<int> bad = {0, 5};
  EXPECT_THROW(kv.reorder(bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Types, KvCacheTest, ::testing::Values(GGML_TYPE_F32, GGML_TYPE_F16),
                         [](const ::testing::TestParamInfo<ggml_type>& info) {
                           return std::string(ggml_type_name(info.param));
                         });

TEST(KvCacheShapes, BadShapesAreRejected) {
  std::unique_ptr<ggml_backend, BackendDeleter> backend(ggml_backend_cpu_init());
  EXPECT_THROW(KvCache(backend.get(), {0, 8, 10, GGML_TYPE_F16, 1}), Error);
  EXPECT_THROW(KvCache(backend.get(), {1, 8, 10, GGML_TYPE_F16, 11}), Error);
  EXPECT_THROW(KvCache(backend.get(), {1, 8, 10, GGML_TYPE_Q8_0, 1}), Error);
  EXPECT_THROW(KvCache(nullptr, {1, 8, 10, GGML_TYPE_F16, 1}), Error);
}

}  // namespace
}  // namespace earshot::runtime
