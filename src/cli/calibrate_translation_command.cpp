// `earshot calibrate-translation`: ranks a translation model's (layer, head)
// pairs by how well their attention follows the alignment of parallel sentence
// pairs (stages/translation/head_calibration.h), prints the ranking and writes
// the best heads as a calibration entry for --translation-calibration.
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "common/command_line.h"
#include "common/error.h"
#include "stages/translation/head_calibration.h"
#include "stages/translation/options.h"

namespace earshot::cli {

namespace tr = stages::translation;

int run_calibrate_translation(const CommandArgs& argv) {
  Args args("calibrate-translation",
            "earshot calibrate-translation --model M --source-lang xx --target-lang yy --pairs FILE.jsonl "
            "[--out heads.json]\n\n"
            "Teacher-forces each (source, reference) pair through the translation prompt, scores every\n"
            "attention head by how often its most-attended source token is the aligned one (a pair's\n"
            "\"alignment\": \"0-0 1-2 ...\" over whitespace words, else the monotonic diagonal), prints the\n"
            "ranking and writes the top heads as a calibration entry (--translation-calibration FILE).\n"
            "FILE.jsonl: one {\"source\": ..., \"target\": ..., \"alignment\": optional} per line.");
  args.option("model", "translation LLM: a GGUF path or a name `earshot pull` knows")
      .option("source-lang", "source language code (en, zh, ...)")
      .option("target-lang", "target language code")
      .option("pairs", "parallel sentence pairs, JSON lines")
      .option("out", "write the calibration entry (JSON) here", "")
      .option("top", "heads written to the entry, best first", "8")
      .option("show", "rows of the ranking printed", "20")
      .option("tolerance", "diagonal alignment: tokens off the diagonal that still count as a hit", "1")
      .option("model-id", "the id the entry is keyed by (default: the model's own id)", "")
      .option("threads", "CPU threads (0: the backend's default)", "0");
  if (!args.parse_or_help(argv, {.required = {"model", "source-lang", "target-lang", "pairs"}})) return 0;
  const long top = args.get_int("top"), show = args.get_int("show"), tolerance = args.get_int("tolerance");
  if (top < 1 || show < 0 || tolerance < 0)
    throw Error(ErrorCode::kInvalidArgument, "--top must be >= 1, --show and --tolerance >= 0");
  const std::vector<tr::CalibrationPair> pairs = tr::read_calibration_pairs(args.get("pairs"));
  tr::HeadCalibrationOptions options;
  options.source_language = args.get("source-lang");
  options.target_language = args.get("target-lang");
  options.tolerance = static_cast<int>(tolerance);
  options.threads = static_cast<int>(args.get_int("threads"));
  const std::shared_ptr<const llm::LlmModel> model = tr::load_translation_model(args.get("model"), options.threads);
  const tr::HeadCalibration result = tr::calibrate_heads(*model, pairs, options);
  for (const std::string& p : result.problems) std::fprintf(stderr, "earshot calibrate-translation: %s\n", p.c_str());

  std::printf("%s %s->%s: %d pair(s), %ld target tokens scored, %zu heads\n", model->id().c_str(),
              options.source_language.c_str(), options.target_language.c_str(), result.pairs_used, result.target_tokens,
              result.ranked.size());
  std::printf("%5s %6s %5s %8s %10s\n", "rank", "layer", "head", "score", "mean dist");
  for (size_t i = 0; i < result.ranked.size() && static_cast<long>(i) < show; ++i) {
    const tr::HeadScore& h = result.ranked[i];
    std::printf("%5zu %6d %5d %8.3f %10.3f\n", i + 1, h.head.layer, h.head.head, h.score, h.mean_distance);
  }
  const std::string id = args.get("model-id").empty() ? model->id() : args.get("model-id");
  const tr::CalibrationEntry entry =
      tr::calibration_entry(result, id, options.source_language, options.target_language, static_cast<int>(top));
  const std::string json = tr::calibration_json(entry);
  if (args.get("out").empty()) {
    std::printf("%s\n", json.c_str());
  } else {
    std::ofstream out(args.get("out"));
    out << json << "\n";
    if (!out) throw Error(ErrorCode::kIo, "cannot write --out file '" + args.get("out") + "'");
    std::printf("calibration entry (%zu heads) written to %s; use it with --translation-calibration %s\n",
                entry.heads.size(), args.get("out").c_str(), args.get("out").c_str());
  }
  return 0;
}

}  // namespace earshot::cli
