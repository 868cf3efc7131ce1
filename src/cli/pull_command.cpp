// `earshot pull NAME...`: downloads whisper.cpp ggml models into the cache.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "common/command_line.h"
#include "common/error.h"
#include "model/download.h"
#include "model/registry.h"

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

}  // namespace

int run_pull(const CommandArgs& argv) {
  Args args("pull",
            "earshot pull NAME... [--base-url URL] [--cache-dir DIR] [--force]\n\n"
            "Downloads whisper.cpp ggml models and Qwen3-ASR GGUF pairs (see `earshot models`) into the model cache.\n"
            "Interrupted downloads resume where they stopped when run again.");
  args.option("base-url", "where ggml-NAME.bin files are downloaded from (env EARSHOT_MODEL_BASE_URL)",
              models::kDefaultBaseUrl)
      .option("cache-dir", "model cache folder (env EARSHOT_CACHE_DIR)", "~/.cache/earshot/models")
      .flag("force", "download again even when the model is already cached");
  args.parse(argv);
  if (args.help_requested()) {
    std::printf("%s", args.help().c_str());
    return 0;
  }
  if (args.positional().empty())
    throw Error(ErrorCode::kInvalidArgument,
                "name a model to download, e.g. `earshot pull base.en` (list: `earshot models`)");

  models::PullOptions options;
  if (args.has("base-url")) options.base_url = args.get("base-url");
  options.cache_dir =
      args.has("cache-dir") ? std::filesystem::path(args.get("cache-dir")) : models::default_cache_dir();
  for (const std::string& name : args.positional()) {
    const models::ModelInfo* model = models::find_model(name);
    if (!model)
      throw Error(ErrorCode::kInvalidArgument,
                  "unknown model '" + name + "'; known models: " + models::known_model_names());
    const std::filesystem::path target = models::cached_model_path(*model, options.cache_dir);
    if (models::is_cached(*model, options.cache_dir) && !args.get_flag("force")) {
      std::printf("%s is already in the cache: %s\n", model->name.c_str(), target.string().c_str());
      continue;
    }
    const std::string url = models::model_url(*model, options.base_url);
    std::fprintf(stderr, "downloading %s from %s\n", model->name.c_str(), url.c_str());
    ProgressPrinter progress(models::model_file_name(*model));
    options.progress = [&](uint64_t done, std::optional<uint64_t> total) { progress.update(done, total); };
    if (args.get_flag("force")) {
      std::filesystem::remove(target);
      if (!model->mmproj.empty()) std::filesystem::remove(models::cached_mmproj_path(*model, options.cache_dir));
    }
    std::filesystem::path path;
    try {
      path = models::pull_model(*model, options);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kIo) throw;
      std::string by_hand = url + " elsewhere and place it at " + target.string();
      if (!model->mmproj.empty()) {
        by_hand += ", and " + models::mmproj_url(*model, options.base_url) + " at " +
                   models::cached_mmproj_path(*model, options.cache_dir).string();
      }
      throw Error(e.code(), std::string(e.what()) + "\nWithout network access to it, download " + by_hand);
    }
    std::printf("%s verified (%s%s) and saved to %s\n", model->name.c_str(),
                megabytes(std::filesystem::file_size(path)).c_str(), model->sha1.empty() ? "" : ", SHA-1 matches",
                path.string().c_str());
    if (!model->mmproj.empty()) {
      const std::filesystem::path mmproj = models::cached_mmproj_path(*model, options.cache_dir);
      std::printf("  with its audio encoder (%s): %s\n", megabytes(std::filesystem::file_size(mmproj)).c_str(),
                  mmproj.string().c_str());
    }
  }
  return 0;
}

}  // namespace earshot::cli
