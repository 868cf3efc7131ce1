// Silero VAD (src/vad/) behind the session's VoiceActivityDetector interface,
// with the server's settings: threshold 0.5, min silence 100 ms, speech pad
// 30 ms, 512-sample windows.
#pragma once

#include <memory>

#include "session/voice_activity.h"
#include "vad/vad.h"

namespace earshot::session {

class SileroVad : public VoiceActivityDetector {
 public:
  explicit SileroVad(std::shared_ptr<const vad::VadModel> model, vad::SegmenterOptions options = {});
  std::vector<VadEvent> push(std::span<const float> samples) override;
  std::vector<VadEvent> finish() override;
  int64_t max_event_delay_samples() const override { return max_delay_; }
  bool end_pending() const override { return detector_.end_pending(); }
  std::optional<int64_t> decided_until() const override { return detector_.decided_until(); }

 private:
  vad::SpeechDetector detector_;
  int64_t max_delay_;
};

// One detector per stream over a model shared by all of them.
VadFactory silero_vad_factory(std::shared_ptr<const vad::VadModel> model, vad::SegmenterOptions options = {});

}  // namespace earshot::session
