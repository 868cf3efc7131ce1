// Deepgram's live API at /v1/listen over a StreamProtocol, and what the live and
// prerecorded routes share: the API token a Deepgram client presents, the
// decoder for the encoding option, request ids and digests.
#pragma once

#include <memory>
#include <string>

#include "audio/audio.h"
#include "audio/raw_decoder.h"
#include "protocol/deepgram/messages.h"
#include "protocol/deepgram/options.h"
#include "server/stream_protocol.h"

namespace earshot::server {

class Core;

std::unique_ptr<StreamProtocol> make_deepgram_protocol(Core& core);

namespace deepgram_support {

// `token` query parameter, else "Authorization: Token <key>" or "Bearer <key>", else
// the browser subprotocol pair "token, <key>" ("" when none).
std::string token(const std::map<std::string, std::string>& query, const std::string& authorization,
                  const std::string& websocket_protocols);
// The decoder for options.encoding. Throws Error(kInvalidArgument) naming the option
// when this server cannot decode it.
std::unique_ptr<audio::StreamDecoder> make_decoder(const Core& core, const deepgram::ListenOptions& options);
// multichannel: raw audio split into its channels. Throws as make_decoder.
std::unique_ptr<audio::RawChannelsDecoder> make_channels_decoder(const deepgram::ListenOptions& options);
// The language to open the session in ("auto" or a code), checked against the model;
// throws Error(kInvalidArgument) naming the option.
std::string language(const Core& core, const deepgram::ListenOptions& options);
// What a Deepgram request asks of the stages: diarize (always passed, "false" when
// not asked: Deepgram's words carry speakers only when the client says so).
std::map<std::string, std::string> stage_params(const deepgram::ListenOptions& options);
// A fresh request id, the creation time and the model, for every message of one request.
deepgram::StreamInfo stream_info(const Core& core);

// SHA-256 of the audio bytes, as Metadata reports it.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  std::string hex();  // once

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepgram_support

}  // namespace earshot::server
