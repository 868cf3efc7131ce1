#include "model/runtime/amx.h"

#include <ggml-cpu.h>

#include <cstring>

#include "model/runtime/device.h"

namespace earshot::runtime {

ggml_backend_buffer_type_t amx_buffer_type() {
  static const ggml_backend_buffer_type_t type = [] {
    ggml_backend_dev_t cpu = cpu_device();
    auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu), "ggml_backend_dev_get_extra_bufts"));
    if (get_extra == nullptr) return ggml_backend_buffer_type_t{};
    for (ggml_backend_buffer_type_t* t = get_extra(cpu); t != nullptr && *t != nullptr; ++t) {
      if (std::strcmp(ggml_backend_buft_name(*t), "AMX") == 0) return *t;
    }
    return ggml_backend_buffer_type_t{};
  }();
  return type;
}

std::string amx_status() {
  if (amx_buffer_type() != nullptr) return "AMX-INT8 (ggml's AMX kernels) for quantised weights";
  return ggml_cpu_has_amx_int8() ? "no AMX (the kernel refused the tile state)"
                                 : "no AMX (this CPU or this build of ggml has none)";
}

bool amx_can_hold(ggml_type type, int n_dims, const std::array<int64_t, 4>& ne) {
  int64_t block = 0;
  switch (type) {
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q8_0: block = 32; break;
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q6_K:
    case GGML_TYPE_IQ4_XS: block = 256; break;
    default: return false;
  }
  return n_dims == 2 && ne[2] == 1 && ne[3] == 1 && ne[0] % block == 0 && ne[1] % 32 == 0;
}

bool in_amx_buffer(const ggml_tensor* t) {
  while (t->view_src != nullptr) t = t->view_src;
  const ggml_backend_buffer_type_t amx = amx_buffer_type();
  return amx != nullptr && t->buffer != nullptr && ggml_backend_buffer_get_type(t->buffer) == amx;
}

ggml_tensor* mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) {
  if (!in_amx_buffer(a)) return ggml_mul_mat(ctx, a, b);
  if (b->type != GGML_TYPE_F32) b = ggml_cast(ctx, b, GGML_TYPE_F32);
  if (!ggml_is_contiguous(b)) b = ggml_cont(ctx, b);
  const bool flat = b->ne[2] == 1 && b->ne[3] == 1;
  ggml_tensor* out = ggml_mul_mat(ctx, a, flat ? b : ggml_reshape_2d(ctx, b, b->ne[0], ggml_nrows(b)));
  return flat ? out : ggml_reshape_4d(ctx, out, out->ne[0], b->ne[1], b->ne[2], b->ne[3]);
}

}  // namespace earshot::runtime
