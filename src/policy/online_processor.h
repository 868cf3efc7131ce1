// The online-processor contract: one interface for every streaming policy
// (AlignAtt, LocalAgreement-2) and model family. One instance per stream; the
// model behind it is shared. Committed output is append-only: a word once
// returned by process() is never retracted or repeated.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/word.h"

namespace earshot {

struct ProcessResult {
  std::vector<Word> committed;  // newly committed words, in order
  double processed_until = 0;   // audio time (s) covered by the model so far
};

class OnlineProcessor {
 public:
  virtual ~OnlineProcessor() = default;

  // Appends 16 kHz mono samples; stream_end_time is the stream time (s) at the
  // end of these samples.
  virtual void insert_audio(std::span<const float> samples, double stream_end_time) = 0;
  // Runs the policy over the buffered audio. is_last: no more audio will come
  // for this segment (flush semantics: commit everything that is left).
  virtual ProcessResult process(bool is_last = false) = 0;
  // The uncommitted tail, what clients show greyed out.
  virtual std::vector<Word> provisional() const = 0;
  // Committed so far followed by provisional().
  virtual std::vector<Word> hypothesis() const = 0;

  // Speech paused (VAD): flush with last-pass semantics.
  virtual ProcessResult start_silence() = 0;
  // Speech resumed after `duration` seconds of silence ending at stream time `offset`:
  // a pause under 5 s inserts that much silence and keeps the context; a longer
  // one resets the segment and moves the time offset.
  virtual void end_silence(double duration, double offset) = 0;
  // End of stream: flushes and returns the last committed words.
  virtual ProcessResult finish() = 0;
  // Speech may be ending here (the VAD has an end pending): a processor whose
  // flush can be worked out ahead without changing anything does so now, and
  // the start_silence() that follows with no audio inserted between is quicker.
  // Any other call drops that work. Does nothing by default.
  virtual void prepare_flush() {}
  // Runs the model once on a short clip so the first real pass is not slow.
  virtual void warmup() = 0;

  // The language words are being committed in ("" while auto-detection waits).
  virtual std::string language() const = 0;
};

}  // namespace earshot
