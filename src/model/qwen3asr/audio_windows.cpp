// Model::encode_windows: libmtmd's windows, each encoded only when its mel changed
// (audio_windows.h).
#include <ggml-backend.h>
#include <ggml.h>
#include <mtmd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "model/qwen3asr/model.h"

namespace earshot::qwen3asr {
namespace {

// The qwen3a graph's first computed node: the window's mel frames as 100-frame
// chunks (clip_graph_qwen3a::build names it). Its values are the window's input.
constexpr char kMelNode[] = "inp_chunks";
// With earshot's stem patch, every chunk's stem output, the kept ones and those
// the graph computed, concatenated: [width, 13 x chunks].
constexpr char kStemNode[] = "after_conv_out";

}  // namespace

bool Model::encoder_node(ggml_tensor* t, bool ask, void* user) {
  const Model& m = *static_cast<const Model*>(user);
  EncoderProbe& p = *m.probe_;
  const auto outer = m.options_.encoder_eval_callback;
  const bool mine = p.active && std::strcmp(t->name, kMelNode) == 0;
  const bool stem = p.active && p.window != nullptr && m.stem_hook_ && std::strcmp(t->name, kStemNode) == 0;
  if (ask) {
    p.outer_asked = outer != nullptr && outer(t, true, m.options_.encoder_eval_data);
    return mine || stem || p.outer_asked;
  }
  const bool go_on = p.outer_asked ? outer(t, false, m.options_.encoder_eval_data) : true;
  if (stem) {
    p.stem_width = t->ne[0];
    p.stem_new.resize(static_cast<size_t>(ggml_nelements(t)));
    ggml_backend_tensor_get(t, p.stem_new.data(), 0, p.stem_new.size() * sizeof(float));
    return go_on;
  }
  if (!mine) return go_on;
  p.read = true;
  p.mel.resize(static_cast<size_t>(ggml_nelements(t)));
  ggml_backend_tensor_get(t, p.mel.data(), 0, p.mel.size() * sizeof(float));
  // The same input as last time: the same tokens. Stop the graph here (the
  // scheduler computes nothing after a node its callback answers false for).
  p.unchanged = p.cached != nullptr && *p.cached == p.mel;
  return p.unchanged ? false : go_on;
}

int Model::audio_stem(const float* mel, int64_t n_frames, int64_t n_mel, const float** kept, void* user) {
  const Model& m = *static_cast<const Model*>(user);
  EncoderProbe& p = *m.probe_;
  p.kept_chunks = 0;
  *kept = nullptr;
  if (!p.active || p.window == nullptr || n_frames % kChunkFrames != 0) return 0;
  const EncodedWindow& w = *p.window;
  // The window's last mel is the graph's input as it was then: chunk-major,
  // [100 frames, n_mel] per chunk; `mel` here is [n_frames, n_mel], frames fastest.
  const int64_t chunk_values = kChunkFrames * n_mel;
  // At least one chunk is computed (the patch keeps all but the last at most), so
  // the graph still reads the mel: its first node, where encoder_node stops a
  // window whose mel is unchanged.
  const int64_t have =
      std::min<int64_t>({n_frames / kChunkFrames - 1, static_cast<int64_t>(w.mel.size()) / chunk_values,
                         static_cast<int64_t>(w.stem_chunks)});
  int64_t c = 0;
  for (; c < have; ++c) {
    bool same = true;
    for (int64_t b = 0; b < n_mel && same; ++b) {
      same = std::memcmp(mel + b * n_frames + c * kChunkFrames, w.mel.data() + c * chunk_values + b * kChunkFrames,
                         kChunkFrames * sizeof(float)) == 0;
    }
    if (!same) break;
  }
  p.kept_chunks = static_cast<int>(c);
  *kept = c > 0 ? w.stem.data() : nullptr;
  return static_cast<int>(c);
}

EncodeStats Model::encode_windows(std::span<const float> pcm, std::vector<EncodedWindow>& windows,
                                  uint64_t& next_id) const {
  EncodeStats stats;
  std::lock_guard lock(probe_->mutex);
  mtmd_bitmap* bitmap = mtmd_bitmap_init_from_audio(pcm.size(), pcm.data());
  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  const std::string marker = mtmd_default_marker();
  mtmd_input_text text{marker.c_str(), marker.size(), false, true};
  const mtmd_bitmap* bitmaps[] = {bitmap};
  const int32_t rc = mtmd_tokenize(mtmd_, chunks, &text, bitmaps, 1);
  mtmd_bitmap_free(bitmap);
  struct Release {
    mtmd_input_chunks* chunks;
    EncoderProbe& probe;
    ~Release() {
      mtmd_input_chunks_free(chunks);
      probe.active = false;
      probe.cached = nullptr;
      probe.window = nullptr;
    }
  } release{chunks, *probe_};
  if (rc != 0)
    throw Error(ErrorCode::kInternal, "libmtmd could not prepare " + std::to_string(pcm.size()) + " samples");
  const size_t n_embd_out = static_cast<size_t>(n_embd());
  // Audio longer than one 800-frame window comes as one chunk per window.
  size_t w = 0;
  for (size_t i = 0; i < mtmd_input_chunks_size(chunks); ++i) {
    const mtmd_input_chunk* c = mtmd_input_chunks_get(chunks, i);
    if (mtmd_input_chunk_get_type(c) != MTMD_INPUT_CHUNK_TYPE_AUDIO) continue;
    if (w == windows.size()) windows.emplace_back();
    EncodedWindow& window = windows[w++];
    const int n = static_cast<int>(mtmd_input_chunk_get_n_tokens(c));
    const bool may_reuse = options_.reuse_encoder_windows && window.n_tokens == n && !window.mel.empty();
    probe_->active = options_.reuse_encoder_windows;
    probe_->cached = may_reuse ? &window.mel : nullptr;
    probe_->read = probe_->unchanged = false;
    probe_->window = &window;
    probe_->kept_chunks = 0;
    probe_->stem_new.clear();
    if (mtmd_encode_chunk(mtmd_, c) != 0) {
      windows.clear();  // a failed graph leaves nothing to trust
      throw Error(ErrorCode::kInternal, "libmtmd could not encode " + std::to_string(pcm.size()) + " samples");
    }
    ++stats.windows;
    if (probe_->unchanged) {
      ++stats.reused;
      continue;
    }
    // The window's stems as the graph took them (the kept chunks' and the others').
    const int chunks = n / kTokensPerChunk;
    if (!probe_->stem_new.empty() && probe_->stem_width > 0) {
      const auto per_chunk = static_cast<size_t>(probe_->stem_width * kTokensPerChunk);
      window.stem.swap(probe_->stem_new);
      window.stem_chunks = static_cast<int>(window.stem.size() / per_chunk);
    } else {
      window.stem.clear();
      window.stem_chunks = 0;
    }
    stats.stems_kept += probe_->kept_chunks;
    stats.stems += std::max(0, chunks - probe_->kept_chunks);
    const float* out = mtmd_get_output_embd(mtmd_);
    window.embd.assign(out, out + static_cast<size_t>(n) * n_embd_out);
    window.n_tokens = n;
    window.id = next_id++;
    // Without the mel read (a graph that names its input otherwise) the window is
    // simply encoded every time.
    if (probe_->read) {
      window.mel.swap(probe_->mel);
    } else {
      window.mel.clear();
    }
    ++stats.encoded;
  }
  windows.resize(w);
  if (w == 0)
    throw Error(ErrorCode::kInternal, "libmtmd made no audio window of " + std::to_string(pcm.size()) + " samples");
  return stats;
}

}  // namespace earshot::qwen3asr
