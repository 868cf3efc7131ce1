// `earshot bench --workload reference` for a cache-aware streaming transducer
// (Nemotron streaming): the model's real graphs, a real model's emissions.
// Random weights emit a symbol at almost every greedy step (up to the per-frame
// bound), so the prediction and joint networks run several times per encoder
// frame and a capacity run measures junk. A real transducer emits one piece per
// ~0.1-0.3 s of speech and blank everywhere else (a TDT model skipping frames on
// its blanks). Here the encoder, prediction network and joint run as the model's
// own (every joint step is computed), but each step's choice is the reference
// transcript's, as a steer (model/transducer_stream.h) installed through
// engine::StreamRequest::steer_transducer; no product code path has it:
//
//  * Pieces: each reference word is spelt with the model's vocabulary, the
//    fewest pieces that spell it exactly (a word-start piece, then
//    continuations); a word the vocabulary cannot spell is lower-cased and
//    stripped to letters and digits, and a character still left over takes a
//    stand-in piece (so its text differs). A real vocabulary spells English in
//    about 1.3 pieces a word; a generated model's made-up pieces take more,
//    which makes the workload heavier, not lighter.
//  * Times: the words' estimated times (reference_workload.h: spread over the
//    VAD's speech segments); the k-th of a word's n pieces is emitted at the
//    encoder frame that holds start + (k + 1)/n of its span (a piece is emitted
//    once heard; real models emit around the piece's end). A piece whose time
//    has passed (it fell in a pause the VAD cut) is emitted at the next step.
//  * Blanks: every other step. For TDT, a blank skips to the frame of the next
//    piece due (capped at the largest duration), and a piece's duration is the
//    frames to the next one (0 when it is due in the same frame): the fewest
//    joint steps a perfect TDT model takes. RNN-T: a blank per frame.
//
// What it models: the streaming encoder's chunks (unchanged), the number of
// joint steps and prediction-network updates a real model makes at the
// reference's speaking rate, and the native policy's word commit latency. What
// it does not: a real model's errors (WER is 0 where the vocabulary spells the
// reference), its emission delay (which varies by model and lookahead), or real
// speaking-rate variation within a VAD segment.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/reference_workload.h"
#include "model/transducer_stream.h"
#include "policy/online_processor.h"

namespace earshot::bench {

// Stream time of the current segment's first sample (a streaming transducer's
// frames count from there), kept by SegmentClockProcessor for the steer.
struct SegmentClock {
  double start = 0;
  bool open = false;  // audio inserted since the last segment end
};

class TransducerReference : public TransducerSteer {
 public:
  TransducerReference(std::vector<TimedWord> words, std::shared_ptr<const SegmentClock> clock);

  void bind(const TokenPieces& pieces, int n_vocab, const std::vector<int>& durations, double frame_seconds) override;
  Choice choose(int frame) override;

  // After bind: the reference as pieces, each piece's emission time, and how
  // many pieces took a stand-in (a character the vocabulary lacks).
  const std::vector<int>& tokens() const { return tokens_; }
  const std::vector<double>& token_times() const { return token_time_; }
  int stand_ins() const { return stand_ins_; }
  size_t emitted() const { return cursor_; }
  long long steps() const { return steps_; }  // choices made (joint steps)
  bool bound() const { return bound_; }

 private:
  // The frame of the current segment holding stream time `t` (negative: before it).
  long long frame_of(double t) const;
  int duration_index_at_most(long long frames) const;

  std::vector<TimedWord> words_;
  std::shared_ptr<const SegmentClock> clock_;
  std::vector<int> tokens_;
  std::vector<double> token_time_;
  std::vector<int> durations_;
  int largest_duration_ = 1;  // RNN-T: a blank moves one frame
  int blank_ = 0;
  int stand_ins_ = 0;
  double frame_seconds_ = 0.08;
  size_t cursor_ = 0;  // next piece to emit
  long long steps_ = 0;
  bool bound_ = false;
};

// OnlineProcessor decorator that keeps the segment clock as the streaming
// transducer processor starts and ends its segments (policy/transducer/).
class SegmentClockProcessor : public OnlineProcessor {
 public:
  SegmentClockProcessor(std::unique_ptr<OnlineProcessor> inner, std::shared_ptr<SegmentClock> clock)
      : inner_(std::move(inner)), clock_(std::move(clock)) {}
  void insert_audio(std::span<const float> samples, double stream_end_time) override;
  ProcessResult process(bool is_last) override;
  std::vector<Word> provisional() const override { return inner_->provisional(); }
  std::vector<Word> hypothesis() const override { return inner_->hypothesis(); }
  ProcessResult start_silence() override { return ended(inner_->start_silence()); }
  void end_silence(double duration, double offset) override { inner_->end_silence(duration, offset); }
  ProcessResult finish() override { return ended(inner_->finish()); }
  void prepare_flush() override { inner_->prepare_flush(); }
  void warmup() override { inner_->warmup(); }
  std::string language() const override { return inner_->language(); }

 private:
  ProcessResult ended(ProcessResult r) {
    clock_->open = false;
    return r;
  }
  std::unique_ptr<OnlineProcessor> inner_;
  std::shared_ptr<SegmentClock> clock_;
};

}  // namespace earshot::bench
