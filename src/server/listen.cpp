// POST /v1/listen: Deepgram's prerecorded API. The body is the audio itself (any
// container FFmpeg decodes, or raw linear16 with sample_rate), the options are
// the query's, and the answer is Deepgram's prerecorded JSON.
#include <algorithm>

#include "common/error.h"
#include "protocol/deepgram/messages.h"
#include "protocol/target.h"
#include "protocol/transcript.h"
#include "server/core.h"
#include "server/deepgram_adapter.h"
#include "server/routes.h"

namespace earshot::server {

namespace {

using protocol::parse_target;
using protocol::Target;

HttpResponse deepgram_error(int status, const std::string& code, const std::string& message,
                            const std::string& request_id) {
  HttpResponse r;
  r.status = status;
  r.body = deepgram::rest_error(code, message, request_id).dump();
  return r;
}

}  // namespace

HttpResponse deepgram_listen(Core& core, const HttpRequest& request) {
  const ServerConfig& config = core.config();
  deepgram::StreamInfo info = deepgram_support::stream_info(core);
  const Target target = parse_target(request.target);
  deepgram::ListenOptions options;
  std::string language;
  std::unique_ptr<audio::StreamDecoder> decoder;
  std::unique_ptr<audio::RawChannelsDecoder> split;
  try {
    options = deepgram::parse_listen_options(target.query, target.pairs);
    language = deepgram_support::language(core, options);
    if (options.multichannel)
      split = deepgram_support::make_channels_decoder(options);
    else
      decoder = deepgram_support::make_decoder(core, options);
  } catch (const Error& e) {
    return deepgram_error(400, "Bad Request", e.what(), info.request_id);
  }
  std::string type = request.header("content-type");
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (type.rfind("application/json", 0) == 0)
    return deepgram_error(400, "Bad Request",
                          "this server does not fetch audio from a URL: send the audio bytes as the request body",
                          info.request_id);
  if (request.body.empty())
    return deepgram_error(400, "Bad Request", "empty request body: send the audio bytes", info.request_id);

  // The channels' samples (one for mono or mixed audio), each at most max_audio_seconds.
  std::vector<std::vector<float>> channels;
  try {
    if (split) {
      // Raw audio says its length before anything is decoded: the limit first.
      if (split->seconds_in(request.body.size()) > config.max_audio_seconds)
        return deepgram_error(
            413, "Payload Too Large",
            "the audio is longer than " + std::to_string(static_cast<int>(config.max_audio_seconds)) + " s per channel",
            info.request_id);
      channels = split->push(std::span(reinterpret_cast<const uint8_t*>(request.body.data()), request.body.size()));
      const std::vector<std::vector<float>> rest = split->finish();
      for (size_t c = 0; c < channels.size(); ++c)
        channels[c].insert(channels[c].end(), rest[c].begin(), rest[c].end());
      if (!channels.empty() && channels[0].size() > config.max_audio_seconds * kSampleRate)
        return deepgram_error(
            413, "Payload Too Large",
            "the audio is longer than " + std::to_string(static_cast<int>(config.max_audio_seconds)) + " s per channel",
            info.request_id);
    } else {
      Core::UploadAudio audio = core.decode_upload(request.body, *decoder);
      if (!audio.too_long.empty()) return deepgram_error(413, "Payload Too Large", audio.too_long, info.request_id);
      channels.push_back(std::move(audio.samples));
    }
  } catch (const std::exception& e) {
    return deepgram_error(400, "Bad Request", std::string("cannot decode the audio: ") + e.what(), info.request_id);
  }
  info.channels = static_cast<int>(channels.size());

  // The channels one after another, in this request's one session slot.
  std::vector<deepgram::ChannelTranscript> transcripts;
  for (const std::vector<float>& samples : channels) {
    std::shared_ptr<session::StreamSession> session;
    try {
      session = core.open_session(
          {language, true, config.file, deepgram_support::stage_params(options), options.keyterms, options.delay_ms});
    } catch (const Error& e) {
      return deepgram_error(e.code() == ErrorCode::kInvalidArgument ? 400 : 500, "Bad Request", e.what(),
                            info.request_id);
    }
    Core::FileResult result = core.transcribe_samples(session, samples);
    if (result.timed_out)
      return deepgram_error(408, "Request Timeout",
                            "transcription took longer than " +
                                std::to_string(static_cast<int>(config.transcription_timeout_seconds)) + " s",
                            info.request_id);
    const session::EventBatch& batch = result.batch;
    if (!batch.status.error.empty())
      return deepgram_error(500, "Internal Server Error", "transcription failed: " + batch.status.error,
                            info.request_id);
    deepgram::ChannelTranscript t;
    t.words = protocol::committed_words(batch.events);
    deepgram::number_speakers_from_zero(t.words);
    if (language == "auto")
      for (const Word& w : t.words)
        if (!w.language.empty()) t.language = w.language;
    transcripts.push_back(std::move(t));
  }
  deepgram_support::Sha256 sha;
  sha.update(request.body.data(), request.body.size());
  const double duration = static_cast<double>(channels.front().size()) / kSampleRate;
  HttpResponse r;
  r.body = deepgram::prerecorded_response(transcripts, duration, options, info, sha.hex()).dump();
  return r;
}

}  // namespace earshot::server
