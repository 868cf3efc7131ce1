#include "server/deepgram_adapter.h"

#include <openssl/evp.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include "common/error.h"
#include "common/text.h"
#include "protocol/deepgram/projection.h"
#include "server/audio_stream_protocol.h"
#include "server/core.h"
#include "server/pcm_decoder.h"

namespace earshot::server {

namespace deepgram_support {

namespace {

std::string after_scheme(const std::string& header, const char* scheme) {
  const std::string value = trim(header, " \t");
  const size_t n = std::char_traits<char>::length(scheme);
  if (value.size() <= n + 1 || value[n] != ' ') return "";
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(value[i])) != scheme[i]) return "";
  return trim(value.substr(n + 1), " \t");
}

}  // namespace

std::string token(const std::map<std::string, std::string>& query, const std::string& authorization,
                  const std::string& websocket_protocols) {
  if (auto it = query.find("token"); it != query.end()) return it->second;
  if (std::string t = after_scheme(authorization, "token"); !t.empty()) return t;
  if (std::string t = after_scheme(authorization, "bearer"); !t.empty()) return t;
  if (websocket_protocols.rfind("token,", 0) == 0) return trim(websocket_protocols.substr(6), " \t");
  return "";
}

std::unique_ptr<audio::StreamDecoder> make_decoder(const Core& core, const deepgram::ListenOptions& options) {
  if (options.encoding == "linear16") {
    try {
      return std::make_unique<Linear16Decoder>(options.sample_rate);
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument, "invalid option 'sample_rate': " + std::string(e.what()));
    }
  }
  if (!core.hooks().make_decoder)
    throw Error(ErrorCode::kInvalidArgument,
                "invalid option 'encoding': this server cannot decode containers; send raw PCM with "
                "encoding=linear16&sample_rate=16000");
  return core.hooks().make_decoder();
}

std::string language(const Core& core, const deepgram::ListenOptions& options) {
  std::string language = options.language;
  if (language.empty()) language = core.config().default_language.empty() ? "auto" : core.config().default_language;
  if (core.hooks().check_language && language != "auto") {
    std::string problem = core.hooks().check_language(language);
    if (!problem.empty()) throw Error(ErrorCode::kInvalidArgument, "invalid option 'language': " + problem);
  }
  return language;
}

std::map<std::string, std::string> stage_params(const deepgram::ListenOptions& options) {
  return {{"diarize", options.diarize ? "true" : "false"}};
}

deepgram::StreamInfo stream_info(const Core& core) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  auto uuid = [](uint64_t hi, uint64_t lo) {
    char text[40];
    std::snprintf(text, sizeof text, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                  static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xfff),
                  static_cast<unsigned>(0x8000 | ((lo >> 48) & 0x3fff)),
                  static_cast<unsigned long long>(lo & 0xffffffffffffULL));
    return std::string(text);
  };
  deepgram::StreamInfo info;
  info.request_id = uuid(rng(), rng());
  // The model's id is stable for one model: derived from its name.
  const uint64_t h = std::hash<std::string>{}(core.config().model_id);
  info.model_uuid = uuid(h, h * 0x9e3779b97f4a7c15ULL);
  info.model_name = core.config().model_id;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const long millis =
      static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char created[96];
  std::snprintf(created, sizeof created, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  info.created = created;
  return info;
}

struct Sha256::Impl {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) { EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr); }
Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }
void Sha256::update(const void* data, size_t size) { EVP_DigestUpdate(impl_->ctx, data, size); }
std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(impl_->ctx, digest, &n);
  std::string out;
  char byte[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    out += byte;
  }
  return out;
}

}  // namespace deepgram_support

namespace {

// Close codes: Deepgram closes 1008 for bad input (options, audio) and 1011 when it failed.
constexpr uint16_t kClosePolicy = 1008;
constexpr uint16_t kCloseFailed = 1011;
constexpr uint16_t kCloseNormal = 1000;

class DeepgramProtocol : public AudioStreamProtocol {
 public:
  explicit DeepgramProtocol(Core& core) : AudioStreamProtocol(core) {}

  std::string token(const UpgradeRequest& r) const override {
    return deepgram_support::token(r.target.query, r.authorization, r.websocket_protocols);
  }

  Outgoing unauthorized() override { return refusal("invalid or missing API token", kClosePolicy); }

  std::optional<Outgoing> prepare(const UpgradeRequest& request) override {
    try {
      options_ = deepgram::parse_listen_options(request.target.query);
      language_ = deepgram_support::language(core_, options_);
      decoder_ = deepgram_support::make_decoder(core_, options_);
    } catch (const Error& e) {
      return refusal(e.what(), kClosePolicy);
    }
    return std::nullopt;
  }

  Outgoing refusal(const std::string& message, uint16_t code) override {
    Outgoing out;
    out.send(deepgram::error_message(message).dump());
    out.close_with(code, message);  // close_with keeps 120 bytes at a character boundary
    return out;
  }

  Outgoing start() override {
    try {
      session_ = core_.open_session(language_, false, core_.config().stream, deepgram_support::stage_params(options_));
    } catch (const std::exception& e) {
      return refusal(e.what(), kClosePolicy);
    }
    projection_.emplace(options_, deepgram_support::stream_info(core_));
    return {};
  }

  Outgoing on_text(std::string_view text) override {
    Outgoing out;
    try {
      switch (deepgram::parse_client_message(text)) {
        case deepgram::ClientMessage::kKeepAlive: break;
        case deepgram::ClientMessage::kFinalize:
          // The session flushes now; its Finalized event makes the from_finalize final.
          if (!ended_) {
            session_->finalize();
            core_.scheduler().notify(session_);
          }
          break;
        case deepgram::ClientMessage::kCloseStream: end_stream(); break;
      }
    } catch (const Error& e) {
      out.send(deepgram::error_message(e.what()).dump());  // the stream goes on
    }
    return out;
  }

  Outgoing on_tick() override {
    Outgoing out;
    if (final_sent_) return out;
    send_all(out, tick_messages());
    if (projection_->ended()) {
      final_sent_ = true;
      out.finished_now = true;
      if (!status_.error.empty()) {
        out.close_with(status_.error.rfind("invalid audio", 0) == 0 ? kClosePolicy : kCloseFailed, status_.error);
      } else {
        out.send(deepgram::metadata_message(projection_->info(), status_.received_seconds, sha_.hex()).dump());
        out.close_with(kCloseNormal, "");
      }
    }
    return out;
  }
  bool finished() const override { return final_sent_; }

  // The results so far, the rest (provisional tail included) as a last final with
  // speech_final, as WhisperLiveKit clients get it; then Metadata and a close saying why.
  Outgoing force_finish() override {
    Outgoing out;
    if (final_sent_) return out;
    final_sent_ = true;
    send_all(out, tick_messages());
    send_all(out, projection_->force_final());
    out.send(deepgram::metadata_message(projection_->info(), status_.received_seconds, sha_.hex()).dump());
    out.close_with(1001, "server shutting down: grace time over (--shutdown-grace-s)");
    out.finished_now = true;
    return out;
  }

 private:
  void on_audio_bytes(std::span<const uint8_t> chunk) override { sha_.update(chunk.data(), chunk.size()); }

  // The session's new events, released from its log (this connection is its only reader).
  std::vector<nlohmann::json> tick_messages() {
    session::EventBatch batch = session_->events_since(cursor_);
    cursor_ = batch.next;
    session_->release_until(cursor_);
    status_ = batch.status;
    return projection_->on_events(batch.events, batch.status.processed_seconds);
  }
  static void send_all(Outgoing& out, const std::vector<nlohmann::json>& messages) {
    for (const nlohmann::json& m : messages) out.send(m.dump());
  }

  deepgram::ListenOptions options_;
  std::string language_;
  std::optional<deepgram::Projection> projection_;
  uint64_t cursor_ = 0;
  session::StreamStatus status_;
  deepgram_support::Sha256 sha_;
  bool final_sent_ = false;
};

}  // namespace

std::unique_ptr<StreamProtocol> make_deepgram_protocol(Core& core) { return std::make_unique<DeepgramProtocol>(core); }

}  // namespace earshot::server
