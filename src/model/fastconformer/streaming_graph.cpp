// The streaming step's graph, for one stream or several batched: the subsampling
// convs, each stream's attention over its own cache and each stream's depthwise
// conv run per stream (streams of one shape batched over ggml's fourth axis,
// each computed as alone); every weight-bound product (the subsampling's output
// linear, the FFNs, the attention projections, the pointwise convs) runs once
// over all streams' new rows. ggml's products give each column the value it has
// alone, so a stream's frames equal its lone step's, and so do the cached keys
// and values and the table of linear_pos projections, which are therefore
// computed once instead of at every chunk (at an 80 ms lookahead, re-projecting
// 70 cached frames and 71 positions per layer was ~90% of a chunk's products).
#include <ggml.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "common/error.h"
#include "model/fastconformer/conformer_blocks.h"
#include "model/fastconformer/streaming_encoder.h"
#include "model/runtime/device.h"

namespace earshot::fastconformer::detail {
namespace {

// Each causal stride-2 stage's first two outputs read its left padding: a
// window that starts 16 mel frames before a chunk (a multiple of 8) gives that
// chunk's frames exactly from its third output on.
constexpr int kSubsamplingOverlap = 2;

// a [n0, n_a] and b [n0, n_b] (rows contiguous) -> [n0, n_a + n_b], concatenated
// along ggml's third axis so that the copy spreads over the threads.
ggml_tensor* concat_columns(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) {
  ggml_tensor* a3 = ggml_view_3d(ctx, a, a->ne[0], 1, a->ne[1], a->nb[1], a->nb[1], 0);
  ggml_tensor* b3 = ggml_view_3d(ctx, b, b->ne[0], 1, b->ne[1], b->nb[1], b->nb[1], 0);
  ggml_tensor* c = ggml_concat(ctx, a3, b3, 2);
  return ggml_reshape_2d(ctx, c, c->ne[0], c->ne[2]);
}

// The streams' column blocks side by side, in order (a balanced tree of concats).
ggml_tensor* concat_columns(ggml_context* ctx, std::vector<ggml_tensor*> parts) {
  while (parts.size() > 1) {
    std::vector<ggml_tensor*> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(concat_columns(ctx, parts[i], parts[i + 1]));
    if (parts.size() % 2) next.push_back(parts.back());
    parts = std::move(next);
  }
  return parts[0];
}

// Columns [col, col + n) of x [ne0, *] as [dh, H, n] (x's rows split into heads).
ggml_tensor* head_view(ggml_context* ctx, ggml_tensor* x, int dh, int H, int col, int n) {
  return ggml_view_3d(ctx, x, dh, H, n, dh * ggml_element_size(x), x->nb[1], col * x->nb[1]);
}

// Columns [col, col + n * G) of x as [dh, H, n, G]: G streams' n frames each.
ggml_tensor* head_view(ggml_context* ctx, ggml_tensor* x, int dh, int H, int col, int n, int G) {
  return ggml_view_4d(ctx, x, dh, H, n, G, dh * ggml_element_size(x), x->nb[1], n * x->nb[1], col * x->nb[1]);
}

// One stream's part of the graph.
struct Part {
  int a = 0, n_win = 0, drop = 0, n_q = 0, n_cached = 0, n_k = 0, n_pos = 0;
  int col = 0, cache_col = 0, pos_col = 0;  // its first column in the batched rows, keys and values, positions
  int group = 0, in_group = 0;              // its group and its place in it
  bool f16 = false;                         // its subsampling's im2col
  ggml_tensor* mask = nullptr;
  std::vector<float> mask_values;
};

// Streams whose step has the same shape (mel window, frames, cached frames, no
// mask: every stream in the steady state of one lookahead) share their
// subsampling's, attention's and depthwise conv's ops, batched over ggml's
// fourth axis, each slice computed as alone; their rows are consecutive.
struct Group {
  std::vector<int> members;
  int n_win = 0, drop = 0, n_q = 0, n_cached = 0;
  bool f16 = false;
  ggml_tensor* mel = nullptr;                    // [n_mels, n_win, 1, members]
  std::vector<ggml_tensor*> conv_in, conv_next;  // per layer: [kernel - 1, d, members]
};

}  // namespace

StepGraph::StepGraph(ggml_backend_t backend, runtime::CpuKernels kernels)
    : backend_(backend), kernels_(kernels), on_cpu_(runtime::is_cpu(runtime::device_of(backend))) {
  runtime::resolve_cpu_kernels(kernels, on_cpu_);  // kOpenBlas where it cannot run: the error now
  runner_ = std::make_unique<runtime::GraphRunner>(backend_, "streaming encoder");
}

StepGraph::~StepGraph() = default;

std::shared_ptr<const PositionTable> StepGraph::build_positions(const Model& m) {
  // One table per model and kind of buffer, while a StepGraph holds it (a graph
  // owner holds its model: the address is not reused meanwhile).
  static std::mutex mutex;
  static std::map<std::pair<const Model*, ggml_backend_buffer_type_t>, std::weak_ptr<const PositionTable>> tables;
  const auto key = std::make_pair(&m, ggml_backend_get_default_buffer_type(backend_));
  std::lock_guard lock(mutex);
  std::erase_if(tables, [](const auto& entry) { return entry.second.expired(); });
  if (auto it = tables.find(key); it != tables.end())
    if (auto table = it->second.lock()) return table;
  const Hparams& hp = m.hparams();
  const int d = hp.n_state;
  // A step sees positions n_k - 1 ... -(n_q - 1): n_k is at most the left context
  // plus n_q, and n_q at most kMaxStepFrames or one chunk.
  int max_q = std::max(kMaxStepFrames, hp.att_right + 1);
  for (int r : hp.att_right_options) max_q = std::max(max_q, r + 1);
  const int top = std::max(hp.att_left, 0) + max_q - 1, columns = top + max_q;
  auto table = std::make_shared<PositionTable>();
  table->top = top;
  ggml_init_params table_params{ggml_tensor_overhead() * (hp.n_layer + 1), nullptr, true};
  table->ctx.reset(ggml_init(table_params));
  if (!table->ctx) throw Error(ErrorCode::kInternal, "ggml_init failed for the position table");
  for (int il = 0; il < hp.n_layer; ++il)
    table->layers.push_back(ggml_new_tensor_2d(table->ctx.get(), GGML_TYPE_F32, d, columns));
  table->buffer.reset(ggml_backend_alloc_ctx_tensors(table->ctx.get(), backend_));
  if (!table->buffer) throw Error(ErrorCode::kInternal, "cannot allocate the position table");
  const runtime::GraphRunner::Graph g = runner_->begin(64 + 4 * hp.n_layer);
  ggml_tensor* pe = ggml_new_tensor_2d(g.ctx(), GGML_TYPE_F32, d, columns);
  ggml_set_input(pe);
  for (int il = 0; il < hp.n_layer; ++il)
    ggml_build_forward_expand(g.graph(),
                              ggml_cpy(g.ctx(), runtime::mul_mat(g.ctx(), m.layers[il].pos_w, pe), table->layers[il]));
  runner_->allocate(g, "the position table");
  runtime::set_input(pe, relative_positions(top, columns, d));
  runner_->compute(g);
  tables[key] = table;
  return table;
}

void StepGraph::run(const Model& m, float bn_eps, std::span<const StreamStep> steps) {
  const Hparams& hp = m.hparams();
  const int d = hp.n_state, K = hp.n_conv_kernel, H = hp.n_head, dh = hp.d_head();
  const int B = static_cast<int>(steps.size());
  if (B == 0) return;
  if (positions_model_ != &m) {
    positions_ = build_positions(m);
    positions_model_ = &m;
  }
  const PositionTable& table = *positions_;
  const runtime::GraphRunner::Graph step = runner_->begin(2048 + 256 * B + hp.n_layer * (256 + 96 * B));
  ggml_context* ctx = step.ctx();
  ggml_cgraph* graph = step.graph();

  // Per stream: its mel window and subsampling, its columns among the batched rows.
  std::vector<Part> parts(B);
  std::vector<Group> groups;
  int n_rows = 0, n_cached_all = 0, n_keys_all = 0;
  for (int s = 0; s < B; ++s) {
    const StreamState& st = *steps[s].state;
    Part& p = parts[s];
    const int t0 = steps[s].t0, t1 = steps[s].t1;
    // The mel window: from 16 frames before the chunk (or the start) to the chunk's
    // last frame's 8t, or to the end of the stream, where the right padding falls
    // where it falls offline (the window starts on a multiple of 8).
    p.a = std::max(0, 8 * (t0 - kSubsamplingOverlap));
    const int b = steps[s].at_end ? st.n_mel - 1 : 8 * t1;
    p.drop = t0 - p.a / 8, p.n_q = t1 - t0 + 1, p.n_win = b - p.a + 1;
    if (t0 != st.frames_done || p.n_q < 1 || p.a < st.mel_base || b >= st.n_mel)
      throw Error(ErrorCode::kInternal, "a streaming step for frames " + std::to_string(t0) + ".." +
                                            std::to_string(t1) + " does not follow the stream (" +
                                            std::to_string(st.frames_done) + " frames done)");
    p.n_cached = st.att_frames, p.n_k = p.n_cached + p.n_q, p.n_pos = p.n_k + p.n_q - 1;
    p.pos_col = table.top - (p.n_k - 1);
    if (p.pos_col < 0 || p.pos_col + p.n_pos > table.layers[0]->ne[1])
      throw Error(ErrorCode::kInternal, "a streaming step of " + std::to_string(p.n_q) + " frames over " +
                                            std::to_string(p.n_cached) + " cached ones is past the position table");
    p.f16 = st.f16_subsampling;
    // Several chunks in one pass: each query sees its own chunk and the
    // left / (right + 1) chunks before it, the offline chunked_limited mask.
    const int chunk = st.right + 1, left_chunks = hp.att_left / chunk;
    if (p.n_q > chunk) {
      p.mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, p.n_k, p.n_q);
      ggml_set_input(p.mask);
      p.mask_values.assign(static_cast<size_t>(p.n_k) * p.n_q, 0.0f);
      for (int i = 0; i < p.n_q; ++i) {
        for (int j = 0; j < p.n_k; ++j) {
          const int diff = (t0 + i) / chunk - (t0 - p.n_cached + j) / chunk;
          if (diff < 0 || diff > left_chunks) p.mask_values[static_cast<size_t>(i) * p.n_k + j] = -INFINITY;
        }
      }
    }
    auto same = [&](const Group& g) {
      return !p.mask && !parts[g.members.front()].mask && g.n_win == p.n_win && g.drop == p.drop && g.n_q == p.n_q &&
             g.n_cached == p.n_cached && g.f16 == p.f16;
    };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end())
      it = groups.insert(groups.end(), Group{{}, p.n_win, p.drop, p.n_q, p.n_cached, p.f16, nullptr, {}, {}});
    p.group = static_cast<int>(it - groups.begin()), p.in_group = static_cast<int>(it->members.size());
    it->members.push_back(s);
  }
  // The rows, caches and subsampled frames group by group.
  std::vector<ggml_tensor*> sub;
  for (Group& g : groups) {
    for (int s : g.members) {
      Part& p = parts[s];
      p.col = n_rows, p.cache_col = n_keys_all;
      n_rows += p.n_q, n_cached_all += p.n_cached, n_keys_all += p.n_k;
    }
    const int G = static_cast<int>(g.members.size());
    g.mel = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, hp.n_mels, g.n_win, 1, G);
    ggml_set_input(g.mel);
  }
  // The products on the few-row op (a few rows: bound by reading the weights), on
  // OpenBLAS when the step has rows enough (a batch of many streams' chunks), or
  // ggml's (runtime::step_products).
  const runtime::MatMul mm = runtime::step_products(kernels_, on_cpu_, n_rows, kOpenBlasMinRows);
  for (const Group& g : groups) {
    const int G = static_cast<int>(g.members.size());
    ggml_tensor* x = build_subsampling_convs(ctx, m, g.mel, g.f16, mm);  // [bins * channels, frames * G]
    const int frames = static_cast<int>(x->ne[1]) / G;
    if (frames != g.drop + g.n_q)
      throw Error(ErrorCode::kInternal, "the streaming subsampling gave " + std::to_string(frames) +
                                            " frames for a window of " + std::to_string(g.n_win) + ", expected " +
                                            std::to_string(g.drop + g.n_q));
    // Each stream's frames from its drop-th on.
    x = ggml_view_3d(ctx, x, x->ne[0], g.n_q, G, x->nb[1], frames * x->nb[1], g.drop * x->nb[1]);
    sub.push_back(ggml_cont_2d(ctx, x, x->ne[0], static_cast<int64_t>(g.n_q) * G));
  }
  ggml_tensor* x = subsampling_out(ctx, m, concat_columns(ctx, sub), mm);

  // Per layer, every stream's keys (values) of its step, [d, n_k] side by side:
  // the cache set from the host, the new frames' copied in by the graph before
  // the attention reads them; in keys_, not the compute buffer.
  std::vector<ggml_tensor*> k_all(hp.n_layer, nullptr), v_all(hp.n_layer, nullptr);
  std::vector<ggml_tensor*> k_rows(hp.n_layer), v_rows(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    const Layer& l = m.layers[il];
    x = half_ffn(ctx, x, l.norm_ff1_w, l.norm_ff1_b, l.ff1_w1, l.ff1_w2, hp.eps, mm);
    ggml_tensor* xa = layer_norm(ctx, x, l.norm_att_w, l.norm_att_b, hp.eps);
    ggml_tensor* q = mm(ctx, l.q_w, xa);
    // The new frames' keys and values: the next caches take them (read back).
    ggml_tensor* k_new = mm(ctx, l.k_w, xa);
    ggml_tensor* v_new = mm(ctx, l.v_w, xa);
    for (ggml_tensor* t : {k_new, v_new}) {
      ggml_set_output(t);
      ggml_build_forward_expand(graph, t);
    }
    k_rows[il] = k_new, v_rows[il] = v_new;
    if (n_cached_all > 0) {
      for (ggml_tensor** t : {&k_all[il], &v_all[il]}) *t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d, n_keys_all);
    }
    ggml_tensor* pos = table.layers[il];
    std::vector<ggml_tensor*> heads;
    for (const Group& g : groups) {
      const Part& p = parts[g.members.front()];
      const int G = static_cast<int>(g.members.size());
      ggml_tensor* k = head_view(ctx, k_new, dh, H, p.col, p.n_q, G);
      ggml_tensor* v = head_view(ctx, v_new, dh, H, p.col, p.n_q, G);
      if (p.n_cached > 0) {
        // Each stream's new keys and values after its cached ones (row copies).
        auto append = [&](ggml_tensor* all, ggml_tensor* rows) {
          ggml_tensor* to = ggml_view_4d(ctx, all, dh, H, p.n_q, G, dh * ggml_element_size(all), all->nb[1],
                                         p.n_k * all->nb[1], (p.cache_col + p.n_cached) * all->nb[1]);
          ggml_build_forward_expand(graph, ggml_cpy(ctx, rows, to));
          return head_view(ctx, all, dh, H, p.cache_col, p.n_k, G);
        };
        k = append(k_all[il], k);
        v = append(v_all[il], v);
      }
      heads.push_back(attention_heads(ctx, hp, l, head_view(ctx, q, dh, H, p.col, p.n_q, G), k, v,
                                      head_view(ctx, pos, dh, H, p.pos_col, p.n_pos), p.mask));
    }
    x = ggml_add(ctx, x, mm(ctx, l.out_w, concat_columns(ctx, heads)));
    ggml_tensor* glu = conv_glu(ctx, hp, l, x, mm);
    std::vector<ggml_tensor*> conv;
    for (Group& g : groups) {
      const Part& p = parts[g.members.front()];
      const int G = static_cast<int>(g.members.size());
      ggml_tensor* cache = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K - 1, d, G);
      ggml_set_input(cache);
      ggml_tensor* next = nullptr;
      ggml_tensor* rows = ggml_view_3d(ctx, glu, d, p.n_q, G, glu->nb[1], p.n_q * glu->nb[1], p.col * glu->nb[1]);
      ggml_tensor* h = depthwise_conv(ctx, hp, l, rows, cache, &next);  // [d, n_q, G]
      conv.push_back(ggml_reshape_2d(ctx, h, d, p.n_q * G));
      ggml_set_output(next);
      ggml_build_forward_expand(graph, next);
      g.conv_in.push_back(cache);
      g.conv_next.push_back(next);
    }
    x = ggml_add(ctx, x, conv_out(ctx, hp, l, concat_columns(ctx, conv), bn_eps, mm));
    x = half_ffn(ctx, x, l.norm_ff2_w, l.norm_ff2_b, l.ff2_w1, l.ff2_w2, hp.eps, mm);
    x = layer_norm(ctx, x, l.norm_out_w, l.norm_out_b, hp.eps);
  }
  ggml_set_output(x);
  ggml_build_forward_expand(graph, x);
  if (n_cached_all > 0) {
    ggml_backend_buffer_type_t type = ggml_backend_get_default_buffer_type(backend_);
    const size_t align = ggml_backend_buft_get_alignment(type);
    size_t bytes = 0;
    for (int il = 0; il < hp.n_layer; ++il) bytes += 2 * GGML_PAD(ggml_nbytes(k_all[il]), align);
    if (!keys_ || ggml_backend_buffer_get_size(keys_.get()) < bytes) {
      keys_.reset();
      keys_.reset(ggml_backend_buft_alloc_buffer(type, bytes + bytes / 2));
      if (!keys_)
        throw Error(ErrorCode::kInternal, "cannot allocate " + std::to_string((bytes + bytes / 2) >> 20) +
                                              " MB for a streaming step's keys and values");
    }
    char* at = static_cast<char*>(ggml_backend_buffer_get_base(keys_.get()));
    for (int il = 0; il < hp.n_layer; ++il) {
      for (ggml_tensor* t : {k_all[il], v_all[il]}) {
        if (ggml_backend_tensor_alloc(keys_.get(), t, at) != GGML_STATUS_SUCCESS)
          throw Error(ErrorCode::kInternal, "cannot place a streaming step's keys and values");
        at += GGML_PAD(ggml_nbytes(t), align);
      }
    }
  }
  // A plan of its own unless the last step had exactly this make-up (streams,
  // positions): runtime::GraphAllocator.
  runner_->allocate(step, std::to_string(B) + " streams");

  for (int s = 0; s < B; ++s) {
    const StreamState& st = *steps[s].state;
    const Part& p = parts[s];
    const size_t mel_bytes = static_cast<size_t>(p.n_win) * hp.n_mels * sizeof(float);
    ggml_backend_tensor_set(groups[p.group].mel, st.mel.data() + static_cast<size_t>(p.a - st.mel_base) * hp.n_mels,
                            p.in_group * mel_bytes, mel_bytes);
    if (p.mask) ggml_backend_tensor_set(p.mask, p.mask_values.data(), 0, p.mask_values.size() * sizeof(float));
    for (int il = 0; il < hp.n_layer; ++il) {
      if (p.n_cached > 0) {
        const size_t offset = static_cast<size_t>(p.cache_col) * d * sizeof(float);
        ggml_backend_tensor_set(k_all[il], st.keys[il].data(), offset, st.keys[il].size() * sizeof(float));
        ggml_backend_tensor_set(v_all[il], st.values[il].data(), offset, st.values[il].size() * sizeof(float));
      }
      const size_t offset = static_cast<size_t>(p.in_group) * st.conv_cache[il].size() * sizeof(float);
      ggml_backend_tensor_set(groups[p.group].conv_in[il], st.conv_cache[il].data(), offset,
                              st.conv_cache[il].size() * sizeof(float));
    }
  }
  runner_->compute(step);

  // The next attention caches, the last cache_frames keys and values of each
  // stream's cache and step, read straight from the graph's tensors (the cache
  // and the new frames side by side; the new frames alone without a cache).
  // The room first: past it nothing throws, and a throw leaves every stream as it was.
  std::vector<float> y(static_cast<size_t>(n_rows) * d);
  for (int s = 0; s < B; ++s) {
    StreamState& st = *steps[s].state;
    const size_t keep = static_cast<size_t>(std::min(st.cache_frames, parts[s].n_k)) * d;
    for (int il = 0; il < hp.n_layer; ++il) st.keys[il].reserve(keep), st.values[il].reserve(keep);
  }
  ggml_backend_tensor_get(x, y.data(), 0, y.size() * sizeof(float));
  for (int s = 0; s < B; ++s) {
    StreamState& st = *steps[s].state;
    const Part& p = parts[s];
    const int keep = std::min(st.cache_frames, p.n_k);
    for (int il = 0; il < hp.n_layer; ++il) {
      for (auto [cache, all, rows] :
           {std::tuple{&st.keys[il], k_all[il], k_rows[il]}, std::tuple{&st.values[il], v_all[il], v_rows[il]}}) {
        cache->resize(static_cast<size_t>(keep) * d);
        const size_t bytes = cache->size() * sizeof(float), frame = static_cast<size_t>(d) * sizeof(float);
        if (p.n_cached > 0)
          ggml_backend_tensor_get(all, cache->data(), (p.cache_col + p.n_k - keep) * frame, bytes);
        else
          ggml_backend_tensor_get(rows, cache->data(), (p.col + p.n_q - keep) * frame, bytes);
      }
      const size_t offset = static_cast<size_t>(p.in_group) * st.conv_cache[il].size() * sizeof(float);
      ggml_backend_tensor_get(groups[p.group].conv_next[il], st.conv_cache[il].data(), offset,
                              st.conv_cache[il].size() * sizeof(float));
    }
    st.att_frames = keep;
    EncoderOutput& out = *steps[s].out;
    out.data.insert(out.data.end(), y.begin() + static_cast<std::ptrdiff_t>(p.col) * d,
                    y.begin() + static_cast<std::ptrdiff_t>(p.col + p.n_q) * d);
    out.n_frames += p.n_q;
    st.frames_done = steps[s].t1 + 1;
    // The next chunk's window starts at 8 (t1 + 1 - 2): older mel is not read again.
    const int keep_from = std::max(0, 8 * (st.frames_done - kSubsamplingOverlap));
    if (keep_from > st.mel_base) {
      st.mel.erase(st.mel.begin(), st.mel.begin() + static_cast<std::ptrdiff_t>(keep_from - st.mel_base) * hp.n_mels);
      st.mel_base = keep_from;
    }
  }
}

}  // namespace earshot::fastconformer::detail
