#include "server/wlk_adapter.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "protocol/wlk/projection.h"
#include "server/audio_stream_protocol.h"
#include "server/core.h"
#include "server/pcm_decoder.h"

namespace earshot::server {

namespace {

using protocol::wlk::config_message;
using protocol::wlk::error_message;
using protocol::wlk::parse_stream_params;
using protocol::wlk::ready_to_stop_message;
using protocol::wlk::StreamParams;
using protocol::wlk::UpdateEncoder;

// Close codes of the protocol.
constexpr uint16_t kCloseBadRequest = 4400;
constexpr uint16_t kCloseUnauthorized = 4401;

class WlkProtocol : public AudioStreamProtocol {
 public:
  explicit WlkProtocol(Core& core) : AudioStreamProtocol(core) {}

  std::string token(const UpgradeRequest& request) const override {
    auto it = request.target.query.find("token");
    return it != request.target.query.end() ? it->second : Core::bearer_token(request.authorization);
  }

  Outgoing unauthorized() override {
    Outgoing out;
    out.close_with(kCloseUnauthorized, "invalid or missing API token");
    return out;
  }

  std::optional<Outgoing> prepare(const UpgradeRequest& request) override {
    try {
      params_ = parse_stream_params(request.target.query, core_.config().default_language);
    } catch (const Error& e) {
      return refusal(e.what(), kCloseBadRequest);
    }
    if (!core_.config().pcm_input && !core_.hooks().make_decoder)
      return refusal("this server cannot decode encoded audio; run it with --pcm-input and send s16le PCM",
                     kCloseBadRequest);
    return std::nullopt;
  }

  Outgoing refusal(const std::string& message, uint16_t code) override {
    Outgoing out;
    out.send(error_message(message).dump());
    out.close_with(code, message);
    return out;
  }

  Outgoing start() override {
    try {
      // WhisperLiveKit's query has target_language (empty: the server's default target).
      session_ = core_.open_session({params_.language,
                                     false,
                                     core_.config().stream,
                                     {{"target_language", params_.target_language}},
                                     {},
                                     params_.delay_ms});
      decoder_ = core_.config().pcm_input ? std::make_unique<PcmDecoder>() : core_.hooks().make_decoder();
    } catch (const std::exception& e) {
      return refusal(e.what(), kCloseBadRequest);
    }
    encoder_.emplace(params_.diff_mode);
    Outgoing out;
    out.send(config_message(core_.config().pcm_input, params_.diff_mode).dump());
    return out;
  }

  Outgoing on_text(std::string_view) override { return {}; }  // the protocol has no client text messages

  Outgoing on_tick() override {
    Outgoing out;
    protocol::wlk::Snapshot snap = projection_.pull(*session_);
    if (!snap.error.empty()) {
      if (auto message = encoder_->next(snap, true)) out.send(message->dump());
      out.close_with(kCloseBadRequest, snap.error);  // close_with keeps 120 bytes at a character boundary
      return out;
    }
    if (snap.finished && !final_sent_) {
      final_sent_ = true;
      if (auto message = encoder_->next(snap, true)) out.send(message->dump());
      out.send(ready_to_stop_message().dump());
      out.finished_now = true;
    } else if (!final_sent_) {
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      if (auto message = encoder_->next(snap, false, now)) out.send(message->dump());
    }
    return out;
  }
  bool finished() const override { return final_sent_; }

  // What a client would have got at the end had the model caught up, as far as it got:
  // every committed word in the lines (those still waiting for a speaker without one),
  // the provisional tail closing the last line (or opening one), then ready_to_stop.
  Outgoing force_finish() override {
    Outgoing out;
    if (final_sent_) return out;
    final_sent_ = true;
    protocol::wlk::Snapshot snap = projection_.pull(*session_);
    snap = projection_.release_held(snap);
    if (!snap.buffer_transcription.empty()) {
      if (snap.lines.empty() || snap.lines.back().speaker == -2) {
        protocol::wlk::Line line;
        line.start = snap.lines.empty() ? snap.committed_until : snap.lines.back().end;
        for (auto it = snap.lines.rbegin(); it != snap.lines.rend() && line.detected_language.empty(); ++it)
          line.detected_language = it->detected_language;
        snap.lines.push_back(line);
      }
      protocol::wlk::Line& last = snap.lines.back();
      last.text += snap.buffer_transcription;
      last.end = std::max(last.end, snap.transcribed_until);
      snap.buffer_transcription.clear();
    }
    if (auto message = encoder_->next(snap, true)) out.send(message->dump());
    out.send(ready_to_stop_message().dump());
    out.close_for_shutdown();
    out.finished_now = true;
    return out;
  }

 private:
  StreamParams params_;
  std::optional<UpdateEncoder> encoder_;
  protocol::wlk::Projection projection_;  // the session's events as lines and buffers
  bool final_sent_ = false;
};

}  // namespace

std::unique_ptr<StreamProtocol> make_wlk_protocol(Core& core) { return std::make_unique<WlkProtocol>(core); }

}  // namespace earshot::server
