// Baseline "whispercpp-stream": the sliding-window recipe of whisper.cpp's
// examples/stream (stream.cpp, sliding-window mode), on libwhisper, behind the
// OnlineProcessor contract so the bench measures it exactly like earshot.
//
// The recipe (stream.cpp defaults): every step of 3 s of new audio, run a full
// whisper_full() over the window = the audio kept from the previous step (up
// to keep + length - step) + the new step, i.e. at most 10.2 s; greedy, no
// timestamps, single segment, no prompt (no_context), temperature fallback on,
// flash attention on, language "en" unless set. Every n_new_line =
// max(1, length/step - 1) = 2 steps the line is finished: the printed text
// becomes final and only the last 0.2 s (keep) is carried into the next line.
//
// What "committed" means here: the words of a finished line (the text of the
// last decode of that window), at the step that finishes it. Until then the
// line's current text is provisional (it is rewritten in place on a terminal).
// Word timestamps: token-level timestamps of that decode (whisper.cpp's
// token_timestamps, post-processing that does not change the decoding),
// shifted by the window's start in the stream and clamped to the window.
// finish(): decodes the remaining partial step and commits the open line
// (stream.cpp would drop audio after the last full step; scoring the whole
// file is fairer to the baseline). Realtime overload: stream.cpp drops audio
// when it falls more than two steps behind; here every step is decoded in
// order, so falling behind shows as lag instead of as missing words.
#pragma once

#include <memory>
#include <string>

#include "bench/runner.h"

namespace earshot::bench {

struct WhisperCppStreamOptions {
  std::string model_path;
  std::string language = "en";
  int threads = 4;
  int step_ms = 3000;
  int length_ms = 10000;
  int keep_ms = 200;
  bool no_fallback = false;  // stream.cpp -nf: no temperature fallback (faster on random-weight models)
  bool use_gpu = true;       // stream.cpp's default; false when earshot bench runs the model on the CPU
};

// Loads the model (libwhisper prints its own log to stderr); throws
// earshot::Error(kInvalidModel) when libwhisper cannot load it.
StreamHandle make_whispercpp_stream(const WhisperCppStreamOptions& options);

}  // namespace earshot::bench
