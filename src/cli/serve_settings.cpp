#include "cli/serve_settings.h"

#include <cstdlib>

#include "audio/audio.h"
#include "cli/keyterm_options.h"
#include "common/error.h"
#include "engine/model_options.h"
#include "policy/alignatt/alignatt_config.h"
#include "stages/registry.h"

namespace earshot::cli {
namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

// The server's own options (listening, limits, timeouts, the sessions' stepping).
server::ServerConfig read_server_config(const Args& args) {
  server::ServerConfig config;
  config.host = args.get("host");
  long port = args.get_int("port");
  if (port < 0 || port > 65535) refuse("--port must be 0..65535");
  config.port = static_cast<uint16_t>(port);
  config.pcm_input = args.get_flag("pcm-input");
  if (!config.pcm_input && !audio::ffmpeg_available()) {
    throw Error(ErrorCode::kUnsupported,
                "this earshot was built without FFmpeg (EARSHOT_FFMPEG=OFF), which decodes the browser's "
                "webm/opus stream: serve it with --pcm-input");
  }
  config.default_language = args.get("language");
  config.api_token = args.get("api-token");
  if (config.api_token.empty())
    if (const char* env = std::getenv("EARSHOT_API_TOKEN")) config.api_token = env;
  config.cors_origins = split_list(args.get("cors-origins"));
  config.ssl_certfile = args.get("ssl-certfile");
  config.ssl_keyfile = args.get("ssl-keyfile");
  config.max_sessions = static_cast<int>(args.get_int("max-sessions"));
  config.max_message_bytes = static_cast<size_t>(args.get_int("max-message-kb")) * 1024;
  config.max_upload_bytes = static_cast<size_t>(args.get_int("max-upload-mb")) << 20;
  config.max_audio_seconds = 60.0 * args.get_double("max-audio-minutes");
  if (!(config.max_audio_seconds > 0)) refuse("--max-audio-minutes must be > 0");
  config.idle_timeout_seconds = args.get_double("idle-timeout");
  config.write_timeout_seconds = args.get_double("write-timeout");
  config.shutdown_grace_seconds = args.get_double("shutdown-grace-s");
  config.max_uploads = static_cast<int>(args.get_int("max-uploads"));
  config.body_timeout_seconds = args.get_double("body-timeout-s");
  config.body_min_bytes_per_second = 1024.0 * args.get_double("body-min-rate-kb");
  if (!(config.body_timeout_seconds > 0)) refuse("--body-timeout-s must be > 0");
  if (!(config.body_min_bytes_per_second >= 0)) refuse("--body-min-rate-kb must be >= 0");
  const long max_connections = args.get_int("max-connections");
  if (max_connections < 1 || max_connections > 1000000) refuse("--max-connections must be 1..1000000");
  config.max_connections = static_cast<int>(max_connections);
  if (!(config.idle_timeout_seconds > 0)) refuse("--idle-timeout must be > 0");
  if (!(config.write_timeout_seconds > 0)) refuse("--write-timeout must be > 0");
  if (!(config.shutdown_grace_seconds >= 0)) refuse("--shutdown-grace-s must be >= 0");
  if (config.max_uploads < 1) refuse("--max-uploads must be >= 1");
  config.drain_seconds = args.get_double("drain-seconds");
  if (!(config.drain_seconds >= 0)) refuse("--drain-seconds must be >= 0");
  config.transcription_timeout_seconds = args.get_double("transcription-timeout");
  config.io_threads = 2;
  config.stream.pause_segmentation_seconds = args.get_double("pause-segmentation-seconds");
  config.stream.min_step_seconds = args.get_double("vac-chunk-size");
  config.stream.max_step_seconds = args.get_double("max-step-seconds");
  config.stream.max_pending_seconds = args.get_double("max-buffered-seconds");
  config.file = config.stream;
  if (config.max_sessions < 1) refuse("--max-sessions must be >= 1");
  if (!(config.stream.max_step_seconds > 0)) refuse("--max-step-seconds must be > 0");
  if (config.stream.max_pending_seconds > 0 && config.stream.max_pending_seconds < config.stream.max_step_seconds)
    refuse("--max-buffered-seconds must be at least --max-step-seconds");
  return config;
}

}  // namespace

void ServeSettings::declare(Args& args) {
  args.option("host", "address to listen on (0.0.0.0 exposes the server to the network)", "127.0.0.1")
      .option("port", "TCP port", "8000")
      .option("model", "model name (pulled into the cache when absent) or a model file path", "base.en")
      .option("policy",
              "streaming policy of every stream: " + engine::policy_choices() +
                  " (what the model offers; default its first)",
              "")
      .flag("no-pull", "never download: fail when the model is not in the cache")
      .option("language", "default source language of streams (a code, or auto)", "auto")
      .flag("pcm-input", "clients send raw s16le 16 kHz mono PCM (the page then uses an AudioWorklet)");
  declare_keyterm_options(args);
  engine::declare_model_options(args, CommandKind::kServe);
  stages::StageChain::declare(args, stages::Command::kServe);
  args.option("ssl-certfile", "TLS certificate (PEM); with --ssl-keyfile serves https/wss", "")
      .option("ssl-keyfile", "TLS private key (PEM)", "")
      .option("api-token", "require this token (else $EARSHOT_API_TOKEN; empty = no auth)", "")
      .option("cors-origins", "comma-separated origins allowed by CORS, or *", "")
      .option("pause-segmentation-seconds", "pauses at least this long become silence lines", "5")
      .flag("no-vac", "no voice activity detection: every sample goes to the model")
      .option("vad-model", "Silero VAD weights (ggml); default: the model cache", "")
      .option("vac-chunk-size", "seconds of new audio a model step waits for", "0.04")
      .option("warmup-file", "run the model once on this audio file before serving", "");
  declare_worker_options(args, "sessions whose model work runs at the same time");
  args.option("max-sessions", "streams and file transcriptions at once; more are refused", "16")
      .option("max-message-kb", "largest WebSocket message accepted (KiB)", "1024")
      .option("max-upload-mb", "largest file accepted by /v1/audio/transcriptions (MiB)", "25")
      .option("trace-dir",
              "write each stream's AlignAtt pass trace (transcribe --trace's format) to DIR/stream-N.jsonl; "
              "off by default",
              "")
      .option("max-audio-minutes", "longest decoded audio of one uploaded file (minutes; more is refused with 413)",
              "60")
      .option("idle-timeout",
              "seconds without any message before a stream is ended (and an idle or stalled HTTP connection "
              "closed)",
              "60")
      .option("write-timeout",
              "seconds one update may wait to be written before a stream that stopped reading "
              "is ended",
              "30")
      .option("shutdown-grace-s",
              "SIGINT/SIGTERM: seconds streams get to finish; then their text so far is sent as final", "30")
      .option("max-uploads", "upload bodies received at once (more get 503 with Retry-After)", "4")
      .option("body-timeout-s", "seconds a request body (an upload) may take to arrive in full (then 408)", "600")
      .option("body-min-rate-kb",
              "slowest average rate of a request body after its first 10 s (KiB/s; slower gets 408; 0 = any)", "8")
      .option("max-connections",
              "open TCP connections at once (HTTP, WebSocket, TLS handshakes); more are closed at accept "
              "(plain HTTP first gets 503 with Retry-After)",
              "1024")
      .option("drain-seconds",
              "on SIGTERM, seconds live streams may go on while new sessions are refused and /ready says 503 "
              "(a rolling restart behind a balancer); then the rest are ended with their final lines",
              "0")
      .option("transcription-timeout", "seconds a file transcription may take (then 408)", "600")
      .option("max-step-seconds", "most audio one model step takes when a session fell behind", "10")
      .option("max-buffered-seconds",
              "audio waiting per stream: a client sending faster than real time is no longer read at this "
              "limit (backpressure); for one paced in real time the oldest is skipped, and announced; also the "
              "most one WebSocket message may decode to (0: no limit on waiting audio, and --max-audio-minutes "
              "per message)",
              "60");
}

std::optional<ServeSettings> ServeSettings::parse(Args& args, const CommandArgs& argv) {
  if (!args.parse_or_help(argv)) return std::nullopt;
  return read(args);
}

ServeSettings ServeSettings::read(const Args& args) {
  ServeSettings s;
  s.config = read_server_config(args);
  s.model = engine::read_model_spec(args, CommandKind::kServe);
  s.model.policies.alignatt.long_silence = s.config.stream.pause_segmentation_seconds;
  s.model.policies.alignatt.language = s.config.default_language;
  s.model.policies.alignatt.validate();
  s.config.keyterms = read_keyterms(args, s.model.policies.alignatt);
  s.workers = read_worker_request(args);
  s.config.stream.stop_passes = s.config.file.stop_passes = s.workers.stop_passes;
  s.model.policies.keyterm_bonus = read_keyterm_bonus(args);
  s.model.policies.localagreement.long_silence = s.config.stream.pause_segmentation_seconds;
  s.model_name = args.get("model");
  s.policy = args.get("policy");
  s.pull = !args.get_flag("no-pull");
  s.vac = !args.get_flag("no-vac");
  s.vad_model = args.get("vad-model");
  s.trace_dir = args.get("trace-dir");
  if (args.has("warmup-file")) s.warmup_file = args.get("warmup-file");
  return s;
}

}  // namespace earshot::cli
