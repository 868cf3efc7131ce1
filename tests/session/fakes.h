// Deterministic doubles for session and server tests: an online processor whose
// words depend only on the audio content (never on how it was chunked or
// scheduled) and an energy VAD on 512-sample windows.
#pragma once

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "policy/online_processor.h"
#include "session/voice_activity.h"

namespace earshot::testing {

// One word per complete 0.5 s window of speech: " w<mean |x| in thousandths>",
// spanning the window. A flush (is_last) commits the partial window as
// " p<...>" when it holds at least 0.1 s. The partial window is the provisional
// text " ~". Throws kInvalidAudio for a window whose samples are all exactly 0.5
// (lets tests make the model fail on purpose).
class FakeProcessor : public OnlineProcessor {
 public:
  static constexpr int kWindow = 8000;
  struct Hooks {
    std::function<void()> on_process;  // called at the start of every pass
    std::string language = "en";
  };
  FakeProcessor() = default;
  explicit FakeProcessor(Hooks hooks) : hooks_(std::move(hooks)) {}

  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    if (buffer_.empty()) buffer_start_ = stream_end_time - static_cast<double>(samples.size()) / 16000.0;
    buffer_.insert(buffer_.end(), samples.begin(), samples.end());
    inserted_ += samples.size();
    inserted_until_ = stream_end_time;
  }
  ProcessResult process(bool is_last) override {
    ++passes_;
    if (hooks_.on_process) hooks_.on_process();
    ProcessResult result;
    size_t windows = buffer_.size() / kWindow;
    for (size_t i = 0; i < windows; ++i) result.committed.push_back(word(i * kWindow, kWindow, "w"));
    buffer_start_ += static_cast<double>(windows * kWindow) / 16000.0;
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(windows * kWindow));
    if (is_last) {
      if (buffer_.size() >= 1600) result.committed.push_back(word(0, buffer_.size(), "p"));
      buffer_.clear();
    }
    result.processed_until = buffer_start_ + static_cast<double>(buffer_.size()) / 16000.0;
    return result;
  }
  std::vector<Word> provisional() const override {
    if (buffer_.empty()) return {};
    Word w;
    w.text = " ~";
    w.start = buffer_start_;
    w.end = buffer_start_ + static_cast<double>(buffer_.size()) / 16000.0;
    return {w};
  }
  std::vector<Word> hypothesis() const override { return provisional(); }
  ProcessResult start_silence() override { return process(true); }
  void end_silence(double duration, double offset) override {
    silences_.push_back({duration, offset});
    buffer_.clear();
  }
  ProcessResult finish() override { return process(true); }
  void prepare_flush() override { ++prepared_; }
  void warmup() override {}
  std::string language() const override { return hooks_.language; }

  int passes() const { return passes_; }
  int prepared() const { return prepared_; }  // prepare_flush calls
  size_t inserted() const { return inserted_; }
  double inserted_until() const { return inserted_until_; }  // stream time of the last sample inserted

 private:
  Word word(size_t from, size_t count, const char* prefix) const {
    double sum = 0;
    bool poison = true;
    for (size_t i = from; i < from + count; ++i) {
      sum += std::fabs(buffer_[i]);
      poison = poison && buffer_[i] == 0.5f;
    }
    if (poison) throw Error(ErrorCode::kInvalidAudio, "fake model refuses a window of constant 0.5");
    char text[32];
    std::snprintf(text, sizeof text, " %s%ld", prefix, std::lround(sum / static_cast<double>(count) * 1000.0));
    Word w;
    w.text = text;
    w.start = buffer_start_ + static_cast<double>(from) / 16000.0;
    w.end = buffer_start_ + static_cast<double>(from + count) / 16000.0;
    return w;
  }

  Hooks hooks_;
  std::vector<float> buffer_;
  double buffer_start_ = 0;
  size_t inserted_ = 0;
  double inserted_until_ = 0;
  int passes_ = 0;
  int prepared_ = 0;

 public:
  std::vector<std::pair<double, double>> silences_;  // (duration, offset) of end_silence calls
};

// Speech = a 512-sample window with a sample above 0.01 in magnitude. Starts at
// the first speech window; ends after 3 silent windows, at the end of the last
// speech window (pending from the first silent one).
class FakeVad : public session::VoiceActivityDetector {
 public:
  std::vector<session::VadEvent> push(std::span<const float> samples) override {
    std::vector<session::VadEvent> events;
    for (float x : samples) {
      window_max_ = std::max(window_max_, std::fabs(x));
      if (++in_window_ < 512) continue;
      bool speech = window_max_ > 0.01f;
      int64_t window_start = windows_ * 512;
      ++windows_;
      in_window_ = 0;
      window_max_ = 0;
      if (speech) {
        if (!speaking_) events.push_back({session::VadEvent::Kind::kSpeechStart, window_start});
        speaking_ = true;
        silent_windows_ = 0;
        last_speech_end_ = windows_ * 512;
      } else if (speaking_ && ++silent_windows_ == 3) {
        events.push_back({session::VadEvent::Kind::kSpeechEnd, last_speech_end_});
        speaking_ = false;
      }
    }
    return events;
  }
  std::vector<session::VadEvent> finish() override { return {}; }
  int64_t max_event_delay_samples() const override { return 4 * 512; }
  bool end_pending() const override { return speaking_ && silent_windows_ > 0; }

 private:
  int64_t windows_ = 0;
  int in_window_ = 0;
  float window_max_ = 0;
  bool speaking_ = false;
  int silent_windows_ = 0;
  int64_t last_speech_end_ = 0;
};

// Test audio: a square-ish signal of the given amplitude, or silence.
inline std::vector<float> tone(double seconds, float amplitude) {
  std::vector<float> out(static_cast<size_t>(seconds * 16000));
  for (size_t i = 0; i < out.size(); ++i) out[i] = (i / 20) % 2 ? amplitude : -amplitude;
  return out;
}
inline std::vector<float> silence(double seconds) { return std::vector<float>(static_cast<size_t>(seconds * 16000)); }
inline std::vector<float> concat(std::initializer_list<std::vector<float>> parts) {
  std::vector<float> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace earshot::testing
