#include "model/runtime/q8_gemm.h"

#include <ggml-backend.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "model/runtime/amx.h"

namespace earshot::runtime {
namespace {

constexpr int64_t kBlock = 32;       // values per Q8_0 block
constexpr int64_t kBlockBytes = 34;  // an f16 scale, then 32 int8 values
constexpr int64_t kPanel = 32;       // weight rows a thread takes at a time

bool fast(CpuPath path) { return path == CpuPath::kAvx512Vnni; }

// The scalar paths: the same values as the AVX512-VNNI kernels, bit for bit.
void quantise_row_scalar(const float* x, int64_t K, char* out) {
  const int64_t nb = K / kBlock;
  for (int64_t b = 0; b < nb; ++b) {
    const float* v = x + b * kBlock;
    float amax = 0.0f;
    for (int64_t k = 0; k < kBlock; ++k) amax = std::max(amax, std::fabs(v[k]));
    const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int64_t k = 0; k < kBlock; ++k) {
      const auto q = static_cast<int8_t>(std::nearbyint(v[k] * id));
      out[b * kBlock + k] = static_cast<char>(q);
      sum += q;
    }
    const int32_t corr = -128 * sum;
    std::memcpy(out + K + b * 4, &d, 4);
    std::memcpy(out + K + nb * 4 + b * 4, &corr, 4);
  }
}

void product_scalar(const void* w, int64_t ldw, const char* xq, int64_t K, int64_t J, float* out, int64_t ldo,
                    const float* bias, int64_t i0, int64_t i1) {
  const int64_t nb = K / kBlock, stride = q8::quantised_row_bytes(K);
  const auto* base = static_cast<const char*>(w);
  for (int64_t i = i0; i < i1; ++i) {
    const char* row = base + i * ldw;
    for (int64_t j = 0; j < J; ++j) {
      const char* xr = xq + j * stride;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const char* blk = row + b * kBlockBytes;
        ggml_fp16_t dh;
        std::memcpy(&dh, blk, 2);
        int32_t isum = 0;
        for (int64_t k = 0; k < kBlock; ++k) {
          isum += static_cast<int32_t>(static_cast<int8_t>(blk[2 + k])) *
                  static_cast<int32_t>(static_cast<int8_t>(xr[b * kBlock + k]));
        }
        float dx;
        std::memcpy(&dx, xr + K + b * 4, 4);
        acc = std::fma(static_cast<float>(isum), ggml_fp16_to_fp32(dh) * dx, acc);
      }
      out[j * ldo + i] = bias ? acc + bias[i] : acc;
    }
  }
}

void quantise_op(ggml_tensor* dst, int ith, int nth, void*) {
  const ggml_tensor* x = dst->src[0];
  const int64_t J = x->ne[1];
  const int64_t j0 = J * ith / nth, j1 = J * (ith + 1) / nth;
  if (j1 > j0) {
    q8::quantise_rows(kernel_path(), static_cast<const float*>(x->data), static_cast<int64_t>(x->nb[1] / sizeof(float)),
                      x->ne[0], j0, j1, static_cast<char*>(dst->data));
  }
}

void product_op(ggml_tensor* dst, int ith, int nth, void*) {
  const ggml_tensor* w = dst->src[0];
  const ggml_tensor* xq = dst->src[1];
  const ggml_tensor* bias = dst->src[2];
  const int64_t I = w->ne[1];
  const int64_t panels = (I + kPanel - 1) / kPanel;
  const int64_t i0 = std::min(I, panels * ith / nth * kPanel), i1 = std::min(I, panels * (ith + 1) / nth * kPanel);
  if (i1 <= i0) return;
  q8::product(kernel_path(), w->data, static_cast<int64_t>(w->nb[1]), static_cast<const char*>(xq->data), w->ne[0],
              xq->ne[1], static_cast<float*>(dst->data), static_cast<int64_t>(dst->nb[1] / sizeof(float)),
              bias ? static_cast<const float*>(bias->data) : nullptr, i0, i1);
}

bool is_quantise_of(const ggml_tensor* t, const ggml_tensor* b, int64_t K) {
  ggml_custom_op_t fun = nullptr;
  if (t->op == GGML_OP_CUSTOM) std::memcpy(&fun, t->op_params, sizeof fun);  // ggml_custom_op_params' first field
  return fun == quantise_op && t->src[0] == b && t->type == GGML_TYPE_I8 && t->ne[0] == q8::quantised_row_bytes(K) &&
         t->ne[1] == b->ne[1];
}

// b's rows quantised for products of length K. The products of one input (a
// layer's query, key and value; its FFN's up and gate) are built one after
// another, so the quantisation this thread made last is taken again where it
// is of b and lies in ctx's memory in use: a graph's context is reset for each
// build, and a node of an earlier build may lie past that point (below it, the
// node was made in this build).
ggml_tensor* quantised_rows(ggml_context* ctx, ggml_tensor* b, int64_t K) {
  thread_local struct {
    const ggml_context* ctx = nullptr;
    const ggml_tensor* b = nullptr;
    ggml_tensor* xq = nullptr;
  } last;
  if (last.ctx == ctx && last.b == b) {
    const auto* base = static_cast<const char*>(ggml_get_mem_buffer(ctx));
    const auto* at = reinterpret_cast<const char*>(last.xq);
    if (at >= base && at < base + ggml_used_mem(ctx) && is_quantise_of(last.xq, b, K)) return last.xq;
  }
  ggml_tensor* x = b;
  ggml_tensor* xq = ggml_custom_4d(ctx, GGML_TYPE_I8, q8::quantised_row_bytes(K), b->ne[1], 1, 1, &x, 1, quantise_op,
                                   GGML_N_TASKS_MAX, nullptr);
  last = {ctx, b, xq};
  return xq;
}

}  // namespace

bool q8_gemm_available() { return fast(kernel_path()); }

bool q8_gemm_supports(const ggml_tensor* a, const ggml_tensor* b, const ggml_tensor* bias) {
  if (a->type != GGML_TYPE_Q8_0 || a->ne[0] % kBlock != 0 || b->type != GGML_TYPE_F32) return false;
  const ggml_tensor* base = a;
  while (base->view_src != nullptr) base = base->view_src;
  const bool plain = base->buffer == nullptr || (ggml_backend_buffer_is_host(base->buffer) && !in_amx_buffer(a));
  const bool bias_ok =
      bias == nullptr || (bias->type == GGML_TYPE_F32 && ggml_is_contiguous(bias) && ggml_nelements(bias) == a->ne[1]);
  return plain && bias_ok && a->ne[2] == 1 && a->ne[3] == 1 && b->ne[2] == 1 && b->ne[3] == 1 &&
         a->nb[0] == ggml_type_size(a->type) && a->nb[1] % ggml_row_size(a->type, a->ne[0]) == 0 &&
         a->nb[1] >= ggml_row_size(a->type, a->ne[0]) && b->nb[0] == sizeof(float) && a->ne[0] == b->ne[0] &&
         b->ne[1] >= 1;
}

bool q8_gemm_takes(const ggml_tensor* a, const ggml_tensor* b, const ggml_tensor* bias) {
  return b->ne[1] >= kQ8GemmMinRows && q8_gemm_supports(a, b, bias);
}

ggml_tensor* q8_mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* bias) {
  if (!q8_gemm_supports(a, b, bias)) {
    throw Error(ErrorCode::kInternal,
                std::string("int8 product: wants a 2-D Q8_0 weight in its own layout and f32 rows of the same "
                            "length, contiguous rows; got ") +
                    ggml_type_name(a->type) + " and " + ggml_type_name(b->type));
  }
  ggml_tensor* args[] = {a, quantised_rows(ctx, b, a->ne[0]), bias};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, a->ne[1], b->ne[1], 1, 1, args, bias ? 3 : 2, product_op, GGML_N_TASKS_MAX,
                        nullptr);
}

namespace q8 {

int64_t quantised_row_bytes(int64_t K) { return (K + K / kBlock * 8 + 63) / 64 * 64; }

void quantise_rows(CpuPath path, const float* x, int64_t ldx, int64_t K, int64_t j0, int64_t j1, char* out) {
  if (fast(path)) return quantise_rows_avx512(x, ldx, K, j0, j1, out);
  const int64_t stride = quantised_row_bytes(K);
  for (int64_t j = j0; j < j1; ++j) quantise_row_scalar(x + j * ldx, K, out + j * stride);
}

void product(CpuPath path, const void* w, int64_t ldw, const char* xq, int64_t K, int64_t J, float* out, int64_t ldo,
             const float* bias, int64_t i0, int64_t i1) {
  if (i1 <= i0 || J < 1) return;
  if (fast(path)) return product_avx512(w, ldw, xq, K, J, out, ldo, bias, i0, i1);
  product_scalar(w, ldw, xq, K, J, out, ldo, bias, i0, i1);
}

}  // namespace q8
}  // namespace earshot::runtime
