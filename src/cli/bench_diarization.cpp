#include "cli/bench_diarization.h"

#include <sys/resource.h>

#include <cstdio>

#include "common/error.h"

namespace earshot::cli {
namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

std::optional<DiarizationBench> diarization_bench(const stages::StageChain& chain, const Args& args,
                                                  const std::vector<bench::Utterance>& utterances,
                                                  const std::string& language, int threads) {
  const stages::LoadedStage* stage = chain.find("diarization");
  if (!stage) return std::nullopt;
  DiarizationBench d;
  d.stage = stage;
  d.language = language;
  const long chunk_ms = args.get_int("diarization-chunk-ms");
  d.detail = "model " + args.get("diarization-model") + ", chunk " +
             (chunk_ms > 0 ? std::to_string(chunk_ms) + " ms" : std::string("the model's default")) + ", " +
             std::to_string(threads) + " thread(s), max speakers " + args.get("max-speakers");
  d.truths = bench::load_speaker_truths(utterances);
  long without = 0;
  for (const auto& t : d.truths) without += !t.has_value();
  if (without > 0)
    std::fprintf(stderr,
                 "earshot bench: %ld of %zu clip(s) have no RTTM truth (AUDIO.rttm next to the audio): their "
                 "diarization is measured for its compute only\n",
                 without, utterances.size());
  d.word_truths = bench::load_word_truths(utterances);
  d.normalizer = bench::parse_normalizer_kind(args.get("normalizer"));
  long with_stm = 0;
  for (const auto& t : d.word_truths) with_stm += t.has_value();
  if (with_stm > 0 && with_stm < static_cast<long>(utterances.size()))
    std::fprintf(stderr,
                 "earshot bench: %ld of %zu clip(s) have no STM transcript (AUDIO.stm next to the audio): no cpWER "
                 "for them\n",
                 static_cast<long>(utterances.size()) - with_stm, utterances.size());
  return d;
}

bench::DiarizationSummary run_diarization(const bench::SystemRun& run, const std::vector<std::vector<float>>& audio,
                                          const std::vector<bench::Utterance>& utterances,
                                          const DiarizationBench& diarization, const std::string& name) {
  std::vector<bench::DiarizedClip> clips;
  bench::SteadyClock clock;
  // The stages run one after another on this thread, with nothing else running:
  // the process's CPU time over them is theirs (the model's threads included).
  const double cpu0 = cpu_seconds();
  for (const bench::StreamRecord& r : run.streams) {
    if (!r.error.empty()) continue;  // a failed ASR stream: its words are partial (the report counts it)
    const auto file = static_cast<size_t>(r.file);
    // A file: the stage works in order, on this thread (no live pool).
    const std::unique_ptr<stages::Stage> stage = diarization.stage->open({diarization.language, {}, false});
    if (!stage) throw Error(ErrorCode::kInternal, "the diarization stage declined a bench stream");
    const bench::DiarizedStream stream = bench::diarize_trace(r.trace, audio.at(file), *stage, clock);
    bench::DiarizedClip clip = bench::score_clip(utterances.at(file), stream, diarization.truths.at(file));
    if (const auto& words = diarization.word_truths.at(file)) {
      clip.word_truth = words->path;
      clip.cpwer = bench::score_cpwer_words(words->segments, stream.words, diarization.normalizer);
    }
    clip.file = r.file;
    clip.session = r.session;
    clips.push_back(std::move(clip));
    std::fprintf(stderr, "[%s diarization] %zu/%zu streams\n", name.c_str(), clips.size(), run.streams.size());
  }
  return bench::summarize_diarization(diarization.detail, std::move(clips), cpu_seconds() - cpu0);
}

}  // namespace earshot::cli
