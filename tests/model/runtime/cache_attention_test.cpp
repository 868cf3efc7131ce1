// runtime::key_scores (a few queries' scores against a long key cache) and
// runtime::head_values (each head's values against its probabilities) on every
// kernel path this CPU runs, each forced in turn (runtime::ScopedKernelCap):
// against the scores in double from the same keys and queries, within the f32
// accumulation's rounding; every score of a many-query, many-group op equal bit
// for bit to its query's lone op and to the same op on other thread counts (a
// batched step equals its lone steps); ggml's own product within its f16
// rounding; key counts that leave partial blocks; strided keys and permuted
// queries as the Whisper decoder passes them; grouped heads and streams with
// caches of their own as libllama's KV cache holds them (Qwen3-ASR's steps); and
// what it refuses.
#include "model/runtime/cache_attention.h"

#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "model/runtime/cpu_isa.h"
#include "ops_test_util.h"

namespace earshot::runtime {
namespace {

using testing::normal_values;

// A cache tensor [ne0, ne1] of `type` holding N(0, 1) values from `seed`; `held`
// gets the values it holds (after the type's rounding).
ggml_tensor* random_cache(ggml_context* ctx, ggml_type type, int64_t ne0, int64_t ne1, uint32_t seed,
                          std::vector<float>& held) {
  ggml_tensor* t = ggml_new_tensor_2d(ctx, type, ne0, ne1);
  held = normal_values(static_cast<size_t>(ne0 * ne1), seed);
  if (type == GGML_TYPE_F32) {
    std::memcpy(t->data, held.data(), held.size() * sizeof(float));
  } else {
    ggml_get_type_traits_cpu(type)->from_float(held.data(), t->data, ne0 * ne1);
    ggml_get_type_traits(type)->to_float(t->data, held.data(), ne0 * ne1);
  }
  return t;
}

// `out` computed on ggml's CPU backend with `threads` threads, as floats.
std::vector<float> compute(ggml_context* ctx, ggml_tensor* out, int threads) {
  ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, out);
  EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, graph, threads), GGML_STATUS_SUCCESS);
  const auto* p = static_cast<const float*>(out->data);
  return std::vector<float>(p, p + ggml_nelements(out));
}

// A cross cache as the Whisper decoder holds it: [n_state, F] per layer (each
// frame's heads side by side), viewed per head as [D, F, H]; queries as rows of
// [n_state, T * S] split into heads and permuted to [D, T, H, S].
class KeyScoresFixture {
 public:
  KeyScoresFixture(ggml_type type, int64_t D, int64_t F, int64_t H, int64_t T, int64_t S)
      : D_(D), F_(F), H_(H), T_(T), S_(S) {
    const size_t bytes = static_cast<size_t>(D * H * (F + T * S) * 16 + F * T * H * S * 16) + (4 << 20);
    ctx_.reset(ggml_init({bytes, nullptr, false}));
    cache_ = random_cache(ctx_.get(), type, D * H, F, 11, keys_);
    rows_ = ggml_new_tensor_2d(ctx_.get(), GGML_TYPE_F32, D * H, T * S);
    queries_ = normal_values(static_cast<size_t>(D * H * T * S), 12);
    std::memcpy(rows_->data, queries_.data(), queries_.size() * sizeof(float));
  }

  ggml_tensor* keys() {
    const size_t es = ggml_element_size(cache_);
    return ggml_view_3d(ctx_.get(), cache_, D_, F_, H_, cache_->nb[1], D_ * es, 0);
  }
  // Queries [row0, row0 + T * S) of the rows as [D, T, H, S].
  ggml_tensor* queries(int64_t T, int64_t S, int64_t row0 = 0) {
    ggml_tensor* v = ggml_view_4d(ctx_.get(), rows_, D_, H_, T, S, D_ * sizeof(float), rows_->nb[1], rows_->nb[1] * T,
                                  rows_->nb[1] * row0);
    return ggml_permute(ctx_.get(), v, 0, 2, 1, 3);
  }

  std::vector<float> run(int threads, int64_t T, int64_t S, int64_t row0 = 0) {
    ggml_tensor* q = queries(T, S, row0);
    EXPECT_TRUE(key_scores_supports(keys(), q));
    ggml_tensor* out = key_scores(ctx_.get(), keys(), q);
    EXPECT_EQ(out->ne[0], F_);
    EXPECT_EQ(out->ne[1], T);
    EXPECT_EQ(out->ne[2], H_);
    EXPECT_EQ(out->ne[3], S);
    return compute(ctx_.get(), out, threads);
  }
  std::vector<float> run_ggml(int threads) {
    return compute(ctx_.get(), ggml_mul_mat(ctx_.get(), keys(), queries(T_, S_)), threads);
  }

  // Score (f, t, h, s) in double from the values the cache holds.
  double expected(int64_t f, int64_t t, int64_t h, int64_t s) const {
    double sum = 0.0;
    const float* q = queries_.data() + (s * T_ + t) * D_ * H_ + h * D_;
    const float* k = keys_.data() + f * D_ * H_ + h * D_;
    for (int64_t d = 0; d < D_; ++d) sum += static_cast<double>(k[d]) * q[d];
    return sum;
  }
  double magnitude(int64_t f, int64_t t, int64_t h, int64_t s) const {
    double sum = 0.0;
    const float* q = queries_.data() + (s * T_ + t) * D_ * H_ + h * D_;
    const float* k = keys_.data() + f * D_ * H_ + h * D_;
    for (int64_t d = 0; d < D_; ++d) sum += std::fabs(static_cast<double>(k[d]) * q[d]);
    return sum;
  }

  void expect_near_reference(const std::vector<float>& out, double rel) const {
    size_t at = 0;
    for (int64_t s = 0; s < S_; ++s)
      for (int64_t h = 0; h < H_; ++h)
        for (int64_t t = 0; t < T_; ++t)
          for (int64_t f = 0; f < F_; ++f, ++at) {
            ASSERT_NEAR(out[at], expected(f, t, h, s), rel * magnitude(f, t, h, s) + 1e-6)
                << "f " << f << " t " << t << " h " << h << " s " << s;
          }
  }

  int64_t T() const { return T_; }
  int64_t S() const { return S_; }

 private:
  int64_t D_, F_, H_, T_, S_;
  ggml_context_ptr ctx_;
  ggml_tensor* cache_ = nullptr;
  ggml_tensor* rows_ = nullptr;
  std::vector<float> keys_, queries_;
};

struct Case {
  ggml_type type;
  int64_t D, F, H, T, S;
};

const Case kCases[] = {
    {GGML_TYPE_F16, 64, 1500, 6, 1, 1},  // tiny's step over the 30 s window
    {GGML_TYPE_F16, 64, 1500, 6, 3, 2},  // a prompt of 3 tokens, 2 sequences
    {GGML_TYPE_F32, 64, 37, 4, 2, 1},    // partial blocks, f32 cache
    {GGML_TYPE_F16, 64, 1, 2, 1, 1},     // one key
    {GGML_TYPE_F16, 32, 17, 3, 1, 3},    // one key past a block
    {GGML_TYPE_F16, 80, 250, 2, 4, 1},   // a head of 80 (a multiple of 16, not of 64)
};

// Each case against double on every kernel path this CPU runs, each forced in turn.
template <typename Fixture>
void expect_every_case_near_double_on_every_path() {
  for (CpuPath path : cpu_paths()) {
    ScopedKernelCap cap(path);
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(to_string(path)) + " " + ggml_type_name(c.type) + " D " + std::to_string(c.D) + " F " +
                   std::to_string(c.F));
      Fixture fx(c.type, c.D, c.F, c.H, c.T, c.S);
      fx.expect_near_reference(fx.run(2, c.T, c.S), 1e-5);
    }
  }
}

TEST(KeyScores, MatchesDoubleOnEveryPath) { expect_every_case_near_double_on_every_path<KeyScoresFixture>(); }

TEST(KeyScores, EveryScoreEqualsItsLoneQueryOnAnyThreadCount) {
  for (CpuPath path : cpu_paths()) {
    ScopedKernelCap cap(path);
    SCOPED_TRACE(std::string(to_string(path)));
    const int64_t T = 3, S = 2, F = 1500, H = 6;
    KeyScoresFixture fx(GGML_TYPE_F16, 64, F, H, T, S);
    const std::vector<float> all = fx.run(2, T, S);
    for (int threads : {1, 3, 4}) EXPECT_EQ(fx.run(threads, T, S), all) << threads << " threads";
    // Row r of the rows is token r % T of group r / T: alone, it is one token of one group.
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t t = 0; t < T; ++t) {
        const std::vector<float> lone = fx.run(1, 1, 1, s * T + t);
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t f = 0; f < F; ++f) {
            ASSERT_EQ(lone[h * F + f], all[((s * H + h) * T + t) * F + f]) << "s " << s << " t " << t << " h " << h;
          }
        }
      }
    }
  }
}

TEST(KeyScores, AgreesWithGgmlsProductWithinItsRounding) {
  // ggml rounds the queries to f16 for an f16 cache; the op keeps them f32.
  KeyScoresFixture fx(GGML_TYPE_F16, 64, 1500, 6, 2, 2);
  const std::vector<float> ours = fx.run(2, 2, 2), theirs = fx.run_ggml(2);
  ASSERT_EQ(ours.size(), theirs.size());
  double worst = 0.0;
  for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::fabs(double(ours[i]) - theirs[i]));
  EXPECT_LT(worst, 0.05);  // scores of magnitude ~8 with 64 products of f16-rounded queries
}

TEST(KeyScores, BlockKernelOnPlainArrays) {
  const std::vector<float> k = normal_values(16 * 64, 5), q = normal_values(64, 6);
  for (CpuPath path : cpu_paths()) {
    ScopedKernelCap cap(path);
    for (int n : {1, 7, 8, 9, 16}) {
      std::vector<float> out(16, -1.0f);
      key_scores_block(GGML_TYPE_F32, k.data(), 64 * sizeof(float), n, q.data(), 64, out.data());
      for (int i = 0; i < 16; ++i) {
        if (i >= n) {
          EXPECT_EQ(out[i], -1.0f) << "past the block's keys";
          continue;
        }
        double sum = 0.0;
        for (int d = 0; d < 64; ++d) sum += double(k[i * 64 + d]) * q[d];
        EXPECT_NEAR(out[i], sum, 1e-4) << to_string(path) << " n " << n << " key " << i;
      }
    }
  }
}

TEST(KeyScores, RefusesWhatItCannotTake) {
  ggml_context_ptr ctx(ggml_init({1 << 20, nullptr, true}));
  ggml_tensor* k = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F16, 64, 100, 4);
  ggml_tensor* q = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, 64, 1, 4);
  EXPECT_TRUE(key_scores_supports(k, q));
  ggml_tensor* odd = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F16, 24, 100, 4);
  ggml_tensor* q_odd = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, 24, 1, 4);
  EXPECT_FALSE(key_scores_supports(odd, q_odd));
  ggml_tensor* q8 = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_Q8_0, 64, 100, 4);
  EXPECT_FALSE(key_scores_supports(q8, q));
  ggml_tensor* heads = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, 64, 1, 2);
  EXPECT_FALSE(key_scores_supports(k, heads));
  EXPECT_THROW(key_scores(ctx.get(), q8, q), Error);
  std::vector<float> out(17);
  EXPECT_THROW(key_scores_block(GGML_TYPE_F32, out.data(), 4, 17, out.data(), 16, out.data()), Error);
}

// Values as the Whisper decoder holds them: [F, n_state] per layer (a row of
// frames per value), viewed per head as [F, D, H]; probabilities [F, T, H, S].
class HeadValuesFixture {
 public:
  HeadValuesFixture(ggml_type type, int64_t D, int64_t F, int64_t H, int64_t T, int64_t S)
      : D_(D), F_(F), H_(H), T_(T), S_(S) {
    ctx_.reset(ggml_init({static_cast<size_t>(F * (D * H + T * H * S * 4) * 16) + (4 << 20), nullptr, false}));
    cache_ = random_cache(ctx_.get(), type, F, D * H, 21, values_);
    probs_ = normal_values(static_cast<size_t>(F * T * H * S), 22);
    for (float& x : probs_) x = std::fabs(x) / static_cast<float>(F);
  }

  ggml_tensor* values() {
    const size_t es = ggml_element_size(cache_);
    return ggml_view_3d(ctx_.get(), cache_, F_, D_, H_, F_ * es, F_ * D_ * es, 0);
  }
  // The probabilities of queries [t0, t0 + T) of group s0 .. s0 + S: [F, T, H, S].
  ggml_tensor* probabilities(int64_t T, int64_t S, int64_t t0 = 0, int64_t s0 = 0) {
    ggml_tensor* p = ggml_new_tensor_4d(ctx_.get(), GGML_TYPE_F32, F_, T, H_, S);
    auto* out = static_cast<float*>(p->data);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H_; ++h)
        for (int64_t t = 0; t < T; ++t)
          std::memcpy(out + ((s * H_ + h) * T + t) * F_, probs_.data() + (((s0 + s) * H_ + h) * T_ + t0 + t) * F_,
                      F_ * sizeof(float));
    return p;
  }
  std::vector<float> run(int threads, int64_t T, int64_t S, int64_t t0 = 0, int64_t s0 = 0) {
    ggml_tensor* p = probabilities(T, S, t0, s0);
    EXPECT_TRUE(head_values_supports(values(), p));
    ggml_tensor* out = head_values(ctx_.get(), values(), p);
    EXPECT_EQ(out->ne[0], D_ * H_);
    EXPECT_EQ(out->ne[1], T * S);
    return compute(ctx_.get(), out, threads);
  }
  std::vector<float> run_ggml(int threads) {
    ggml_tensor* kqv = ggml_mul_mat(ctx_.get(), values(), probabilities(T_, S_));
    return compute(ctx_.get(), ggml_cont_2d(ctx_.get(), ggml_permute(ctx_.get(), kqv, 0, 2, 1, 3), D_ * H_, T_ * S_),
                   threads);
  }

  void expect_near_reference(const std::vector<float>& out, double rel) const {
    for (int64_t s = 0; s < S_; ++s)
      for (int64_t t = 0; t < T_; ++t)
        for (int64_t h = 0; h < H_; ++h)
          for (int64_t d = 0; d < D_; ++d) {
            double sum = 0.0, mag = 0.0;
            const float* p = probs_.data() + ((s * H_ + h) * T_ + t) * F_;
            const float* v = values_.data() + (h * D_ + d) * F_;
            for (int64_t f = 0; f < F_; ++f) {
              sum += static_cast<double>(p[f]) * v[f];
              mag += std::fabs(static_cast<double>(p[f]) * v[f]);
            }
            ASSERT_NEAR(out[(s * T_ + t) * D_ * H_ + h * D_ + d], sum, rel * mag + 1e-7)
                << "s " << s << " t " << t << " h " << h << " d " << d;
          }
  }

 private:
  int64_t D_, F_, H_, T_, S_;
  ggml_context_ptr ctx_;
  ggml_tensor* cache_ = nullptr;
  std::vector<float> values_, probs_;
};

TEST(HeadValues, MatchesDoubleOnEveryPath) { expect_every_case_near_double_on_every_path<HeadValuesFixture>(); }

TEST(HeadValues, EveryValueEqualsItsLoneQueryOnAnyThreadCount) {
  for (CpuPath path : cpu_paths()) {
    ScopedKernelCap cap(path);
    SCOPED_TRACE(std::string(to_string(path)));
    const int64_t T = 3, S = 2, D = 64, H = 6, width = D * H;
    HeadValuesFixture fx(GGML_TYPE_F16, D, 1500, H, T, S);
    const std::vector<float> all = fx.run(2, T, S);
    for (int threads : {1, 3, 4}) EXPECT_EQ(fx.run(threads, T, S), all) << threads << " threads";
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t t = 0; t < T; ++t) {
        const std::vector<float> lone = fx.run(1, 1, 1, t, s);
        const std::vector<float> row(all.begin() + (s * T + t) * width, all.begin() + (s * T + t + 1) * width);
        EXPECT_EQ(lone, row) << "s " << s << " t " << t;
      }
    }
  }
}

TEST(HeadValues, AgreesWithGgmlsProductWithinItsRounding) {
  // ggml rounds the probabilities to f16 for an f16 cache; the op keeps them f32.
  HeadValuesFixture fx(GGML_TYPE_F16, 64, 1500, 6, 2, 2);
  const std::vector<float> ours = fx.run(2, 2, 2), theirs = fx.run_ggml(2);
  ASSERT_EQ(ours.size(), theirs.size());
  double worst = 0.0;
  for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::fabs(double(ours[i]) - theirs[i]));
  EXPECT_LT(worst, 1e-3);  // sums of magnitude ~0.02-0.1
}

TEST(HeadValues, RefusesWhatItCannotTake) {
  ggml_context_ptr ctx(ggml_init({1 << 20, nullptr, true}));
  ggml_tensor* v = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F16, 100, 64, 4);
  ggml_tensor* p = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, 100, 1, 4);
  EXPECT_TRUE(head_values_supports(v, p));
  ggml_tensor* q8 = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_Q8_0, 96, 64, 4);
  ggml_tensor* p96 = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, 96, 1, 4);
  EXPECT_FALSE(head_values_supports(q8, p96));
  ggml_tensor* frames = ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, 99, 1, 4);
  EXPECT_FALSE(head_values_supports(v, frames));
  ggml_tensor* wide = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 101, 4);
  ggml_tensor* strided = ggml_view_3d(ctx.get(), wide, 100, 1, 4, wide->nb[1], wide->nb[1], 0);
  EXPECT_FALSE(head_values_supports(v, strided));
  EXPECT_THROW(head_values(ctx.get(), q8, p96), Error);
}

// libllama's KV cache as a Qwen3 decoder's step reads it: H query heads over Hk
// key and value heads (grouped-query attention), S streams each with its own
// cells (a shared context's slots); keys [D, F, Hk, S], values stored transposed
// [F, D, Hk, S], both F16. Against double from the values the cache holds.
TEST(CacheAttention, GroupedHeadsAndStreamsOfTheirOwnReadTheirHeadsAndCells) {
  const int64_t D = 32, F = 40, H = 4, Hk = 2, T = 2, S = 2, group = H / Hk;
  for (CpuPath path : cpu_paths()) {
    ScopedKernelCap cap(path);
    SCOPED_TRACE(std::string(to_string(path)));
    ggml_context_ptr ctx(ggml_init({16 << 20, nullptr, false}));
    std::vector<float> k_held, v_held;
    ggml_tensor* k_cache = random_cache(ctx.get(), GGML_TYPE_F16, D, F * Hk * S, 31, k_held);
    ggml_tensor* v_cache = random_cache(ctx.get(), GGML_TYPE_F16, F, D * Hk * S, 32, v_held);
    const size_t es = ggml_element_size(k_cache);
    ggml_tensor* k = ggml_view_4d(ctx.get(), k_cache, D, F, Hk, S, D * es, D * F * es, D * F * Hk * es, 0);
    ggml_tensor* v = ggml_view_4d(ctx.get(), v_cache, F, D, Hk, S, F * es, F * D * es, F * D * Hk * es, 0);
    ggml_tensor* q = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, D, T, H, S);
    const std::vector<float> queries = normal_values(static_cast<size_t>(D * T * H * S), 33);
    std::memcpy(q->data, queries.data(), queries.size() * sizeof(float));
    ASSERT_TRUE(key_scores_supports(k, q));
    const std::vector<float> scores = compute(ctx.get(), key_scores(ctx.get(), k, q), 2);
    ggml_tensor* p = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, F, T, H, S);
    std::vector<float> probs = normal_values(static_cast<size_t>(F * T * H * S), 34);
    for (float& x : probs) x = std::fabs(x) / static_cast<float>(F);
    std::memcpy(p->data, probs.data(), probs.size() * sizeof(float));
    ASSERT_TRUE(head_values_supports(v, p));
    const std::vector<float> out = compute(ctx.get(), head_values(ctx.get(), v, p), 2);
    ASSERT_EQ(out.size(), static_cast<size_t>(D * H * T * S));
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const int64_t hk = h / group;
          const float* qr = queries.data() + ((s * H + h) * T + t) * D;
          for (int64_t f = 0; f < F; ++f) {
            const float* kr = k_held.data() + ((s * Hk + hk) * F + f) * D;
            double sum = 0.0, mag = 0.0;
            for (int64_t d = 0; d < D; ++d) sum += double(kr[d]) * qr[d], mag += std::fabs(double(kr[d]) * qr[d]);
            ASSERT_NEAR(scores[static_cast<size_t>(((s * H + h) * T + t) * F + f)], sum, 1e-5 * mag + 1e-6)
                << "score s " << s << " h " << h << " t " << t << " f " << f;
          }
          const float* pr = probs.data() + ((s * H + h) * T + t) * F;
          for (int64_t d = 0; d < D; ++d) {
            const float* vr = v_held.data() + ((s * Hk + hk) * D + d) * F;
            double sum = 0.0, mag = 0.0;
            for (int64_t f = 0; f < F; ++f) sum += double(pr[f]) * vr[f], mag += std::fabs(double(pr[f]) * vr[f]);
            ASSERT_NEAR(out[static_cast<size_t>((s * T + t) * D * H + h * D + d)], sum, 1e-5 * mag + 1e-7)
                << "value s " << s << " h " << h << " t " << t << " d " << d;
          }
        }
  }
}

TEST(CacheAttention, RefusesHeadsThatAreNotAMultipleOfTheCachesOrOtherStreamCounts) {
  ggml_context_ptr ctx(ggml_init({1 << 20, nullptr, true}));
  ggml_tensor* k = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F16, 32, 40, 2, 2);
  EXPECT_TRUE(key_scores_supports(k, ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, 32, 1, 4, 2)));
  EXPECT_FALSE(key_scores_supports(k, ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, 32, 1, 3, 2)));
  EXPECT_FALSE(key_scores_supports(k, ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, 32, 1, 4, 3)));
  ggml_tensor* v = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F16, 40, 32, 2, 2);
  EXPECT_TRUE(head_values_supports(v, ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, 40, 1, 4, 2)));
  EXPECT_FALSE(head_values_supports(v, ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, 40, 1, 3, 2)));
  EXPECT_FALSE(head_values_supports(v, ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, 40, 1, 4, 3)));
}

}  // namespace
}  // namespace earshot::runtime
