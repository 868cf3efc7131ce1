// `earshot serve`: loads one model (pulling it first when it is a known name not
// in the cache), the Silero VAD, and runs the WhisperLiveKit-compatible server
// until SIGINT/SIGTERM, when every session gets its final update.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "audio/audio.h"
#include "cli/commands.h"
#include "cli/keyterm_options.h"
#include "cli/serve.h"
#include "cli/serve_settings.h"
#include "common/command_line.h"
#include "common/error.h"
#include "engine/catalogue.h"
#include "engine/families.h"
#include "model/registry.h"
#include "policy/alignatt/alignatt_options.h"
#ifdef EARSHOT_HAVE_MODEL_REGISTRY
#include "model/download.h"
#endif
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
    return engine::resolve_model(name_or_path);
  } catch (const Error& e) {
    const std::optional<models::ModelInfo> info = engine::find_model(name_or_path);
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

}  // namespace

std::optional<ServeSetup> prepare_serve(const CommandArgs& argv) {
  Args args("serve", ServeSettings::kUsage);
  ServeSettings::declare(args);
  std::optional<ServeSettings> settings = ServeSettings::parse(args, argv);
  if (!settings) return std::nullopt;
  return prepare_serve(std::move(*settings), args);
}

ServeSetup prepare_serve(ServeSettings settings, const Args& args) {
  server::ServerConfig& config = settings.config;
  engine::ModelSpec& spec = settings.model;
  // Before the ASR model loads: a bad stage option fails fast.
  const auto chain = std::make_shared<const stages::StageChain>(
      stages::StageChain::load(args, {.command = stages::Command::kServe,
                                      .pause_seconds = config.stream.pause_segmentation_seconds,
                                      .threads = spec.runtime.threads}));
  config.stages = chain->names();
  for (const std::string& stage : config.stages)
    std::fprintf(stderr, "earshot serve: stage %s loaded\n", stage.c_str());

  // The VAD file is checked (and pulled) first: a missing one should not cost a model download or load.
  const std::filesystem::path vad_path = settings.vac ? vad_file(settings.vad_model, settings.pull) : "";
  const std::filesystem::path model_path = model_file(settings.model_name, settings.pull);
  std::fprintf(stderr, "earshot serve: loading %s\n", model_path.string().c_str());
  spec.path = model_path;
  const std::shared_ptr<const engine::Engine> engine = engine::load(spec);
  config.model_id = engine->capabilities().model_name;
  const WorkerPlan workers = plan_workers(settings.workers, engine->capabilities(), spec.runtime, machine_cores());
  config.workers = workers.workers;
  config.pass_threads = workers.threads;
  std::fprintf(stderr, "earshot serve: %s on %d cores\n", workers.describe().c_str(), machine_cores());

  auto counters = std::make_shared<server::ModelCounters>();
  server::ServerHooks hooks;
  hooks.check_language = [engine](const std::string& language) { return engine->language_problem(language); };
  if (config.default_language != "auto") {
    std::string problem = hooks.check_language(config.default_language);
    if (!problem.empty()) throw Error(ErrorCode::kInvalidArgument, "--language: " + problem);
  }
  engine::StreamRequest defaults;
  defaults.policy = engine->resolve_policy(settings.policy);
  policy::check_beams_policy(spec.policies.alignatt.beams, defaults.policy);
  defaults.on_pass = server::count_passes(counters);
  defaults.on_warning = [](const std::string& w) { std::fprintf(stderr, "earshot serve: %s\n", w.c_str()); };
  const std::filesystem::path trace_dir = settings.trace_dir;
  if (!trace_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(trace_dir, ec);
    if (!std::filesystem::is_directory(trace_dir))
      throw Error(ErrorCode::kIo, "--trace-dir " + trace_dir.string() + ": cannot create the folder");
  }
  auto streams = std::make_shared<std::atomic<uint64_t>>(0);
  hooks.make_processor = [engine, defaults, trace_dir, streams](const server::ProcessorRequest& r) {
    engine::StreamRequest request = defaults;
    request.language = r.language;
    request.keyterms = r.keyterms;
    if (const std::string problem = engine->delay_problem(r.delay_ms); !problem.empty())
      throw Error(ErrorCode::kInvalidArgument, "delay_ms " + problem);
    request.delay_ms = r.delay_ms;
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
  if (settings.vac) hooks.make_vad = session::silero_vad_factory(vad::VadModel::load(vad_path));
  if (!chain->empty()) {
    hooks.make_stages = [chain](const stages::StreamRequest& request) { return chain->open(request); };
    hooks.stage_metrics = [chain] { return chain->metrics(); };
  }

  if (settings.warmup_file) {
    std::vector<float> pcm = audio::load_file(*settings.warmup_file);
    auto processor = hooks.make_processor({config.default_language, config.keyterms});
    pcm.resize(std::min<size_t>(pcm.size(), kSampleRate * 5));
    processor->insert_audio(pcm, static_cast<double>(pcm.size()) / kSampleRate);
    processor->finish();
  } else {
    hooks.make_processor({config.default_language, config.keyterms})->warmup();
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
