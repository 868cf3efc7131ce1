// `earshot models`: the known model names, their sizes, and which are cached.
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cli/commands.h"
#include "common/command_line.h"
#include "model/registry.h"

namespace earshot::cli {

int run_models(const CommandArgs& argv) {
  Args args("models", "earshot models [--cache-dir DIR]\n\nLists the Whisper models `earshot pull` can download.");
  args.option("cache-dir", "model cache folder (env EARSHOT_CACHE_DIR)", "~/.cache/earshot/models");
  args.parse(argv);
  if (args.help_requested()) {
    std::printf("%s", args.help().c_str());
    return 0;
  }
  const std::filesystem::path cache =
      args.has("cache-dir") ? std::filesystem::path(args.get("cache-dir")) : models::default_cache_dir();
  std::printf("model cache: %s\n\n%-26s %10s  %-6s %s\n", cache.string().c_str(), "NAME", "SIZE", "SHA-1", "STATUS");
  std::vector<models::ModelInfo> all = models::known_models();
  all.insert(all.end(), models::known_transducer_models().begin(), models::known_transducer_models().end());
  all.insert(all.end(), models::known_qwen3asr_models().begin(), models::known_qwen3asr_models().end());
  for (const models::ModelInfo& m : all) {
    const std::filesystem::path path = models::cached_model_path(m, cache);
    const std::filesystem::path part = path.string() + ".part";
    std::error_code ec;
    std::string status = "-";
    if (models::is_cached(m, cache)) {
      status = "cached";
    } else if (std::filesystem::exists(part, ec)) {
      status = "partial (" + std::to_string(std::filesystem::file_size(part, ec) / 1000000) + " MB; `earshot pull " +
               m.name + "` resumes)";
    }
    char size[32];
    if (m.approx_bytes >= (1ull << 30))
      std::snprintf(size, sizeof size, "%.1f GiB", double(m.approx_bytes) / double(1ull << 30));
    else
      std::snprintf(size, sizeof size, "%llu MiB", static_cast<unsigned long long>(m.approx_bytes >> 20));
    std::printf("%-26s %10s  %-6s %s\n", m.name.c_str(), size, m.sha1.empty() ? "-" : "known", status.c_str());
  }
  std::printf(
      "\n.en = English only, -q5_0/-q5_1/-q8_0 = quantised, -tdrz = speaker turns (tinydiarize);\n"
      "qwen3-asr-*: a text GGUF and its mmproj, pulled together (Q8_0; no published SHA-1 known).\n"
      "`earshot pull NAME` downloads one; `--model NAME` uses it from the cache.\n");
  return 0;
}

}  // namespace earshot::cli
