// The arrival-order speaker cache (AOSC) of NVIDIA's streaming Sortformer, on the
// host: after each chunk the chunk's pre-encode embeddings join a FIFO; when the
// FIFO overflows its oldest `update_period` frames move to the speaker cache, and
// a cache over its length is compressed to the frames that best represent each
// speaker (NeMo's SortformerModules.streaming_update, the synchronous one its
// forward_streaming uses by default, or streaming_update_async when the model's
// async_streaming is set: CacheParams::async_streaming), and _compress_spkcache,
// plus a few frames of the mean silence embedding per speaker.
#pragma once

#include <span>
#include <vector>

#include "model/sortformer/model.h"

namespace earshot::sortformer {

// Sizes and scores of one stream's cache (CacheParams with the stream's sizes).
struct AoscConfig {
  int n_speakers = 4;
  int d = 0;  // embedding width (the encoder's d_model)
  CacheParams params;
};

struct AoscState {
  int n_cache = 0;
  std::vector<float> cache;        // [n_cache][d]
  bool has_cache_preds = false;    // NeMo's spkcache_preds is not None (set at the first compression)
  std::vector<float> cache_preds;  // [n_cache][n_speakers] when has_cache_preds
  int n_fifo = 0;
  std::vector<float> fifo;          // [n_fifo][d]
  std::vector<float> fifo_preds;    // [n_fifo][n_speakers]
  std::vector<float> mean_sil_emb;  // [d]
  long long n_sil_frames = 0;
  int compressions = 0;  // times the cache was compressed (for tests and metrics)
};

// One chunk's update. chunk_emb: [n_chunk][d], the whole chunk with its left and
// right context (lc, rc frames); preds: [n_cache + n_fifo + n_chunk][n_speakers],
// the step's probabilities. Returns the chunk's own frames' probabilities
// ([n_chunk - lc - rc][n_speakers]).
std::vector<float> aosc_update(const AoscConfig& config, AoscState& state, std::span<const float> chunk_emb,
                               int n_chunk, std::span<const float> preds, int lc, int rc);

// _compress_spkcache: keeps config.params.spkcache_len of the n frames of emb
// ([n][d]) and preds ([n][n_speakers]); returns the new cache and its predictions.
void aosc_compress(const AoscConfig& config, std::span<const float> emb, std::span<const float> preds, int n,
                   std::span<const float> mean_sil_emb, std::vector<float>& out_emb, std::vector<float>& out_preds);

}  // namespace earshot::sortformer
