#include "server/deepgram_adapter.h"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include "audio/raw_decoder.h"
#include "common/error.h"
#include "common/text.h"
#include "protocol/deepgram/projection.h"
#include "server/audio_stream_protocol.h"
#include "server/core.h"

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
  if (const auto raw = audio::raw_encoding(options.encoding)) {
    try {
      return std::make_unique<audio::RawDecoder>(*raw, options.sample_rate, options.channels);
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

std::unique_ptr<audio::RawChannelsDecoder> make_channels_decoder(const deepgram::ListenOptions& options) {
  const auto raw = audio::raw_encoding(options.encoding);
  if (!raw) throw Error(ErrorCode::kInvalidArgument, "invalid option 'multichannel': needs raw audio (encoding)");
  try {
    return std::make_unique<audio::RawChannelsDecoder>(*raw, options.sample_rate, options.channels);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "invalid option 'sample_rate': " + std::string(e.what()));
  }
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

// Deepgram closes kClosePolicyViolation (1008) for bad input (options, audio) and
// kCloseInternalError (1011) when it failed.

// One session per transcript: one for mono (or channels mixed down), one per
// channel with multichannel (each holds a --max-sessions slot).
class DeepgramProtocol : public StreamProtocol {
 public:
  explicit DeepgramProtocol(Core& core) : core_(core) {}

  std::string token(const UpgradeRequest& r) const override {
    return deepgram_support::token(r.target.query, r.authorization, r.websocket_protocols);
  }

  Outgoing unauthorized() override { return refusal("invalid or missing API token", kClosePolicyViolation); }

  std::optional<Outgoing> prepare(const UpgradeRequest& request) override {
    try {
      options_ = deepgram::parse_listen_options(request.target.query, request.target.pairs);
      language_ = deepgram_support::language(core_, options_);
      if (options_.multichannel)
        split_ = deepgram_support::make_channels_decoder(options_);
      else
        decoder_ = deepgram_support::make_decoder(core_, options_);
    } catch (const Error& e) {
      return refusal(e.what(), kClosePolicyViolation);
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
    const int n = options_.multichannel ? options_.channels : 1;
    for (int i = 1; i < n; ++i) {
      if (!core_.acquire_slot()) {
        extra_slots_.clear();
        return refusal("server busy: multichannel audio of " + std::to_string(n) + " channels needs " +
                           std::to_string(n) + " sessions (--max-sessions " +
                           std::to_string(core_.config().max_sessions) + "); try again later",
                       1013);
      }
      extra_slots_.emplace_back(&core_);
    }
    deepgram::StreamInfo info = deepgram_support::stream_info(core_);
    info.channels = n;
    try {
      for (int i = 0; i < n; ++i) {
        Channel c;
        c.session = core_.open_session({language_, false, std::nullopt, deepgram_support::stage_params(options_),
                                        options_.keyterms, options_.delay_ms});
        c.projection.emplace(options_, info, i);
        channels_.push_back(std::move(c));
      }
    } catch (const std::exception& e) {
      on_close();
      return refusal(e.what(), kClosePolicyViolation);
    }
    return {};
  }

  Outgoing on_text(std::string_view text) override {
    Outgoing out;
    try {
      switch (deepgram::parse_client_message(text)) {
        case deepgram::ClientMessage::kKeepAlive: break;
        case deepgram::ClientMessage::kFinalize:
          // The sessions flush now; their Finalized events make the from_finalize finals.
          if (!ended_)
            for (Channel& c : channels_) {
              c.session->finalize();
              core_.scheduler().notify(c.session);
            }
          break;
        case deepgram::ClientMessage::kCloseStream: end_stream(); break;
      }
    } catch (const Error& e) {
      out.send(deepgram::error_message(e.what()).dump());  // the stream goes on
    }
    return out;
  }

  Outgoing on_binary(std::span<const uint8_t> chunk) override {
    if (ended_ || channels_.empty()) return {};
    if (chunk.empty()) {  // the client's end of audio
      end_stream();
      return {};
    }
    sha_.update(chunk.data(), chunk.size());
    push([&] { return decode_message(chunk); });
    return {};
  }

  // Flushes the decoder and the models.
  void end_stream() override {
    if (ended_ || closed_ || channels_.empty()) return;
    ended_ = true;
    push([&] {
      if (!split_) decoder_->set_output_limit(max_message_samples(core_));
      return split_ ? split_->finish() : std::vector<std::vector<float>>{decoder_->finish()};
    });
    for (Channel& c : channels_) {
      c.session->end_of_stream();
      core_.scheduler().notify(c.session);
    }
  }
  bool ended() const override { return ended_; }
  bool accepting_audio() const override {
    return std::all_of(channels_.begin(), channels_.end(),
                       [](const Channel& c) { return c.session->accepting_audio(); });
  }
  void halt() override {
    for (Channel& c : channels_) c.session->halt();
  }
  // Every channel's session wakes the stream when it has something new.
  void watch(std::function<void()> wake) override {
    for (Channel& c : channels_) c.session->set_listener(wake);
  }
  bool model_running() const override {
    return std::any_of(channels_.begin(), channels_.end(), [](const Channel& c) { return c.session->stepping(); });
  }

  Outgoing on_tick() override {
    Outgoing out;
    if (final_sent_) return out;
    for (Channel& c : channels_) send_all(out, tick_messages(c));
    if (std::all_of(channels_.begin(), channels_.end(), [](const Channel& c) { return c.projection->ended(); })) {
      final_sent_ = true;
      out.finished_now = true;
      const std::string error = first_error();
      if (error.empty()) out.send(metadata().dump());
      out.close_at_end(error);
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
    for (Channel& c : channels_) {
      send_all(out, tick_messages(c));
      send_all(out, c.projection->force_final());
    }
    out.send(metadata().dump());
    out.close_for_shutdown();
    out.finished_now = true;
    return out;
  }

  void on_close() override {
    if (closed_) return;
    closed_ = true;
    for (Channel& c : channels_) {
      if (!c.session->done()) c.session->fail("client disconnected");
      core_.close_session(c.session);
    }
    extra_slots_.clear();
  }

 private:
  struct Channel {
    std::shared_ptr<session::StreamSession> session;
    std::optional<deepgram::Projection> projection;
    uint64_t cursor = 0;
    session::StreamStatus status;
  };

  // Decoded audio (one vector per channel) to the sessions; a decoder's failure fails them all.
  template <class Decode>
  void push(Decode decode) {
    try {
      std::vector<std::vector<float>> samples = decode();
      for (size_t i = 0; i < channels_.size() && i < samples.size(); ++i) {
        channels_[i].session->push_audio(samples[i]);
        core_.scheduler().notify(channels_[i].session);
      }
    } catch (const audio::OutputLimitExceeded& e) {
      for (Channel& c : channels_) c.session->fail(message_too_long(core_, e.limit()));
    } catch (const std::exception& e) {
      for (Channel& c : channels_) c.session->fail(std::string("invalid audio: ") + e.what());
    }
  }

  // One message's audio, bounded before anything is converted (max_message_samples):
  // the mono decoder by its output limit, the channels' by the frames the bytes hold.
  std::vector<std::vector<float>> decode_message(std::span<const uint8_t> chunk) {
    const size_t limit = max_message_samples(core_);
    if (!split_) {
      decoder_->set_output_limit(limit);
      return {decoder_->push(chunk)};
    }
    if (split_->seconds_in(chunk.size()) * kSampleRate > static_cast<double>(limit))
      throw audio::OutputLimitExceeded(limit);
    return split_->push(chunk);
  }

  // A session's new events, released from its log (this connection is its only reader).
  std::vector<nlohmann::json> tick_messages(Channel& c) {
    session::EventBatch batch = c.session->events_since(c.cursor);
    c.cursor = batch.next;
    c.session->release_until(c.cursor);
    c.status = batch.status;
    return c.projection->on_events(batch.events, batch.status.heard_seconds);
  }
  static void send_all(Outgoing& out, const std::vector<nlohmann::json>& messages) {
    for (const nlohmann::json& m : messages) out.send(m.dump());
  }
  std::string first_error() const {
    for (const Channel& c : channels_)
      if (!c.status.error.empty()) return c.status.error;
    return "";
  }
  nlohmann::json metadata() {
    const session::StreamStatus& s = channels_.front().status;
    return deepgram::metadata_message(channels_.front().projection->info(), s.received_seconds, sha_.hex(),
                                      s.skipped_seconds);
  }

  Core& core_;
  deepgram::ListenOptions options_;
  std::string language_;
  std::unique_ptr<audio::StreamDecoder> decoder_;     // mono, or channels mixed down
  std::unique_ptr<audio::RawChannelsDecoder> split_;  // multichannel
  std::vector<SessionSlot> extra_slots_;              // a channel's beyond the connection's own
  std::vector<Channel> channels_;
  deepgram_support::Sha256 sha_;
  bool ended_ = false;
  bool closed_ = false;
  bool final_sent_ = false;
};

}  // namespace

std::unique_ptr<StreamProtocol> make_deepgram_protocol(Core& core) { return std::make_unique<DeepgramProtocol>(core); }

}  // namespace earshot::server
