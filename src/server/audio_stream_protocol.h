// What every audio-streaming adapter does alike: binary messages are audio for
// the session (decoded, pushed, the scheduler told), an empty one ends the
// stream, the end flushes the decoder, and a closed connection fails a session
// still running and releases it. WhisperLiveKit's and Deepgram's adapters add
// their messages on top.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "audio/audio.h"
#include "server/core.h"
#include "server/stream_protocol.h"
#include "session/stream_session.h"

namespace earshot::server {

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
      session_->push_audio(decoder_->push(chunk));
      core_.scheduler().notify(session_);
    } catch (const std::exception& e) {
      session_->fail(std::string("invalid audio: ") + e.what());
    }
    return {};
  }

  // Flushes the decoder and the model.
  void end_stream() override {
    if (ended_ || closed_ || !session_) return;
    ended_ = true;
    try {
      session_->push_audio(decoder_->finish());
    } catch (const std::exception& e) {
      session_->fail(std::string("invalid audio: ") + e.what());
    }
    session_->end_of_stream();
    core_.scheduler().notify(session_);
  }
  bool ended() const override { return ended_; }

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

  Core& core_;
  std::shared_ptr<session::StreamSession> session_;
  std::unique_ptr<audio::StreamDecoder> decoder_;
  bool ended_ = false;
  bool closed_ = false;
};

}  // namespace earshot::server
