// An OnlineProcessor for any backend that re-decodes a window of audio on every
// pass and may revise what it said (Qwen3-ASR's rolling mode, an offline model
// run on a growing buffer): the hypotheses go through the commit layer
// (stable_commit.h), so committed words stay append-only. The segment is the
// window: it grows until it is finalised (end of stream, a pause, or
// max_segment_sec), then a new one starts with the committed text as context.
// Word times are the decoder's own where it has them (WindowPass::words: a
// transducer's frames), else spread over the segment in proportion to position.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "policy/commit/stable_commit.h"
#include "policy/processor_base.h"

namespace earshot::policy::commit {

struct WindowRequest {
  std::span<const float> audio;  // the whole segment, 16 kHz mono
  std::string context;           // committed text before the segment (previous segments), newest last
  std::string committed;         // what is committed of this segment: a decoder may force it as prefix
  std::string language;          // a code, or "auto"
  bool is_last = false;          // the segment ends after this pass
  size_t pass = 0;               // passes of this segment before this one (0: a new segment)
};

struct WindowPass {
  Hypothesis hypothesis;  // the text of the whole segment
  std::string language;   // the language decoded in ("" when unknown)
  // Optional: the hypothesis as timed words (seconds from the segment's first
  // sample), their texts joined equal to hypothesis.text. Empty: no times known.
  std::vector<Word> words;
};

class WindowDecoder {
 public:
  virtual ~WindowDecoder() = default;
  virtual WindowPass decode(const WindowRequest& request) = 0;
  // The stream paused for RevisingConfig::long_silence: what the decoder carries
  // from segment to segment starts afresh.
  virtual void reset() {}
  // Runs the decoder's graphs once (first-call latency) without changing its
  // state. Default: decodes one second of silence as a segment of its own.
  virtual void warmup(const std::string& language);
};

struct RevisingConfig {
  CommitConfig commit;
  std::string language = "auto";
  double pass_interval_sec = 2.0;  // new audio needed between two passes (re-decoding is the cost)
  double min_audio_sec = 0.5;      // no pass on less buffered audio
  double max_segment_sec = 15.0;   // a longer segment is finalised and a new one started
  size_t context_chars = 200;      // committed text of earlier segments handed to the decoder
  double long_silence = 5.0;
  void validate() const;  // throws earshot::Error(kInvalidArgument)
};

class RevisingProcessor : public ProcessorBase {
 public:
  RevisingProcessor(std::unique_ptr<WindowDecoder> decoder, RevisingConfig config);

  void insert_audio(std::span<const float> samples, double stream_end_time) override;
  ProcessResult process(bool is_last = false) override;
  void end_silence(double duration, double offset) override;
  void warmup() override;

  double buffered_seconds() const { return static_cast<double>(audio_.size()) / kSampleRate; }
  const StableCommitter& committer() const { return committer_; }
  size_t corrections() const { return corrections_; }  // finalisations that changed shown text

 private:
  WindowRequest request(bool is_last) const;
  // Words of `text`, which starts at byte `offset` of a `total`-byte hypothesis:
  // each unit gets the times of the pass's timed words it lies in, or without
  // them a time proportional to its position in the segment.
  std::vector<Word> words_of(const std::string& text, size_t offset, size_t total) const;
  void end_segment();

  std::unique_ptr<WindowDecoder> decoder_;
  RevisingConfig config_;
  StableCommitter committer_;
  std::vector<float> audio_;
  size_t samples_at_last_pass_ = 0;
  size_t passes_ = 0;  // of the current segment
  size_t corrections_ = 0;
  std::vector<Word> pass_words_;  // the last pass's timed words (WindowPass::words)
};

}  // namespace earshot::policy::commit
