#include "model/runtime/rows_ops.h"

#include <ggml-cpu.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/runtime/amx.h"
#include "model/runtime/rows_kernels.h"

namespace earshot::runtime {
namespace {

using rows::QuantRows;
using rows::Tile;
using rows::Tiles;
using rows::WeightKind;

// Weight rows computed together against every activation row, sized to stay in
// the core's L2 while the activation rows pass over them (the first pass reads
// them from memory, the others from cache).
constexpr int64_t kWeightBlockBytes = 256 * 1024;

WeightKind kind_of(ggml_type type) {
  switch (type) {
    case GGML_TYPE_F32: return WeightKind::kF32;
    case GGML_TYPE_F16: return WeightKind::kF16;
    case GGML_TYPE_Q4_K: return WeightKind::kQ4_K;
    case GGML_TYPE_Q6_K: return WeightKind::kQ6_K;
    default: return WeightKind::kQ8_0;
  }
}

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// A thread's Q8_0 activation rows (grown, never shrunk: one per compute thread).
struct QuantScratch {
  std::vector<uint8_t> bytes;
  std::vector<int8_t> signs;
  std::vector<float> scales;
  std::vector<char> blocks;  // ggml's block_q8_0 (block_q8_K) row
  std::vector<int32_t> sums;
};

// The J rows of x quantised as ggml's product quantises them (its own
// quantize_row_q8_0), in the layout the path's tiles read (rows_kernels.h).
QuantRows quantise_rows(CpuPath path, const float* x, int64_t ldx, int64_t K, int64_t J) {
  thread_local QuantScratch scratch;
  const int64_t nb = K / 32, ldq = round_up(K, 64), lds = round_up(nb, 2) * 8;
  const bool vnni = path == CpuPath::kAvx2Vnni || path == CpuPath::kAvx512Vnni;
  const bool signs = path == CpuPath::kAvx2 || path == CpuPath::kAvx512;
  scratch.bytes.assign(static_cast<size_t>(ldq * J), 0);
  if (signs) scratch.signs.assign(static_cast<size_t>(ldq * J), 0);
  scratch.scales.assign(static_cast<size_t>(lds * J), 0.0f);
  scratch.blocks.resize(static_cast<size_t>(nb * 34));
  const ggml_from_float_t quantise = ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float;
  for (int64_t j = 0; j < J; ++j) {
    quantise(x + j * ldx, scratch.blocks.data(), K);
    uint8_t* bytes = scratch.bytes.data() + j * ldq;
    int8_t* sgn = signs ? scratch.signs.data() + j * ldq : nullptr;
    float* sc = scratch.scales.data() + j * lds;
    for (int64_t b = 0; b < nb; ++b) {
      const char* blk = scratch.blocks.data() + b * 34;
      uint16_t d;
      std::memcpy(&d, blk, 2);
      std::fill_n(sc + b * 8, 8, ggml_fp16_to_fp32(d));
      for (int k = 0; k < 32; ++k) {
        const int8_t q = static_cast<int8_t>(blk[2 + k]);
        uint8_t& out = bytes[b * 32 + k];
        if (vnni) {
          out = static_cast<uint8_t>(q + 128);
        } else if (signs) {
          out = static_cast<uint8_t>(q < 0 ? -q : q);
          sgn[b * 32 + k] = q;
        } else {
          out = static_cast<uint8_t>(q);
        }
      }
    }
  }
  QuantRows rows;
  rows.bytes = scratch.bytes.data();
  rows.signs = signs ? scratch.signs.data() : nullptr;
  rows.scales = scratch.scales.data();
  rows.ldq = ldq, rows.lds = lds;
  return rows;
}

// The J rows of x quantised to Q8_K as ggml's Q4_K and Q6_K products quantise them (its own
// quantize_row_q8_K: block_q8_K = f32 d, 256 int8, 16 int16 sums of 16), in the
// layout of rows_kernels.h: the values, one d per super-block, 8 sums of 32.
QuantRows quantise_rows_q8k(const float* x, int64_t ldx, int64_t K, int64_t J) {
  thread_local QuantScratch scratch;
  constexpr int64_t kBlock = 4 + 256 + 32;
  const int64_t nb = K / 256, ldq = K, lds = nb, ldb = nb * 8;
  scratch.bytes.resize(static_cast<size_t>(ldq * J));
  scratch.scales.resize(static_cast<size_t>(lds * J));
  scratch.sums.resize(static_cast<size_t>(ldb * J));
  scratch.blocks.resize(static_cast<size_t>(nb * kBlock));
  const ggml_from_float_t quantise = ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float;
  for (int64_t j = 0; j < J; ++j) {
    quantise(x + j * ldx, scratch.blocks.data(), K);
    for (int64_t b = 0; b < nb; ++b) {
      const char* blk = scratch.blocks.data() + b * kBlock;
      std::memcpy(&scratch.scales[static_cast<size_t>(j * lds + b)], blk, 4);
      std::memcpy(&scratch.bytes[static_cast<size_t>(j * ldq + b * 256)], blk + 4, 256);
      int16_t bsums[16];
      std::memcpy(bsums, blk + 260, sizeof bsums);
      for (int s = 0; s < 8; ++s)
        scratch.sums[static_cast<size_t>(j * ldb + b * 8 + s)] = bsums[2 * s] + bsums[2 * s + 1];
    }
  }
  QuantRows rows;
  rows.bytes = scratch.bytes.data();
  rows.scales = scratch.scales.data();
  rows.sums = scratch.sums.data();
  rows.ldq = ldq, rows.lds = lds, rows.ldb = ldb;
  return rows;
}

void rows_op(ggml_tensor* dst, int ith, int nth, void*) {
  const ggml_tensor* w = dst->src[0];
  const ggml_tensor* x = dst->src[1];
  const ggml_tensor* bias = dst->src[2];
  const int64_t I = w->ne[1];
  // Whole groups of 16 rows per thread.
  const int64_t blocks = (I + 15) / 16;
  const int64_t i0 = std::min(I, blocks * ith / nth * 16), i1 = std::min(I, blocks * (ith + 1) / nth * 16);
  if (i1 <= i0) return;
  rows_product(w->type, w->data, static_cast<int64_t>(w->nb[1]), static_cast<const float*>(x->data),
               static_cast<int64_t>(x->nb[1] / sizeof(float)), w->ne[0], x->ne[1], static_cast<float*>(dst->data),
               static_cast<int64_t>(dst->nb[1] / sizeof(float)), bias ? static_cast<const float*>(bias->data) : nullptr,
               i0, i1);
}

}  // namespace

bool rows_supports(const ggml_tensor* a, const ggml_tensor* b, const ggml_tensor* bias) {
  const bool type_ok = a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_F32 ||
                       (a->type == GGML_TYPE_Q8_0 && a->ne[0] % 32 == 0) ||
                       ((a->type == GGML_TYPE_Q4_K || a->type == GGML_TYPE_Q6_K) && a->ne[0] % 256 == 0);
  const bool bias_ok =
      bias == nullptr || (bias->type == GGML_TYPE_F32 && ggml_is_contiguous(bias) && ggml_nelements(bias) == a->ne[1]);
  return type_ok && bias_ok && b->type == GGML_TYPE_F32 && a->ne[2] == 1 && a->ne[3] == 1 && b->ne[2] == 1 &&
         b->ne[3] == 1 && a->nb[0] == ggml_type_size(a->type) &&
         a->nb[1] == ggml_row_size(a->type, a->ne[0]) * (a->nb[1] / ggml_row_size(a->type, a->ne[0])) &&
         b->nb[0] == sizeof(float) && a->ne[0] == b->ne[0] && b->ne[1] >= 1 && !in_amx_buffer(a);
}

ggml_tensor* rows_mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* bias) {
  if (!rows_supports(a, b, bias)) {
    throw Error(
        ErrorCode::kInternal,
        std::string(
            "rows product: wants a 2-D F16, F32, Q8_0, Q4_K or Q6_K weight (not on AMX) and f32 rows of the same "
            "length, contiguous rows; got ") +
            ggml_type_name(a->type) + " and " + ggml_type_name(b->type));
  }
  ggml_tensor* args[] = {a, b, bias};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, a->ne[1], b->ne[1], 1, 1, args, bias ? 3 : 2, rows_op, GGML_N_TASKS_MAX,
                        nullptr);
}

void rows_product(ggml_type type, const void* w, int64_t ldw, const float* x, int64_t ldx, int64_t K, int64_t J,
                  float* out, int64_t ldo, const float* bias, int64_t i0, int64_t i1) {
  if (i1 <= i0 || J < 1) return;
  const CpuPath path = kernel_path();
  const WeightKind kind = kind_of(type);
  const Tiles& tiles = rows::tiles(path, kind);
  Tile t;
  t.ldw = ldw, t.ldx = ldx, t.K = K, t.ldo = ldo;
  const QuantRows q = kind == WeightKind::kQ8_0                                ? quantise_rows(path, x, ldx, K, J)
                      : kind == WeightKind::kQ4_K || kind == WeightKind::kQ6_K ? quantise_rows_q8k(x, ldx, K, J)
                                                                               : QuantRows{};
  const auto* base = static_cast<const char*>(w);
  const int64_t R = tiles.max_r, JC = tiles.max_j;
  const int64_t block = std::max<int64_t>(R, kWeightBlockBytes / std::max<int64_t>(ldw, 1) / R * R);
  for (int64_t ib = i0; ib < i1; ib += block) {
    const int64_t ie = std::min(ib + block, i1);
    for (int64_t jc = 0; jc < J; jc += JC) {
      const int64_t jn = std::min(JC, J - jc);
      t.x = x + jc * ldx;
      if (kind != WeightKind::kF32 && kind != WeightKind::kF16) {
        t.q = q;
        t.q.bytes += jc * q.ldq;
        if (q.signs) t.q.signs += jc * q.ldq;
        t.q.scales += jc * q.lds;
        if (q.sums) t.q.sums += jc * q.ldb;
      }
      for (int64_t i = ib; i < ie; i += R) {
        const int64_t rn = std::min(R, ie - i);
        // The next tile's rows, brought to cache while this one computes: the
        // block's next rows, then the block again for the next activation rows, or
        // the next block.
        const int64_t next = i + rn < ie ? i + rn : jc + jn < J ? ib : ie;
        t.w = base + i * ldw;
        t.prefetch = base + std::min(next, i1 - 1) * ldw;
        t.out = out + jc * ldo + i;
        t.bias = bias ? bias + i : nullptr;
        tiles.fn[rn - 1][jn - 1](t);
      }
    }
  }
}

}  // namespace earshot::runtime
