#include "server/flux_adapter.h"

#include <algorithm>

#include "common/error.h"
#include "protocol/deepgram/flux.h"
#include "server/audio_stream_protocol.h"
#include "server/core.h"
#include "server/deepgram_adapter.h"

namespace earshot::server {

namespace {

class FluxProtocol : public AudioStreamProtocol {
 public:
  explicit FluxProtocol(Core& core) : AudioStreamProtocol(core), projection_(deepgram::StreamInfo{}) {}

  std::string token(const UpgradeRequest& r) const override {
    return deepgram_support::token(r.target.query, r.authorization, r.websocket_protocols);
  }

  Outgoing unauthorized() override { return refusal("invalid or missing API token", kClosePolicyViolation); }

  std::optional<Outgoing> prepare(const UpgradeRequest& request) override {
    const std::vector<std::string>& stages = core_.config().stages;
    if (std::find(stages.begin(), stages.end(), "turns") == stages.end())
      return refusal("this server runs without turn detection (--turn-detection off): /v2/listen needs it",
                     kClosePolicyViolation);
    try {
      options_ = deepgram::parse_flux_options(request.target.query, request.target.pairs);
      language_ = deepgram_support::language(core_, options_.listen);
      decoder_ = deepgram_support::make_decoder(core_, options_.listen);
    } catch (const Error& e) {
      return refusal(e.what(), kClosePolicyViolation);
    }
    return std::nullopt;
  }

  Outgoing refusal(const std::string& message, uint16_t code) override {
    Outgoing out;
    out.send(projection_.error(code == kClosePolicyViolation ? "BAD_REQUEST" : "UNAVAILABLE", message).dump());
    out.close_with(code, message);
    return out;
  }

  Outgoing start() override {
    try {
      session_ = core_.open_session({language_, false, core_.config().stream, deepgram::flux_stage_params(options_),
                                     options_.listen.keyterms, options_.listen.delay_ms});
    } catch (const std::exception& e) {
      return refusal(e.what(), kClosePolicyViolation);
    }
    projection_ = deepgram::FluxProjection(deepgram_support::stream_info(core_));
    Outgoing out;
    out.send(projection_.connected().dump());
    return out;
  }

  Outgoing on_text(std::string_view text) override {
    Outgoing out;
    try {
      switch (deepgram::parse_flux_client_message(text)) {
        case deepgram::FluxClientMessage::kKeepAlive: break;
        case deepgram::FluxClientMessage::kForceEndTurn:
          // The session flushes; the turn stage ends the open turn on its Finalized.
          if (!ended_) {
            session_->finalize();
            core_.scheduler().notify(session_);
          }
          break;
        case deepgram::FluxClientMessage::kConfigure: configure(text, out); break;
        case deepgram::FluxClientMessage::kCloseStream: end_stream(); break;
      }
    } catch (const Error& e) {
      out.send(projection_.error("BAD_REQUEST", e.what()).dump());  // the stream goes on
    }
    return out;
  }

  Outgoing on_tick() override {
    Outgoing out;
    if (final_sent_) return out;
    for (const nlohmann::json& m : tick_messages()) out.send(m.dump());
    if (projection_.ended()) {
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
    final_sent_ = true;
    for (const nlohmann::json& m : tick_messages()) out.send(m.dump());
    out.close_for_shutdown();
    out.finished_now = true;
    return out;
  }

 private:
  // New thresholds take effect from the audio received after the message on (the turn
  // stage checks them now); a stream's keyterms are fixed when it opens (a family reads
  // them into its prompt or its decoding graph), so a change to them is refused.
  void configure(std::string_view text, Outgoing& out) {
    try {
      bool keyterms_changed = false;
      deepgram::FluxOptions next = deepgram::apply_flux_configure(options_, text, &keyterms_changed);
      if (keyterms_changed)
        throw Error(ErrorCode::kInvalidArgument,
                    "earshot cannot change a stream's keyterms mid-stream: reconnect with keyterm= in the URL "
                    "(nothing was changed)");
      if (ended_) throw Error(ErrorCode::kInvalidArgument, "the stream has ended (nothing was changed)");
      const std::map<std::string, std::string> effective = session_->change_settings(deepgram::flux_stage_params(next));
      options_ = std::move(next);
      out.send(projection_.configure_success(effective, options_.listen.keyterms).dump());
    } catch (const Error& e) {
      out.send(projection_.configure_failure(e.what()).dump());
    }
  }

  std::vector<nlohmann::json> tick_messages() {
    session::EventBatch batch = session_->events_since(cursor_);
    cursor_ = batch.next;
    session_->release_until(cursor_);
    status_ = batch.status;
    return projection_.on_events(batch.events, batch.status.heard_seconds);
  }

  deepgram::FluxOptions options_;
  std::string language_;
  deepgram::FluxProjection projection_;
  uint64_t cursor_ = 0;
  session::StreamStatus status_;
  bool final_sent_ = false;
};

}  // namespace

std::unique_ptr<StreamProtocol> make_flux_protocol(Core& core) { return std::make_unique<FluxProtocol>(core); }

}  // namespace earshot::server
