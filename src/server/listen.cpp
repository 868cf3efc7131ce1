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

HttpResponse Core::listen(const HttpRequest& request) {
  deepgram::StreamInfo info = deepgram_support::stream_info(*this);
  const Target target = parse_target(request.target);
  deepgram::ListenOptions options;
  std::string language;
  std::unique_ptr<audio::StreamDecoder> decoder;
  try {
    options = deepgram::parse_listen_options(target.query);
    language = deepgram_support::language(*this, options);
    decoder = deepgram_support::make_decoder(*this, options);
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

  UploadAudio audio;
  try {
    audio = decode_upload(request.body, *decoder);
  } catch (const std::exception& e) {
    return deepgram_error(400, "Bad Request", std::string("cannot decode the audio: ") + e.what(), info.request_id);
  }
  if (!audio.too_long.empty()) return deepgram_error(413, "Payload Too Large", audio.too_long, info.request_id);

  std::shared_ptr<session::StreamSession> session;
  try {
    session = open_session(language, true, config_.file, deepgram_support::stage_params(options));
  } catch (const Error& e) {
    return deepgram_error(e.code() == ErrorCode::kInvalidArgument ? 400 : 500, "Bad Request", e.what(),
                          info.request_id);
  }
  FileResult result = transcribe_samples(session, audio.samples);
  if (result.timed_out)
    return deepgram_error(408, "Request Timeout",
                          "transcription took longer than " +
                              std::to_string(static_cast<int>(config_.transcription_timeout_seconds)) + " s",
                          info.request_id);
  const session::EventBatch& batch = result.batch;
  if (!batch.status.error.empty())
    return deepgram_error(500, "Internal Server Error", "transcription failed: " + batch.status.error, info.request_id);
  std::vector<Word> words = protocol::committed_words(batch.events);
  deepgram::number_speakers_from_zero(words);
  std::string detected;
  if (language == "auto")
    for (const Word& w : words)
      if (!w.language.empty()) detected = w.language;
  deepgram_support::Sha256 sha;
  sha.update(request.body.data(), request.body.size());
  const double duration = static_cast<double>(audio.samples.size()) / kSampleRate;
  HttpResponse r;
  r.body = deepgram::prerecorded_response(words, duration, detected, options, info, sha.hex()).dump();
  return r;
}

}  // namespace earshot::server
