// `earshot pull NAME...`: downloads whisper.cpp ggml models and translation
// LLMs (GGUF) into the cache.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>

#include "cli/commands.h"
#include "common/command_line.h"
#include "common/error.h"
#include "engine/catalogue.h"
#include "model/download.h"
#include "model/registry.h"
#include "stages/registry.h"

namespace earshot::cli {
namespace {

std::string megabytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / 1e6);
  return text;
}

// A bar redrawn in place on a terminal; a line every 10% (or 10 s) in logs and pipes.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string label) : label_(std::move(label)), tty_(isatty(fileno(stderr))) {}

  void update(uint64_t done, std::optional<uint64_t> total) {
    const auto now = Clock::now();
    if (!started_) {
      started_ = true;
      start_ = last_print_ = now;
      start_bytes_ = done;
    }
    const bool complete = total && done >= *total;
    const double since_print = std::chrono::duration<double>(now - last_print_).count();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? double(done - start_bytes_) / elapsed : 0;
    if (tty_) {
      if (since_print < 0.1 && !complete) return;
      std::string line = "\r" + label_ + " ";
      if (total && *total > 0) {
        constexpr int kWidth = 30;
        const double fraction = double(done) / double(*total);
        const int filled = int(fraction * kWidth);
        line += "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] ";
        char pct[16];
        std::snprintf(pct, sizeof pct, "%5.1f%% ", 100 * fraction);
        line += pct + megabytes(done) + " / " + megabytes(*total);
        if (rate > 0 && !complete)
          line += "  " + megabytes(uint64_t(rate)) + "/s  ETA " + std::to_string(int((*total - done) / rate)) + " s";
      } else {
        line += megabytes(done);
      }
      std::fprintf(stderr, "%s\033[K", line.c_str());
      if (complete) std::fprintf(stderr, "\n");
    } else {
      const int decile = total && *total ? int(10 * done / *total) : -1;
      if (decile == last_decile_ && since_print < 10 && !complete) return;
      last_decile_ = decile;
      std::fprintf(stderr, "%s: %s%s\n", label_.c_str(), megabytes(done).c_str(),
                   total ? (" of " + megabytes(*total) + " (" +
                            std::to_string(100 * done / std::max<uint64_t>(*total, 1)) + "%)")
                               .c_str()
                         : "");
    }
    last_print_ = now;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  bool tty_;
  bool started_ = false;
  Clock::time_point start_, last_print_;
  uint64_t start_bytes_ = 0;
  int last_decile_ = -2;
};

// Downloads one model (either kind) with progress, turning a network failure
// into where to put the file by hand. `companion` (from `companion_url`): a second
// file the model needs and `pull` fetches too (Qwen3-ASR's mmproj).
void pull_one(const std::string& name, const std::string& file_name, const std::string& url,
              const std::filesystem::path& target, bool force, bool known_sha1,
              const std::function<std::filesystem::path(const models::PullOptions&)>& pull, models::PullOptions options,
              const std::string& companion_url = "", const std::filesystem::path& companion = {}) {
  if (std::filesystem::exists(target) && (companion.empty() || std::filesystem::exists(companion)) && !force) {
    std::printf("%s is already in the cache: %s\n", name.c_str(), target.string().c_str());
    return;
  }
  std::fprintf(stderr, "downloading %s from %s\n", name.c_str(), url.c_str());
  ProgressPrinter progress(file_name);
  options.progress = [&](uint64_t done, std::optional<uint64_t> total) { progress.update(done, total); };
  if (force) {
    std::filesystem::remove(target);
    if (!companion.empty()) std::filesystem::remove(companion);
  }
  std::filesystem::path path;
  try {
    path = pull(options);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kIo) throw;
    std::string by_hand = url + " elsewhere and place it at " + target.string();
    if (!companion.empty()) by_hand += ", and " + companion_url + " at " + companion.string();
    throw Error(e.code(), std::string(e.what()) + "\nWithout network access to it, download " + by_hand);
  }
  std::printf("%s verified (%s%s) and saved to %s\n", name.c_str(), megabytes(std::filesystem::file_size(path)).c_str(),
              known_sha1 ? ", SHA-1 matches" : "", path.string().c_str());
  if (!companion.empty()) {
    std::printf("  with its audio encoder (%s): %s\n", megabytes(std::filesystem::file_size(companion)).c_str(),
                companion.string().c_str());
  }
}

}  // namespace

// Every name `earshot pull` takes: the families' catalogues, then each stage's
// (--translation-model NAME, --diarization-model NAME).
static std::vector<models::ModelInfo> pullable_models() {
  std::vector<models::ModelInfo> all = engine::known_models();
  for (const stages::StageDefinition& stage : stages::registry()) {
    if (!stage.catalogue) continue;
    for (models::ModelInfo& m : stage.catalogue()) all.push_back(std::move(m));
  }
  return all;
}

int run_pull(const CommandArgs& argv) {
  Args args("pull",
            "earshot pull NAME... [--base-url URL] [--cache-dir DIR] [--force]\n"
            "earshot pull --list\n\n"
            "Downloads the files every model family publishes by name (whisper.cpp's ggml models, Qwen3-ASR GGUF\n"
            "pairs, transcribe.cpp's GGUFs...), diarization models and translation LLMs (see `earshot models`)\n"
            "into the model cache. Interrupted downloads resume where they stopped when run again.");
  args.option("base-url", "where model files are downloaded from (env EARSHOT_MODEL_BASE_URL)", models::kDefaultBaseUrl)
      .option("cache-dir", "model cache folder (env EARSHOT_CACHE_DIR)", "~/.cache/earshot/models")
      .flag("force", "download again even when the model is already cached")
      .flag("list", "list the known models with their sizes and cache status (as `earshot models`)");
  if (!args.parse_or_help(argv, {.required = {}, .positional = true})) return 0;
  if (args.get_flag("list")) {
    if (!args.positional().empty()) throw Error(ErrorCode::kInvalidArgument, "--list takes no model names");
    CommandArgs list;
    if (args.has("cache-dir")) list = {"--cache-dir", args.get("cache-dir")};
    return run_models(list);
  }
  if (args.positional().empty())
    throw Error(ErrorCode::kInvalidArgument,
                "name a model to download, e.g. `earshot pull base.en` (list: `earshot pull --list`)");

  models::PullOptions options;
  if (args.has("base-url")) options.base_url = args.get("base-url");
  options.cache_dir =
      args.has("cache-dir") ? std::filesystem::path(args.get("cache-dir")) : models::default_cache_dir();
  const bool force = args.get_flag("force");
  const std::vector<models::ModelInfo> known = pullable_models();
  for (const std::string& name : args.positional()) {
    const models::ModelInfo* model = models::find_model(known, name);
    if (model) {
      pull_one(
          model->name, models::model_file_name(*model), models::model_url(*model, options.base_url),
          models::cached_model_path(*model, options.cache_dir), force, !model->sha1.empty(),
          [&](const models::PullOptions& o) { return models::pull_model(*model, o); }, options,
          models::mmproj_url(*model, options.base_url), models::cached_mmproj_path(*model, options.cache_dir));
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "unknown model '" + name + "'; known models: " + models::model_names(known));
    }
  }
  return 0;
}

}  // namespace earshot::cli
