// Qwen3-ASR's audio encoder a window at a time, keeping what has not changed.
// libmtmd cuts a buffer's log-mel into 800-frame windows (8 s), each an encoder
// graph of its own: the conv stem per 100-frame chunk (13 tokens), attention
// confined to the window's tokens (104 for a whole one). A window's audio tokens
// therefore depend on its own mel frames only, and once a window is complete
// they do not change from pass to pass, except where its mel does: the mel is
// normalised against the whole buffer's maximum (Whisper's clamp to max - 8),
// and the first two frames of a buffer see the STFT's reflection padding.
//
// Within a window the conv stem (three conv2d, conv_out, the position
// embeddings) runs per 100-frame chunk, each chunk's products on their own
// (earshot's patch to libmtmd, mtmd_context_params::audio_stem), so a chunk's stem
// output depends on its own mel only: a re-encoded window computes the stem only
// for its chunks from the first whose mel changed, and takes the earlier ones'
// from the last encode. A window's tokens then still equal a full re-encode's bit
// for bit (the attention and what follows run over the whole window either way).
//
// So a window is re-encoded exactly when the mel libmtmd makes for it differs,
// bit for bit, from the mel it was last encoded from. The mel is read where
// the graph computes it (its first node, `inp_chunks`, through libmtmd's
// evaluation callback); a window whose mel is unchanged stops its graph right
// there and keeps its tokens. The result equals a full re-encode bit for bit
// (the same graph on the same input), mtmd's zero-padding of the last window to
// whole chunks included.
#pragma once

#include <cstdint>
#include <vector>

namespace earshot::qwen3asr {

inline constexpr int kHopSamples = 160;                             // mel frames every 10 ms
inline constexpr int kWindowFrames = 800;                           // libmtmd's n_window_infer
inline constexpr int kChunkFrames = 100;                            // the conv stem's chunk
inline constexpr int kTokensPerChunk = 13;                          // after three stride-2 convs
inline constexpr int kWindowSamples = kWindowFrames * kHopSamples;  // 128000: 8 s

// One window as last encoded (a stream's, kept across passes).
struct EncodedWindow {
  std::vector<float> mel;   // the graph's input as libmtmd made it: what decides reuse
  std::vector<float> embd;  // its audio tokens, n_tokens x n_embd (mtmd's padding tokens included)
  std::vector<float> stem;  // its first stem_chunks chunks' stem outputs (13 x the encoder's width each)
  int stem_chunks = 0;
  int n_tokens = 0;
  uint64_t id = 0;  // unique per encode within a stream: the prompt's audio positions are keyed by it
};

// What one encode did.
struct EncodeStats {
  int windows = 0;     // windows of the buffer
  int encoded = 0;     // of them, run through the encoder
  int reused = 0;      // of them, kept (their mel unchanged)
  int stems = 0;       // chunks of the encoded windows whose conv stem ran
  int stems_kept = 0;  // chunks of the encoded windows whose stem output was kept
};

}  // namespace earshot::qwen3asr
