// POST /v1/audio/transcriptions: the OpenAI-compatible file endpoint, run
// through the same session pipeline (VAD, policy, lines) as live streams.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "common/error.h"
#include "common/text.h"
#include "common/utf8.h"
#include "protocol/transcript.h"
#include "server/core.h"
#include "server/routes.h"

namespace earshot::server {

Core::UploadAudio Core::decode_upload(const std::string& bytes, audio::StreamDecoder& decoder) const {
  // In pieces, each allowed what is left of the limit: the decoder stops at the
  // limit before making the samples past it (a small compressed upload of silence
  // can decode to days), and the upload is refused.
  constexpr size_t kPiece = 256 * 1024;
  const double limit = config_.max_audio_seconds;
  const auto max_samples = static_cast<size_t>(limit * kSampleRate);
  UploadAudio out;
  auto too_long = [&] {
    out.samples = {};
    char text[160];
    std::snprintf(text, sizeof text, "audio longer than this server's limit of %.0f s of decoded audio per file",
                  limit);
    out.too_long = text;
    return out;
  };
  auto add = [&](std::vector<float> piece) {
    if (out.samples.empty()) {
      out.samples = std::move(piece);
    } else {
      out.samples.insert(out.samples.end(), piece.begin(), piece.end());
    }
  };
  try {
    for (size_t at = 0; at < bytes.size(); at += kPiece) {
      const size_t n = std::min(kPiece, bytes.size() - at);
      decoder.set_output_limit(max_samples - out.samples.size());
      add(decoder.push(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()) + at, n)));
    }
    decoder.set_output_limit(max_samples - out.samples.size());
    add(decoder.finish());
  } catch (const audio::OutputLimitExceeded&) {
    return too_long();
  }
  return out;
}

Core::FileResult Core::transcribe_samples(const std::shared_ptr<session::StreamSession>& session,
                                          const std::vector<float>& samples) {
  session->push_audio(samples);
  session->end_of_stream();
  scheduler_.notify(session);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(config_.transcription_timeout_seconds));
  FileResult result;
  if (!scheduler_.wait_done(*session, deadline)) {
    session->fail("transcription timed out");
    result.timed_out = true;
  }
  // The session's whole log: nothing else reads it, and the upload limit bounds it.
  result.batch = session->events_since(0);
  close_session(session);
  return result;
}

HttpResponse openai_transcription(Core& core, const HttpRequest& request) {
  const ServerConfig& config = core.config();
  std::vector<FormPart> parts;
  try {
    parts = parse_multipart(request.header("content-type"), request.body);
  } catch (const Error& e) {
    return openai_error(400, e.what());
  }
  const FormPart* file = nullptr;
  std::string language, response_format = "json";
  Keyterms keyterms;  // OpenAI's prompt: the stream's vocabulary (common/keyterms.h)
  std::string delay;  // earshot's own field: a Voxtral Realtime stream's delay in ms
  for (const FormPart& p : parts) {
    if (p.name == "file") file = &p;
    if (p.name == "language") language = trim(p.data);
    if (p.name == "response_format") response_format = trim(p.data);
    if (p.name == "prompt") keyterms.prompt = trim(p.data);
    if (p.name == "delay_ms") delay = trim(p.data);
  }
  int delay_ms = 0;
  if (!delay.empty()) {
    const std::optional<int> ms = parse_whole_number(delay, 1, 60000);
    if (!ms)
      return openai_error(400, "invalid delay_ms " + quote_client_text(delay) +
                                   ": expected milliseconds, a whole number from 1 to 60000");
    delay_ms = *ms;
  }
  try {
    keyterms.check_limits("prompt");
  } catch (const Error& e) {
    return openai_error(400, e.what());
  }
  if (!file) return openai_error(400, "missing multipart field 'file' (the audio to transcribe)");
  static const char* kFormats[] = {"json", "verbose_json", "diarized_json", "text", "srt", "vtt"};
  if (std::find(std::begin(kFormats), std::end(kFormats), response_format) == std::end(kFormats))
    return openai_error(400, "unknown response_format " + quote_client_text(response_format) +
                                 ": expected json, verbose_json, diarized_json, text, srt or vtt");
  if (response_format == "diarized_json" &&
      std::find(config.stages.begin(), config.stages.end(), "diarization") == config.stages.end())
    return openai_error(400,
                        "response_format 'diarized_json' needs a server that diarizes: start it with "
                        "--diarization-model (json, verbose_json, text, srt and vtt work without)");
  if (language.empty()) language = config.default_language.empty() ? "auto" : config.default_language;
  if (!core.hooks().make_decoder) return openai_error(415, "this server cannot decode uploaded audio files");

  Core::UploadAudio audio;
  try {
    std::unique_ptr<audio::StreamDecoder> decoder = core.hooks().make_decoder();
    audio = core.decode_upload(file->data, *decoder);
  } catch (const std::exception& e) {
    return openai_error(400, "cannot decode " + quote_client_text(file->filename) + ": " + e.what());
  }
  if (!audio.too_long.empty()) return openai_error(413, quote_client_text(file->filename) + ": " + audio.too_long);
  const std::vector<float>& samples = audio.samples;

  std::shared_ptr<session::StreamSession> session;
  try {
    session = core.open_session({language, true, std::nullopt, {}, keyterms, delay_ms});
  } catch (const Error& e) {
    return openai_error(e.code() == ErrorCode::kInvalidArgument ? 400 : 500, e.what());
  }
  Core::FileResult result = core.transcribe_samples(session, samples);
  if (result.timed_out)
    return openai_error(408, "transcription took longer than " +
                                 std::to_string(static_cast<int>(config.transcription_timeout_seconds)) + " s");
  const session::EventBatch& batch = result.batch;
  if (!batch.status.error.empty())
    return openai_error(500, "transcription failed: " + batch.status.error, "server_error");

  const double duration = static_cast<double>(samples.size()) / kSampleRate;
  const std::vector<Word> words = protocol::committed_words(batch.events);
  const std::vector<protocol::Segment> segments =
      protocol::segments(words, {.pause_seconds = config.file.pause_segmentation_seconds});
  HttpResponse r;
  if (response_format == "text") {
    r.content_type = "text/plain; charset=utf-8";
    r.body = protocol::transcript_text(words) + "\n";
  } else if (response_format == "srt") {
    r.content_type = "application/x-subrip; charset=utf-8";
    r.body = protocol::format_srt(segments);
  } else if (response_format == "vtt") {
    r.content_type = "text/vtt; charset=utf-8";
    r.body = protocol::format_vtt(segments);
  } else if (response_format == "diarized_json") {
    r.body = protocol::openai_diarized_json(words, segments, duration);
  } else {
    std::string detected = language;
    for (const Word& w : words)
      if (!w.language.empty()) detected = w.language;
    r.body = protocol::openai_json(words, segments, duration, detected, response_format == "verbose_json");
  }
  return r;
}

}  // namespace earshot::server
