#include "policy/transducer/native_processors.h"

#include <algorithm>

#include "common/sample_rate.h"
#include "policy/transducer/word_assembler.h"

namespace earshot::policy {
namespace {

constexpr double kLongPause = 5.0;  // the contract's reset threshold (online_processor.h)

// What the append-only transducer processors share: a word is committed as soon
// as the next one starts; the prediction network's state runs across windows or chunks.
class TransducerWords : public OnlineProcessor {
 public:
  TransducerWords(TransducerStream& stream, const std::string& language)
      : stream_(stream), words_(WordAssembler::for_stream(stream, language)) {}

  std::vector<Word> provisional() const override {
    if (words_.pending.text.empty()) return {};
    return {words_.pending};
  }
  std::vector<Word> hypothesis() const override {
    std::vector<Word> all = committed_;
    if (!words_.pending.text.empty()) all.push_back(words_.pending);
    return all;
  }
  void end_silence(double duration, double /*offset*/) override {
    // The buffer is empty after start_silence's flush: the next insert_audio sets
    // the time. A long pause starts the prediction network afresh.
    if (duration >= kLongPause) stream_.reset_state();
  }
  std::string language() const override { return words_.language; }
  void warmup() override { stream_.warmup(); }

 protected:
  double frame_seconds() const { return words_.frame_seconds; }

  void flush(std::vector<Word>& committed) {
    const size_t before = committed.size();
    words_.flush(committed);
    keep_committed(committed, before);
  }
  // Tokens of frames whose frame 0 is at time_origin, of audio up to audio_end.
  void decode(const std::vector<TokenEmission>& emissions, double time_origin, double audio_end,
              std::vector<Word>& committed) {
    const size_t before = committed.size();
    words_.add(emissions, time_origin, committed, audio_end);
    keep_committed(committed, before);
  }
  // The stream's history gets the words appended to `committed` from index `from` on.
  void keep_committed(const std::vector<Word>& committed, size_t from) {
    committed_.insert(committed_.end(), committed.begin() + static_cast<std::ptrdiff_t>(from), committed.end());
  }

 private:
  TransducerStream& stream_;
  WordAssembler words_;
  std::vector<Word> committed_;
};

class NativeTransducerProcessor : public TransducerWords {
 public:
  NativeTransducerProcessor(std::unique_ptr<OfflineTransducer> stream, double window_seconds,
                            const std::string& language)
      : TransducerWords(*stream, language),
        stream_(std::move(stream)),
        window_samples_(static_cast<size_t>(window_seconds * kSampleRate)) {}

  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    if (samples_.empty()) buffer_start_ = stream_end_time - static_cast<double>(samples.size()) / kSampleRate;
    samples_.insert(samples_.end(), samples.begin(), samples.end());
  }

  ProcessResult process(bool is_last) override {
    ProcessResult result;
    while (samples_.size() >= window_samples_ || (is_last && !samples_.empty())) {
      const size_t n = std::min(samples_.size(), window_samples_);
      decode(stream_->decode(std::span<const float>(samples_.data(), n), /*keep_state=*/true), buffer_start_,
             buffer_start_ + static_cast<double>(n) / kSampleRate, result.committed);
      samples_.erase(samples_.begin(), samples_.begin() + static_cast<std::ptrdiff_t>(n));
      buffer_start_ += static_cast<double>(n) / kSampleRate;
    }
    if (is_last) flush(result.committed);
    result.processed_until = buffer_start_;
    return result;
  }

  ProcessResult start_silence() override { return process(true); }
  ProcessResult finish() override { return process(true); }

 private:
  std::unique_ptr<OfflineTransducer> stream_;
  size_t window_samples_;
  std::vector<float> samples_;
  double buffer_start_ = 0;
};

class StreamingTransducerProcessor : public TransducerWords {
 public:
  StreamingTransducerProcessor(std::unique_ptr<StreamingTransducer> stream, const std::string& language)
      : TransducerWords(*stream, language), stream_(std::move(stream)) {}

  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    if (segment_samples_ == 0 && samples_.empty())
      segment_start_ = stream_end_time - static_cast<double>(samples.size()) / kSampleRate;
    samples_.insert(samples_.end(), samples.begin(), samples.end());
  }

  ProcessResult process(bool is_last) override {
    ProcessResult result;
    segment_samples_ += static_cast<long long>(samples_.size());
    if (is_last && segment_samples_ > 0) {
      // The segment's last audio and its end together: a flush is one pass.
      decode(stream_->finish_with(samples_), segment_start_, segment_end(), result.committed);
      segment_start_ += static_cast<double>(segment_samples_) / kSampleRate;
      segment_samples_ = 0;
      done_frames_ = 0;
    } else {
      if (!samples_.empty()) decode(stream_->push(samples_), segment_start_, segment_end(), result.committed);
      done_frames_ = stream_->frames_done();
    }
    samples_.clear();
    if (is_last) flush(result.committed);
    result.processed_until = segment_start_ + done_frames_ * frame_seconds();
    return result;
  }

  ProcessResult start_silence() override { return process(true); }
  ProcessResult finish() override { return process(true); }
  void prepare_flush() override {
    if (segment_samples_ > 0 || !samples_.empty()) stream_->prepare_finish(samples_);
  }

 private:
  double segment_end() const { return segment_start_ + static_cast<double>(segment_samples_) / kSampleRate; }

  std::unique_ptr<StreamingTransducer> stream_;
  std::vector<float> samples_;
  double segment_start_ = 0;
  long long segment_samples_ = 0;
  int done_frames_ = 0;
};

class TransducerWindowDecoder : public commit::WindowDecoder {
 public:
  TransducerWindowDecoder(std::unique_ptr<OfflineTransducer> stream, const std::string& language)
      : stream_(std::move(stream)), words_(WordAssembler::for_stream(*stream_, language)) {}

  commit::WindowPass decode(const commit::WindowRequest& request) override {
    commit::WindowPass pass;
    WordAssembler words = words_;  // as the segment began: its language, the first-word rule
    if (!request.audio.empty()) {
      words.add(stream_->decode(request.audio, /*keep_state=*/request.is_last), 0.0, pass.words,
                static_cast<double>(request.audio.size()) / kSampleRate);
      words.flush(pass.words);
    }
    for (const Word& w : pass.words) pass.hypothesis.text += w.text;
    pass.language = words.language;
    if (request.is_last) {  // the segment ends: the next one starts where this one's decoding left off
      words_.language = words.language;
      words_.stream_has_words = words.stream_has_words;
    }
    return pass;
  }
  void reset() override { stream_->reset_state(); }
  void warmup(const std::string& /*language*/) override { stream_->warmup(); }

 private:
  std::unique_ptr<OfflineTransducer> stream_;
  WordAssembler words_;
};

}  // namespace

std::unique_ptr<OnlineProcessor> native_transducer_processor(std::unique_ptr<OfflineTransducer> stream,
                                                             double window_seconds, const std::string& language) {
  return std::make_unique<NativeTransducerProcessor>(std::move(stream), window_seconds, language);
}

std::unique_ptr<OnlineProcessor> streaming_transducer_processor(std::unique_ptr<StreamingTransducer> stream,
                                                                const std::string& language) {
  return std::make_unique<StreamingTransducerProcessor>(std::move(stream), language);
}

std::unique_ptr<commit::WindowDecoder> transducer_window_decoder(std::unique_ptr<OfflineTransducer> stream,
                                                                 const std::string& language) {
  return std::make_unique<TransducerWindowDecoder>(std::move(stream), language);
}

}  // namespace earshot::policy
