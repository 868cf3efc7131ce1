// `earshot models`: the known model names, their sizes, and which are cached.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "common/command_line.h"
#include "engine/catalogue.h"
#include "engine/model_files.h"
#include "model/registry.h"
#include "stages/registry.h"

namespace earshot::cli {

namespace {

// `companion`: a second file the model needs (Qwen3-ASR's mmproj); cached only with both.
// The NAME column: wide enough for the longest name (transcribe.cpp/nemotron-...).
int name_width = 26;

void print_row(const std::string& name, const std::filesystem::path& path, uint64_t approx_bytes, bool sha1_known,
               const std::filesystem::path& companion = {}) {
  const std::filesystem::path part = path.string() + ".part";
  std::error_code ec;
  std::string status = "-";
  if (std::filesystem::exists(path, ec) && (companion.empty() || std::filesystem::exists(companion, ec))) {
    status = "cached";
  } else if (std::filesystem::exists(part, ec)) {
    status = "partial (" + std::to_string(std::filesystem::file_size(part, ec) / 1000000) + " MB; `earshot pull " +
             name + "` resumes)";
  }
  char size[32];
  if (approx_bytes >= (1ull << 30))
    std::snprintf(size, sizeof size, "%.1f GiB", double(approx_bytes) / double(1ull << 30));
  else
    std::snprintf(size, sizeof size, "%llu MiB", static_cast<unsigned long long>(approx_bytes >> 20));
  std::printf("%-*s %10s  %-6s %s\n", name_width, name.c_str(), size, sha1_known ? "known" : "-", status.c_str());
}

// Every model file in the cache (a listed name or not): its family, layout and quantisation.
void print_cached_files(const std::filesystem::path& cache) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(cache, ec)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file(ec) && (ext == ".bin" || ext == ".gguf")) files.push_back(entry.path());
  }
  if (files.empty()) return;
  std::sort(files.begin(), files.end());
  std::vector<engine::FileSummarizer> stage_files;
  for (const stages::StageDefinition& stage : stages::registry())
    if (stage.summarize) stage_files.push_back(stage.summarize);
  std::printf("\ncached files:\n%-40s %-26s %-28s %s\n", "FILE", "FAMILY", "LAYOUT", "QUANTISATION");
  for (const std::filesystem::path& f : files) {
    const quantize::FileSummary s = engine::summarize_model_file(f, stage_files);
    std::printf("%-40s %-26s %-28s %s\n", std::filesystem::relative(f, cache, ec).string().c_str(), s.family.c_str(),
                s.layout.c_str(), s.quantization.c_str());
  }
}

}  // namespace

int run_models(const CommandArgs& argv) {
  Args args("models",
            "earshot models [--cache-dir DIR]\n\nLists the models `earshot pull` can download: every model family's "
            "(--model),\n"
            "translation LLMs (--translation-model), speaker diarization (--diarization-model).");
  args.option("cache-dir", "model cache folder (env EARSHOT_CACHE_DIR)", "~/.cache/earshot/models");
  if (!args.parse_or_help(argv)) return 0;
  const std::filesystem::path cache =
      args.has("cache-dir") ? std::filesystem::path(args.get("cache-dir")) : models::default_cache_dir();
  const std::vector<models::ModelInfo> all = engine::known_models();
  std::vector<std::pair<std::string, std::vector<models::ModelInfo>>> by_stage;  // the stages' catalogues
  for (const stages::StageDefinition& stage : stages::registry())
    if (stage.catalogue) by_stage.emplace_back(stage.name, stage.catalogue());
  for (const models::ModelInfo& m : all) name_width = std::max(name_width, static_cast<int>(m.name.size()));
  for (const auto& [stage, entries] : by_stage)
    for (const models::ModelInfo& m : entries) name_width = std::max(name_width, static_cast<int>(m.name.size()));
  std::printf("model cache: %s\n\n%-*s %10s  %-6s %s\n", cache.string().c_str(), name_width, "NAME", "SIZE", "SHA-1",
              "STATUS");
  for (const models::ModelInfo& m : all) {
    print_row(m.name, models::cached_model_path(m, cache), m.approx_bytes, !m.sha1.empty(),
              models::cached_mmproj_path(m, cache));
  }
  for (const auto& [stage, entries] : by_stage) {
    std::printf("\n%s models (--%s-model NAME):\n", stage.c_str(), stage.c_str());
    for (const models::ModelInfo& m : entries)
      print_row(m.name, models::cached_model_path(m, cache), m.approx_bytes, !m.sha1.empty());
  }
  print_cached_files(cache);
  std::printf(
      "\n.en = English only, -q5_0/-q5_1/-q8_0 = quantised, -tdrz = speaker turns (tinydiarize);\n"
      "qwen3-asr-*: a text GGUF and its mmproj, pulled together (Q8_0; no published SHA-1 known).\n"
      "transcribe.cpp/*: the GGUFs transcribe.cpp publishes, read in its layout (no published hash known).\n"
      "`earshot pull NAME` downloads one; `--model NAME` / `--translation-model NAME` / `--diarization-model NAME`\n"
      "uses it from the cache.\n");
  return 0;
}

}  // namespace earshot::cli
