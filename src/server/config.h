// What `earshot serve` is configured with and the hooks it calls into the
// model side: the bottom header of server/, included by the core, the protocol
// adapters and the Beast front alike.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "audio/audio.h"
#include "common/keyterms.h"
#include "policy/online_processor.h"
#include "session/scheduler.h"
#include "session/stream_session.h"
#include "session/voice_activity.h"
#include "stages/registry.h"
#include "stages/stage.h"

namespace earshot::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0 = any free port (tests)
  bool pcm_input = false;
  std::string default_language = "auto";
  // Vocabulary every stream gets (serve --keyterms, --static-init-prompt); a stream's
  // own (Deepgram's keyterm, OpenAI's prompt...) is added to it (Keyterms::merge).
  Keyterms keyterms;
  // The stages the server runs (stages::StageChain::names()): /health says `"<name>": true`
  // for each (the page shows its target-language box when "translation" is there).
  std::vector<std::string> stages;
  std::string api_token;                  // "" = no authentication
  std::vector<std::string> cors_origins;  // "*" allows any origin
  std::string ssl_certfile, ssl_keyfile;  // both set = TLS (https/wss)
  int max_sessions = 16;                  // WebSocket streams + file transcriptions at once
  int max_connections = 1024;             // open TCP connections (HTTP, WebSocket, TLS handshakes)
  size_t max_message_bytes = 1 << 20;     // one WebSocket frame/message of audio
  double idle_timeout_seconds = 60;       // a stream that sends nothing this long is ended
  size_t max_upload_bytes = 25u << 20;    // POST /v1/audio/transcriptions
  int max_uploads = 4;                    // upload bodies received at once (each up to max_upload_bytes)
  // A request body (an upload holds a session slot and an upload permit meanwhile) must
  // arrive within this long, and at this average rate at least once the grace passed:
  // a client trickling bytes cannot hold the permits. 25 MiB at 8 KiB/s takes 53 min, so
  // the deadline binds first for a large body; a stalled one ends after --idle-timeout.
  double body_timeout_seconds = 600;
  double body_min_bytes_per_second = 8192;
  double body_rate_grace_seconds = 10;
  // Decoded length of one uploaded file: a low-bitrate upload under the byte limit
  // can still decode to hours of samples (1 h of 16 kHz float audio is 230 MB).
  double max_audio_seconds = 3600;
  double transcription_timeout_seconds = 600;
  // Streams send what their sessions produce as soon as the session signals it; this is
  // the housekeeping period (idle timeout, lag sampling, a slow client's write timeout).
  double update_interval_seconds = 0.25;
  double shutdown_grace_seconds = 30;  // SIGINT/SIGTERM: time left to sessions to drain
  // When the grace is over, a stream's final result waits this long at most for the
  // model pass running then (its words belong in the final result).
  double final_pass_wait_seconds = 5;
  double write_timeout_seconds = 30;  // a stream update not written this long ends the stream
  // SO_SNDBUF of each accepted connection; 0: the kernel's, autotuned (up to
  // net.ipv4.tcp_wmem's maximum, megabytes, before a client that stops reading stalls a write).
  int send_buffer_bytes = 0;
  // SIGTERM first drains this long: /ready answers 503, new sessions are refused, and live
  // streams go on until their clients end them; those still running then get the grace
  // above (ended at once: final lines, ready_to_stop). 0 = end them at once.
  double drain_seconds = 0;
  int io_threads = 1;
  int workers = 1;                         // sessions whose model work runs at the same time
  session::PassThreadPolicy pass_threads;  // threads per pass and what a lone pass may borrow; {0, 0}: the model's
  session::StreamOptions stream;
  session::StreamOptions file;       // whole-file transcription (no skipping)
  std::string model_id = "whisper";  // /v1/models and /health
  std::string backend = "earshot";
};

// Engine timing counters for /metrics (totals since start), when the engine offers them.
struct ModelTimes {
  double encoder_seconds = 0;
  double decoder_seconds = 0;
  uint64_t encoder_passes = 0;
  uint64_t decoder_passes = 0;
};

// Cross-stream batching counters for /metrics (engine::BatchCounts), when the engine batches.
struct BatchTotals {
  int64_t steps = 0;
  int64_t graphs = 0;
  int64_t max_batch = 0;
};

// What one stream asks of the model.
struct ProcessorRequest {
  std::string language = "auto";  // "auto" or a code
  Keyterms keyterms;              // the server's defaults and the stream's own, merged
  int delay_ms = 0;               // the stream's delay_ms (Voxtral Realtime); 0 = the server's
};

struct ServerHooks {
  // A new online processor for one stream. Throws Error(kInvalidArgument) with a
  // message for a language (or vocabulary) the model cannot take; the client
  // gets it as an error message.
  std::function<std::unique_ptr<OnlineProcessor>(const ProcessorRequest& request)> make_processor;
  session::VadFactory make_vad;  // null: every sample is speech (--no-vac)
  // Decoder for encoded input (webm/opus...); null means encoded input is refused.
  std::function<std::unique_ptr<audio::StreamDecoder>()> make_decoder;
  // Optional check of a language code: "" when usable, else the reason.
  std::function<std::string(const std::string& language)> check_language;
  std::function<ModelTimes()> model_times;    // optional
  std::function<BatchTotals()> batch_totals;  // optional: the engine batches steps across streams
  // The stages of a stream's chain for what the stream asked (its language and
  // its protocol's stage parameters: target_language, diarize); optional (no
  // stages). Throws Error(kInvalidArgument) for a request it cannot serve.
  std::function<std::vector<std::unique_ptr<stages::Stage>>(const stages::StreamRequest& request)> make_stages;
  // The stages' figures for /metrics (stages::StageChain::metrics); optional.
  std::function<std::vector<stages::Metric>()> stage_metrics;
  // The clock the once-a-second lag sampler reads (the lag histogram of /metrics) and
  // the sessions' clock (lag figures; whether a client sends faster than real time);
  // optional: steady_clock's when unset (tests step their own).
  std::function<std::chrono::steady_clock::time_point()> now;
};

}  // namespace earshot::server
