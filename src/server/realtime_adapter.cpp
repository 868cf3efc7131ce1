#include "server/realtime_adapter.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "audio/raw_decoder.h"
#include "common/text.h"
#include "protocol/openai_realtime/projection.h"
#include "protocol/openai_realtime/session.h"
#include "server/audio_stream_protocol.h"
#include "server/core.h"

namespace earshot::server {

namespace {

using json = nlohmann::json;
namespace rt = openai_realtime;

std::string random_hex(size_t digits) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  while (out.size() < digits) {
    char part[17];
    std::snprintf(part, sizeof part, "%016llx", static_cast<unsigned long long>(rng()));
    out += part;
  }
  out.resize(digits);
  return out;
}

audio::RawEncoding encoding_of(rt::AudioFormat format) {
  switch (format) {
    case rt::AudioFormat::kPcm16: return audio::RawEncoding::kLinear16;
    case rt::AudioFormat::kPcmu: return audio::RawEncoding::kMulaw;
    case rt::AudioFormat::kPcma: return audio::RawEncoding::kAlaw;
  }
  return audio::RawEncoding::kLinear16;
}

// What the session's turn detection asks of a turn stage (stages::StreamRequest::params).
std::map<std::string, std::string> stage_params(const rt::TurnDetection& t) {
  auto number = [](double v) { return json(v).dump(); };
  switch (t.type) {
    case rt::TurnType::kNone: return {{"turn_detection", "none"}};
    case rt::TurnType::kServerVad:
      return {{"turn_detection", "server_vad"},
              {"turn_threshold", number(t.threshold)},
              {"turn_prefix_padding_ms", std::to_string(t.prefix_padding_ms)},
              {"turn_silence_ms", std::to_string(t.silence_duration_ms)}};
    case rt::TurnType::kSemanticVad: return {{"turn_detection", "semantic_vad"}, {"turn_eagerness", t.eagerness}};
  }
  return {};
}

class RealtimeProtocol : public AudioStreamProtocol {
 public:
  explicit RealtimeProtocol(Core& core) : AudioStreamProtocol(core), ids_(random_hex(8)) {}

  // As the other routes: "Authorization: Bearer <key>" (what OpenAI's clients send), or ?token=.
  std::string token(const UpgradeRequest& request) const override {
    auto it = request.target.query.find("token");
    return it != request.target.query.end() ? it->second : Core::bearer_token(request.authorization);
  }

  Outgoing unauthorized() override {
    Outgoing out;
    out.send(rt::error_event(ids_, "invalid_request_error", "invalid_api_key", "invalid or missing API token").dump());
    out.close_with(kClosePolicyViolation, "invalid or missing API token");
    return out;
  }

  std::optional<Outgoing> prepare(const UpgradeRequest& request) override {
    const auto& query = request.target.query;
    if (auto it = query.find("intent"); it != query.end() && it->second != "transcription")
      return refusal("earshot serves transcription sessions only: connect to /v1/realtime?intent=transcription",
                     kClosePolicyViolation);
    if (auto it = query.find("deltas"); it != query.end()) {
      if (it->second != "live" && it->second != "commit")
        return refusal(
            "invalid query parameter 'deltas': expected live (as words are committed) or commit (after "
            "the item's commit, as OpenAI's)",
            kClosePolicyViolation);
      options_.live_deltas = it->second == "live";
    }
    if (auto it = query.find("delay_ms"); it != query.end()) {
      const std::optional<int> ms = parse_whole_number(it->second, 1, 60000);
      if (!ms)
        return refusal(
            "invalid query parameter 'delay_ms': expected milliseconds, a whole number from 1 to 60000 "
            "(how far a Voxtral Realtime stream's text trails its audio)",
            kClosePolicyViolation);
      delay_ms_ = *ms;
    }
    const std::vector<std::string>& stages = core_.config().stages;
    options_.turn_events = std::find(stages.begin(), stages.end(), "turns") != stages.end();
    config_.id = "sess_" + random_hex(20);
    config_.model = core_.config().model_id;
    if (auto it = query.find("model"); it != query.end() && !it->second.empty()) config_.model = it->second;
    const std::string& language = core_.config().default_language;
    if (language != "auto") config_.language = language;
    return std::nullopt;
  }

  Outgoing refusal(const std::string& message, uint16_t code) override {
    Outgoing out;
    const bool server_side = code != kClosePolicyViolation;
    out.send(rt::error_event(ids_, server_side ? "server_error" : "invalid_request_error",
                             server_side ? "server_unavailable" : "invalid_request", message)
                 .dump());
    out.close_with(code, message);
    return out;
  }

  // The model stream waits for the first audio (the session's settings come first).
  Outgoing start() override {
    projection_.emplace(options_, ids_);
    projection_->configure(config_);
    Outgoing out;
    out.send(json{{"type", "session.created"},
                  {"event_id", ids_.event()},
                  {"session", rt::session_json(config_, rt::Dialect::kCurrent)}}
                 .dump());
    return out;
  }

  Outgoing on_text(std::string_view text) override {
    Outgoing out;
    rt::ClientEvent event;
    try {
      event = rt::parse_client_event(text);
      switch (event.kind) {
        case rt::ClientEvent::Kind::kSessionUpdate:
        case rt::ClientEvent::Kind::kTranscriptionSessionUpdate: update(event, out); break;
        case rt::ClientEvent::Kind::kAppend: append(event); break;
        case rt::ClientEvent::Kind::kCommit: commit(out); break;
        case rt::ClientEvent::Kind::kClear: clear(out); break;
        case rt::ClientEvent::Kind::kUnknown:
          throw rt::RealtimeError("invalid_event",
                                  "unknown or unsupported event type '" + event.type +
                                      "': a transcription session takes session.update (or "
                                      "transcription_session.update), input_audio_buffer.append, commit and clear",
                                  "type");
      }
    } catch (const rt::RealtimeError& e) {
      out.send(rt::error_event(ids_, "invalid_request_error", e.code(), e.what(), e.param(), event.event_id).dump());
    }
    return out;
  }

  Outgoing on_binary(std::span<const uint8_t>) override {
    Outgoing out;
    out.send(rt::error_event(ids_, "invalid_request_error", "invalid_event",
                             "binary messages are not part of the Realtime protocol: send audio as "
                             "input_audio_buffer.append events (base64 in a JSON text message)")
                 .dump());
    return out;
  }

  void end_stream() override {
    if (!session_) {
      ended_ = true;  // nothing was ever heard: the stream is over at once
      return;
    }
    AudioStreamProtocol::end_stream();
  }

  Outgoing on_tick() override {
    Outgoing out;
    if (final_sent_) return out;
    if (session_) {
      session::EventBatch batch = session_->events_since(cursor_);
      cursor_ = batch.next;
      session_->release_until(cursor_);
      status_ = batch.status;
      for (json& m : projection_->on_events(batch.events, batch.status.heard_seconds)) out.send(m.dump());
    }
    if ((session_ && projection_->ended()) || (!session_ && ended_)) {
      final_sent_ = true;
      out.finished_now = true;
      out.close_at_end(status_.error);
    }
    return out;
  }
  bool finished() const override { return final_sent_; }

  Outgoing force_finish() override {
    Outgoing out;
    if (final_sent_) return out;
    if (session_) {
      // The events not yet projected (the last pass's words among them) go out first;
      // then the open item ends with them, unless the stream had just ended by itself.
      out = on_tick();
      if (!final_sent_)
        for (json& m : projection_->force_final()) out.send(m.dump());
    }
    final_sent_ = true;
    out.close_for_shutdown();
    out.finished_now = true;
    return out;
  }

 private:
  void update(const rt::ClientEvent& event, Outgoing& out) {
    const bool beta = event.kind == rt::ClientEvent::Kind::kTranscriptionSessionUpdate;
    rt::SessionConfig next = config_;
    rt::apply_update(next, event.session, beta ? rt::Dialect::kBeta : rt::Dialect::kCurrent, session_ != nullptr);
    if (!next.language.empty() && next.language != config_.language && core_.hooks().check_language) {
      const std::string problem = core_.hooks().check_language(next.language);
      if (!problem.empty())
        throw rt::RealtimeError(
            "invalid_value", problem,
            beta ? "session.input_audio_transcription.language" : "session.audio.input.transcription.language");
    }
    // Turn detection may change while the stream runs: the turn stage takes the new
    // settings from the audio appended so far on (events::SettingsChanged).
    const std::map<std::string, std::string> turn = stage_params(next.turn);
    if (session_ && turn != stage_params(config_.turn)) {
      try {
        session_->change_settings(turn);
      } catch (const Error& e) {
        throw rt::RealtimeError("invalid_value", e.what(),
                                beta ? "session.turn_detection" : "session.audio.input.turn_detection");
      }
    }
    config_ = std::move(next);
    projection_->configure(config_);
    out.send(json{{"type", beta ? "transcription_session.updated" : "session.updated"},
                  {"event_id", ids_.event()},
                  {"session", rt::session_json(config_, beta ? rt::Dialect::kBeta : rt::Dialect::kCurrent)}}
                 .dump());
  }

  // The first audio opens the model stream with the session's settings.
  void open() {
    SessionRequest request;
    request.language = config_.language.empty() ? "auto" : config_.language;
    request.stage_params = stage_params(config_.turn);
    request.keyterms = config_.keyterms();
    request.delay_ms = delay_ms_;
    try {
      decoder_ = std::make_unique<audio::RawDecoder>(encoding_of(config_.format), rt::sample_rate_of(config_.format));
      session_ = core_.open_session(std::move(request));
    } catch (const Error& e) {
      decoder_.reset();
      throw rt::RealtimeError("invalid_value", std::string("cannot start transcribing: ") + e.what(), "session");
    }
  }

  void append(const rt::ClientEvent& event) {
    if (ended_) return;
    const std::vector<uint8_t> bytes = rt::decode_base64(event.audio, "audio");
    if (bytes.empty()) return;
    if (!session_) open();
    buffered_bytes_ += bytes.size();
    AudioStreamProtocol::on_binary(bytes);
  }

  // Seconds of audio received so far (the stream clock at this moment).
  double received_seconds() const {
    const size_t per_second =
        static_cast<size_t>(rt::sample_rate_of(config_.format)) * (config_.format == rt::AudioFormat::kPcm16 ? 2 : 1);
    return static_cast<double>(received_bytes_ + buffered_bytes_) / static_cast<double>(per_second);
  }

  void commit(Outgoing& out) {
    const size_t per_100ms = static_cast<size_t>(rt::sample_rate_of(config_.format)) / 10 *
                             (config_.format == rt::AudioFormat::kPcm16 ? 2 : 1);
    if (!session_ || buffered_bytes_ < per_100ms)
      throw rt::RealtimeError("input_audio_buffer_commit_empty",
                              "buffer too small: a commit needs at least 100 ms of audio appended since the last "
                              "commit or clear");
    const double until = received_seconds();
    for (json& m : projection_->commit(until, flush())) out.send(m.dump());
    received_bytes_ += buffered_bytes_;
    buffered_bytes_ = 0;
  }

  void clear(Outgoing& out) {
    const double until = received_seconds();
    for (json& m : projection_->clear(until, session_ ? flush() : 0)) out.send(m.dump());
    received_bytes_ += buffered_bytes_;
    buffered_bytes_ = 0;
  }

  // The buffer so far to the model and flushed: the decoder's held samples (its
  // resampler's delay) too, a new decoder taking what follows. The session's number
  // for the flush (0 once the stream ended: its end flushes everything).
  uint64_t flush() {
    if (ended_) return 0;
    try {
      session_->push_audio(decoder_->finish());
      decoder_ = std::make_unique<audio::RawDecoder>(encoding_of(config_.format), rt::sample_rate_of(config_.format));
    } catch (const std::exception& e) {
      session_->fail(std::string("invalid audio: ") + e.what());
    }
    const uint64_t request = session_->finalize();
    core_.scheduler().notify(session_);
    return request;
  }

  rt::Ids ids_;
  rt::SessionConfig config_;
  rt::ProjectionOptions options_;
  int delay_ms_ = 0;  // ?delay_ms= (Voxtral Realtime); 0 = the server's
  std::optional<rt::Projection> projection_;
  uint64_t cursor_ = 0;
  session::StreamStatus status_;
  size_t received_bytes_ = 0;  // audio before the last commit or clear
  size_t buffered_bytes_ = 0;  // since then
  bool final_sent_ = false;
};

}  // namespace

std::unique_ptr<StreamProtocol> make_realtime_protocol(Core& core) { return std::make_unique<RealtimeProtocol>(core); }

}  // namespace earshot::server
