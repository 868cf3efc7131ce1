// What every audio-streaming adapter does alike: binary messages are audio for
// the session (decoded, pushed, the scheduler told), an empty one ends the
// stream, the end flushes the decoder, and a closed connection fails a session
// still running and releases it. WhisperLiveKit's and Deepgram's adapters add
// their messages on top.
//
// One message may decode to at most max_message_samples(): the stream's bound on
// audio waiting for the model (--max-buffered-seconds, 60 s by default: a client
// ahead of real time is held back at it, so one message never waits beyond twice
// it, and one paced in real time would lose the excess), or, where that is unbounded (0),
// the bound on one file's decoded audio (--max-audio-minutes). Real clients send
// 20-500 ms per message, or a file in pieces of a few seconds; a compressed
// message that decodes to more (hours of silence in a small FLAC) fails the
// stream as invalid audio before the samples are made.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "audio/audio.h"
#include "server/core.h"
#include "server/stream_protocol.h"
#include "session/stream_session.h"

namespace earshot::server {

// The most samples one client message may decode to (--max-buffered-seconds; the
// upload limit when nothing is buffered), and the error that names it.
inline size_t max_message_samples(const Core& core) {
  const double pending = core.config().stream.max_pending_seconds;
  const double seconds = pending > 0 ? pending : core.config().max_audio_seconds;
  return static_cast<size_t>(seconds * kSampleRate);
}
inline std::string message_too_long(const Core& core, size_t limit) {
  const bool pending = core.config().stream.max_pending_seconds > 0;
  return "invalid audio: one message decodes to more than " + audio::OutputLimitExceeded::seconds_text(limit) +
         " s of audio, the most this server takes per message (" +
         (pending ? "--max-buffered-seconds" : "--max-audio-minutes") + "); send the audio in smaller messages";
}

class AudioStreamProtocol : public StreamProtocol {
 public:
  explicit AudioStreamProtocol(Core& core) : core_(core) {}

  Outgoing on_binary(std::span<const uint8_t> chunk) override {
    if (ended_ || !session_) return {};
    if (chunk.empty()) {  // the client's end of audio
      end_stream();
      return {};
    }
    on_audio_bytes(chunk);
    try {
      decoder_->set_output_limit(max_message_samples());
      session_->push_audio(decoder_->push(chunk));
      core_.scheduler().notify(session_);
    } catch (const audio::OutputLimitExceeded& e) {
      session_->fail(message_too_long(e));
    } catch (const std::exception& e) {
      session_->fail(std::string("invalid audio: ") + e.what());
    }
    return {};
  }

  size_t max_message_samples() const { return server::max_message_samples(core_); }

  // Flushes the decoder and the model.
  void end_stream() override {
    if (ended_ || closed_ || !session_) return;
    ended_ = true;
    try {
      decoder_->set_output_limit(max_message_samples());
      session_->push_audio(decoder_->finish());
    } catch (const audio::OutputLimitExceeded& e) {
      session_->fail(message_too_long(e));
    } catch (const std::exception& e) {
      session_->fail(std::string("invalid audio: ") + e.what());
    }
    session_->end_of_stream();
    core_.scheduler().notify(session_);
  }
  bool ended() const override { return ended_; }
  bool accepting_audio() const override { return !session_ || session_->accepting_audio(); }
  void watch(std::function<void()> wake) override {
    if (session_) session_->set_listener(std::move(wake));
  }
  void halt() override {
    if (session_) session_->halt();
  }
  bool model_running() const override { return session_ && session_->stepping(); }

  void on_close() override {
    if (closed_) return;
    closed_ = true;
    if (session_) {
      if (!session_->done()) session_->fail("client disconnected");
      core_.close_session(session_);
    }
  }

 protected:
  // Every audio message's bytes, before they are decoded (Deepgram hashes them).
  virtual void on_audio_bytes(std::span<const uint8_t>) {}

  std::string message_too_long(const audio::OutputLimitExceeded& e) const {
    return server::message_too_long(core_, e.limit());
  }

  Core& core_;
  std::shared_ptr<session::StreamSession> session_;
  std::unique_ptr<audio::StreamDecoder> decoder_;
  bool ended_ = false;
  bool closed_ = false;
};

}  // namespace earshot::server
