// `earshot serve`: loads one model (pulling it first when it is a known name not
// in the cache), the Silero VAD, and runs the WhisperLiveKit-compatible server
// until SIGINT/SIGTERM, when every session gets its final update.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "audio/audio.h"
#include "cli/commands.h"
#include "cli/policy_options.h"
#include "cli/serve.h"
#include "common/command_line.h"
#include "common/error.h"
#include "engine/families.h"
#include "engine/model_options.h"
#ifdef EARSHOT_HAVE_MODEL_REGISTRY
#include "model/download.h"
#include "model/registry.h"
#endif
#include "policy/alignatt/alignatt_config.h"
#include "server/model_counters.h"
#include "server/server.h"
#include "session/silero_vad.h"
#include "stages/registry.h"
#include "vad/vad.h"

namespace earshot::cli {

namespace {

constexpr const char* kVadFile = "ggml-silero-v6.2.0.bin";
constexpr const char* kVadUrl = "https://huggingface.co/ggml-org/whisper-vad/resolve/main/ggml-silero-v6.2.0.bin";

#ifdef EARSHOT_HAVE_MODEL_REGISTRY
std::filesystem::path cache_dir() { return models::default_cache_dir(); }

std::filesystem::path model_file(const std::string& name_or_path, bool pull) {
  try {
    return models::resolve_model(name_or_path);
  } catch (const Error& e) {
    const models::ModelInfo* info = models::find_model(name_or_path);
    if (!pull || !info || e.code() != ErrorCode::kIo) throw;
    std::fprintf(stderr, "earshot serve: model '%s' is not in the cache; downloading it\n", info->name.c_str());
    models::PullOptions options;
    int last_percent = -1;
    options.progress = [&](uint64_t done, std::optional<uint64_t> total) {
      if (!total || *total == 0) return;
      int percent = static_cast<int>(100 * done / *total);
      if (percent == last_percent) return;
      last_percent = percent;
      std::fprintf(stderr, "\r  %s: %3d%% of %.1f MB", info->name.c_str(), percent, static_cast<double>(*total) / 1e6);
      if (percent == 100) std::fprintf(stderr, "\n");
    };
    try {
      return models::pull_model(*info, options);
    } catch (const Error& pull_error) {
      throw Error(ErrorCode::kIo, std::string("cannot download model '") + info->name + "': " + pull_error.what() +
                                      "\nWithout network, place the file by hand at " +
                                      models::cached_model_path(*info, models::default_cache_dir()).string() +
                                      " (from " + models::model_url(*info) +
                                      ") or pass --model /path/to/ggml-model.bin");
    }
  }
}

#else
std::filesystem::path cache_dir() {
  if (const char* dir = std::getenv("EARSHOT_CACHE_DIR")) return dir;
  if (const char* home = std::getenv("HOME")) return std::filesystem::path(home) / ".cache/earshot/models";
  return ".";
}

std::filesystem::path model_file(const std::string& path, bool) {
  if (!std::filesystem::exists(path))
    throw Error(ErrorCode::kIo, "model file '" + path + "' does not exist (this build cannot pull models by name)");
  return path;
}
#endif

// Fetches the default VAD weights into the cache (verified by loading them) when
// they are absent and pulling is allowed; returns whether the file is now there.
bool pull_vad(const std::filesystem::path& path) {
#ifdef EARSHOT_HAVE_MODEL_REGISTRY
  std::fprintf(stderr, "earshot serve: Silero VAD weights are not in the cache; downloading them\n");
  models::DownloadOptions options;
  options.url = kVadUrl;
  options.destination = path;
  options.verify = [](const std::filesystem::path& part) { vad::VadModel::load(part); };
  try {
    std::filesystem::create_directories(path.parent_path());
    models::download_file(options);
    return true;
  } catch (const Error& e) {
    std::fprintf(stderr, "earshot serve: %s\n", e.what());
  }
#else
  (void)path;
#endif
  return false;
}

std::filesystem::path vad_file(const std::string& flag, bool pull) {
  std::filesystem::path path = flag.empty() ? cache_dir() / kVadFile : std::filesystem::path(flag);
  if (!std::filesystem::exists(path) && !(flag.empty() && pull && pull_vad(path))) {
    throw Error(ErrorCode::kIo, "Silero VAD weights not found at " + path.string() +
                                    ". Download them with\n  curl -L -o " + path.string() + " " + kVadUrl +
                                    "\nor pass --vad-model PATH, or run without VAD (--no-vac).");
  }
  return path;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

}  // namespace

std::optional<ServeSetup> prepare_serve(const CommandArgs& argv) {
  Args args("serve", "earshot serve [options]");
  args.option("host", "address to listen on (0.0.0.0 exposes the server to the network)", "127.0.0.1")
      .option("port", "TCP port", "8000")
      .option("model", "model name (pulled into the cache when absent) or a model file path", "base.en")
      .option("policy",
              "streaming policy of every stream: " + engine::policy_choices() +
                  " (what the model offers; default its first)",
              "")
      .flag("no-pull", "never download: fail when the model is not in the cache")
      .option("language", "default source language of streams (a code, or auto)", "auto")
      .flag("pcm-input", "clients send raw s16le 16 kHz mono PCM (the page then uses an AudioWorklet)")
      .option("beams", "beam search width (1 = greedy)", "1");
  declare_alignatt_options(args);
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
      .option("warmup-file", "run the model once on this audio file before serving", "")
      .option("threads", "CPU threads per model pass", default_thread_count())
      .option("workers", "sessions whose model work runs at the same time", "1")
      .option("max-sessions", "streams and file transcriptions at once; more are refused", "16")
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
      .option("max-buffered-seconds", "audio waiting per stream beyond which the oldest is skipped", "60");
  if (!args.parse_or_help(argv)) return std::nullopt;

  server::ServerConfig config;
  config.host = args.get("host");
  long port = args.get_int("port");
  if (port < 0 || port > 65535) throw Error(ErrorCode::kInvalidArgument, "--port must be 0..65535");
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
  config.cors_origins = split_commas(args.get("cors-origins"));
  config.ssl_certfile = args.get("ssl-certfile");
  config.ssl_keyfile = args.get("ssl-keyfile");
  config.max_sessions = static_cast<int>(args.get_int("max-sessions"));
  config.max_message_bytes = static_cast<size_t>(args.get_int("max-message-kb")) * 1024;
  config.max_upload_bytes = static_cast<size_t>(args.get_int("max-upload-mb")) << 20;
  config.max_audio_seconds = 60.0 * args.get_double("max-audio-minutes");
  if (!(config.max_audio_seconds > 0)) throw Error(ErrorCode::kInvalidArgument, "--max-audio-minutes must be > 0");
  config.idle_timeout_seconds = args.get_double("idle-timeout");
  config.write_timeout_seconds = args.get_double("write-timeout");
  config.shutdown_grace_seconds = args.get_double("shutdown-grace-s");
  config.max_uploads = static_cast<int>(args.get_int("max-uploads"));
  const long max_connections = args.get_int("max-connections");
  if (max_connections < 1 || max_connections > 1000000)
    throw Error(ErrorCode::kInvalidArgument, "--max-connections must be 1..1000000");
  config.max_connections = static_cast<int>(max_connections);
  if (!(config.idle_timeout_seconds > 0)) throw Error(ErrorCode::kInvalidArgument, "--idle-timeout must be > 0");
  if (!(config.write_timeout_seconds > 0)) throw Error(ErrorCode::kInvalidArgument, "--write-timeout must be > 0");
  if (!(config.shutdown_grace_seconds >= 0))
    throw Error(ErrorCode::kInvalidArgument, "--shutdown-grace-s must be >= 0");
  if (config.max_uploads < 1) throw Error(ErrorCode::kInvalidArgument, "--max-uploads must be >= 1");
  config.drain_seconds = args.get_double("drain-seconds");
  if (!(config.drain_seconds >= 0)) throw Error(ErrorCode::kInvalidArgument, "--drain-seconds must be >= 0");
  config.transcription_timeout_seconds = args.get_double("transcription-timeout");
  config.workers = static_cast<int>(args.get_int("workers"));
  config.io_threads = 2;
  config.stream.pause_segmentation_seconds = args.get_double("pause-segmentation-seconds");
  config.stream.min_step_seconds = args.get_double("vac-chunk-size");
  config.stream.max_step_seconds = args.get_double("max-step-seconds");
  config.stream.max_pending_seconds = args.get_double("max-buffered-seconds");
  config.file = config.stream;
  if (config.max_sessions < 1) throw Error(ErrorCode::kInvalidArgument, "--max-sessions must be >= 1");
  if (config.workers < 1) throw Error(ErrorCode::kInvalidArgument, "--workers must be >= 1");
  if (!(config.stream.max_step_seconds > 0)) throw Error(ErrorCode::kInvalidArgument, "--max-step-seconds must be > 0");
  if (config.stream.max_pending_seconds > 0 && config.stream.max_pending_seconds < config.stream.max_step_seconds)
    throw Error(ErrorCode::kInvalidArgument, "--max-buffered-seconds must be at least --max-step-seconds");
  // Before the ASR model loads: a bad stage option fails fast.
  const auto chain = std::make_shared<const stages::StageChain>(
      stages::StageChain::load(args, {.command = stages::Command::kServe,
                                      .pause_seconds = config.stream.pause_segmentation_seconds,
                                      .threads = static_cast<int>(args.get_int("threads"))}));
  config.stages = chain->names();
  for (const std::string& stage : config.stages)
    std::fprintf(stderr, "earshot serve: stage %s loaded\n", stage.c_str());

  policy::AlignAttConfig serve_settings;
  serve_settings.beams = static_cast<int>(args.get_int("beams"));
  serve_settings.long_silence = config.stream.pause_segmentation_seconds;
  serve_settings.language = config.default_language;
  const policy::AlignAttConfig policy_config = read_alignatt_options(args, std::move(serve_settings));
  engine::ModelSpec spec = engine::read_model_spec(args, CommandKind::kServe);
  spec.policies.alignatt = policy_config;
  spec.policies.localagreement.long_silence = config.stream.pause_segmentation_seconds;

  // The VAD file is checked (and pulled) first: a missing one should not cost a model download or load.
  const std::filesystem::path vad_path =
      args.get_flag("no-vac") ? "" : vad_file(args.get("vad-model"), !args.get_flag("no-pull"));
  const std::filesystem::path model_path = model_file(args.get("model"), !args.get_flag("no-pull"));
  std::fprintf(stderr, "earshot serve: loading %s\n", model_path.string().c_str());
  spec.path = model_path;
  const std::shared_ptr<const engine::Engine> engine = engine::load(spec);
  config.model_id = engine->capabilities().model_name;

  auto counters = std::make_shared<server::ModelCounters>();
  server::ServerHooks hooks;
  hooks.check_language = [engine](const std::string& language) { return engine->language_problem(language); };
  if (config.default_language != "auto") {
    std::string problem = hooks.check_language(config.default_language);
    if (!problem.empty()) throw Error(ErrorCode::kInvalidArgument, "--language: " + problem);
  }
  engine::StreamRequest defaults;
  defaults.policy = engine->resolve_policy(args.get("policy"));
  check_beams_policy(spec.policies.alignatt.beams, defaults.policy);
  defaults.on_pass = server::count_passes(counters);
  defaults.on_warning = [](const std::string& w) { std::fprintf(stderr, "earshot serve: %s\n", w.c_str()); };
  const std::filesystem::path trace_dir = args.get("trace-dir");
  if (!trace_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(trace_dir, ec);
    if (!std::filesystem::is_directory(trace_dir))
      throw Error(ErrorCode::kIo, "--trace-dir " + trace_dir.string() + ": cannot create the folder");
  }
  auto streams = std::make_shared<std::atomic<uint64_t>>(0);
  hooks.make_processor = [engine, defaults, trace_dir, streams](const std::string& language) {
    engine::StreamRequest request = defaults;
    request.language = language;
    if (!trace_dir.empty()) {
      // One file per stream, written by the one worker that runs the stream's step.
      const std::filesystem::path file = trace_dir / ("stream-" + std::to_string(++*streams) + ".jsonl");
      auto out = std::make_shared<std::ofstream>(file);
      if (!*out) throw Error(ErrorCode::kIo, "cannot write the trace file " + file.string());
      request.on_trace = [out](const std::string& line) { *out << line << '\n' << std::flush; };
    }
    return engine->open_stream(request);
  };
  hooks.make_decoder = [] { return audio::StreamDecoder::create(); };
  hooks.model_times = [counters] { return counters->times(); };
  if (engine->batch_counts())
    hooks.batch_totals = [engine] {
      const engine::BatchCounts c = engine->batch_counts().value_or(engine::BatchCounts{});
      return server::BatchTotals{c.steps, c.graphs, c.max_batch};
    };
  if (!args.get_flag("no-vac")) hooks.make_vad = session::silero_vad_factory(vad::VadModel::load(vad_path));
  if (!chain->empty()) {
    hooks.make_stages = [chain](const stages::StreamRequest& request) { return chain->open(request); };
    hooks.stage_metrics = [chain] { return chain->metrics(); };
  }

  if (args.has("warmup-file")) {
    std::vector<float> pcm = audio::load_file(args.get("warmup-file"));
    auto processor = hooks.make_processor(config.default_language);
    pcm.resize(std::min<size_t>(pcm.size(), kSampleRate * 5));
    processor->insert_audio(pcm, static_cast<double>(pcm.size()) / kSampleRate);
    processor->finish();
  } else {
    hooks.make_processor(config.default_language)->warmup();
  }
  return ServeSetup{std::move(config), std::move(hooks)};
}

int run_serve(const CommandArgs& argv) {
  std::optional<ServeSetup> setup = prepare_serve(argv);
  if (!setup) return 0;
  const server::ServerConfig& config = setup->config;
  server::Server server(config, setup->hooks);
  server.start();
  std::fprintf(stderr, "earshot serve: listening on %s (WebSocket %s/asr)%s\n", server.url().c_str(),
               server.url().replace(0, 4, "ws").c_str(), config.api_token.empty() ? "" : ", API token required");
  server.run_until_signal();
  std::fprintf(stderr, "earshot serve: stopped\n");
  return 0;
}

}  // namespace earshot::cli
