#include "cli/bench_turns.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "common/sample_rate.h"
#include "session/silero_vad.h"

namespace earshot::cli {

std::vector<bench::TurnClip> turn_clips(const std::vector<std::vector<float>>& audio,
                                        const std::vector<std::string>& ids,
                                        const std::vector<std::vector<bench::TimedWord>>& words,
                                        const std::shared_ptr<const vad::VadModel>& vad, bench::TurnDatasetKind kind) {
  std::vector<bench::TurnClip> clips;
  size_t longest = 0;
  for (size_t i = 0; i < audio.size(); ++i) {
    bench::TurnClip c;
    c.id = ids.at(i);
    c.samples = audio[i];
    c.speech = bench::speech_segments(vad, c.samples);
    if (i < words.size()) c.words = words[i];
    if (c.speech.empty()) continue;  // no speech: no turn
    if (audio[i].size() > audio[longest].size()) longest = i;
    clips.push_back(std::move(c));
  }
  if (kind == bench::TurnDatasetKind::kMultiTurn) return clips;
  std::vector<bench::TurnClip> out;
  for (bench::TurnClip& c : clips) {
    if (c.id == ids.at(longest)) {
      c.speaker = 0;
      for (bench::TurnClip& part : bench::split_at_pauses(c, 0.4)) out.push_back(std::move(part));
    } else {
      c.speaker = 1;
      out.push_back(std::move(c));
    }
  }
  return out;
}

namespace {

std::string ms(std::optional<double> seconds) {
  if (!seconds) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", *seconds * 1000.0);
  return text;
}

}  // namespace

bench::TurnRun run_turn_bench(const engine::Engine& engine, const std::string& name, const std::string& policy,
                              const BenchSettings& s, const std::vector<bench::TurnClip>& clips,
                              const std::shared_ptr<const vad::VadModel>& vad, const stages::StageChain& chain) {
  const stages::LoadedStage* turns = chain.find("turns");
  if (!turns) throw Error(ErrorCode::kInvalidArgument, "--turns measures the turn stage: drop --turn-detection off");
  std::vector<bench::TurnStream> streams;
  for (int i = 0; i < s.sessions; ++i)
    streams.push_back(bench::make_turn_stream(*s.turns, clips, i, bench::kTurnLeadInSeconds + s.turn_stagger * i));
  bench::TurnBenchFactory factory = [&](int session) {
    engine::StreamRequest request;
    request.policy = policy;
    request.language = s.language;
    request.keyterms = s.keyterms;
    request.on_warning = [](const std::string&) {};
    bench::TurnBenchStream out;
    if (s.workload == BenchWorkload::kReference) {
      out.processor =
          bench::open_reference_stream(engine, request, streams.at(static_cast<size_t>(session)).words).processor;
    } else {
      out.processor = engine.open_stream(request);
    }
    std::unique_ptr<stages::Stage> stage = turns->open({s.language, {}, true});
    if (stage) out.stages.push_back(std::move(stage));
    return out;
  };
  bench::TurnRunOptions options;
  const WorkerPlan plan = plan_workers(s.workers, engine.capabilities(), s.model.runtime, machine_cores());
  options.workers = plan.workers;
  options.pass_threads = plan.threads;
  options.stream.stop_passes = s.workers.stop_passes;
  options.frame_seconds = 0.02;
  options.stream.min_step_seconds = 0.04;  // serve's --vac-chunk-size
  options.vad = session::silero_vad_factory(vad);
  std::fprintf(stderr, "[%s] %d stream(s) of %s in real time...\n", name.c_str(), s.sessions,
               bench::to_string(*s.turns));
  const bench::TurnRun run = bench::run_turns(factory, streams, options);
  const bench::TurnScore& sc = run.score;
  using D = bench::TurnDelays;
  // The delays of turns whose last stretch of speech has words, those an agent
  // answers; one the system gave no words there (noise, a breath, words the model
  // did not hear) ends a turn without words, after a longer silence by the rule
  // (its prior is 0.5), and is reported apart.
  std::vector<D> spoken, wordless;
  for (const D& t : sc.turns) (t.last_part_has_words ? spoken : wordless).push_back(t);
  std::printf("%-22s %6s %8s %8s %8s %8s %8s %8s %12s %7s\n", "system", "turns", "vad p50", "vad p95", "text p50",
              "text p95", "eot p50", "eot p95", "false ends", "missed");
  char false_ends[48];
  std::snprintf(false_ends, sizeof false_ends, "%ld/%ld", sc.false_ends, sc.pauses);
  std::printf("%-22s %6zu %8s %8s %8s %8s %8s %8s %12s %7ld\n", name.c_str(), spoken.size(),
              ms(bench::delay_percentile(spoken, &D::vad, 0.5)).c_str(),
              ms(bench::delay_percentile(spoken, &D::vad, 0.95)).c_str(),
              ms(bench::delay_percentile(spoken, &D::final_text, 0.5)).c_str(),
              ms(bench::delay_percentile(spoken, &D::final_text, 0.95)).c_str(),
              ms(bench::delay_percentile(spoken, &D::end_of_turn, 0.5)).c_str(),
              ms(bench::delay_percentile(spoken, &D::end_of_turn, 0.95)).c_str(), false_ends, sc.missed_ends);
  if (!wordless.empty()) {
    std::printf("  and %zu turn(s) ending in speech without words: vad %s / %s, end of turn %s / %s (p50 / p95)\n",
                wordless.size(), ms(bench::delay_percentile(wordless, &D::vad, 0.5)).c_str(),
                ms(bench::delay_percentile(wordless, &D::vad, 0.95)).c_str(),
                ms(bench::delay_percentile(wordless, &D::end_of_turn, 0.5)).c_str(),
                ms(bench::delay_percentile(wordless, &D::end_of_turn, 0.95)).c_str());
  }
  // Turns whose text continues wait ~0.5 s of silence by the rule: apart, the
  // others show how fast the pipeline ends a turn.
  std::vector<D> continuing, finished;
  for (const D& t : spoken)
    if (t.end_of_turn) (t.text_continues ? continuing : finished).push_back(t);
  if (!continuing.empty()) {
    std::printf(
        "  of them %zu end on a word that continues (held ~0.5 s by the rule): end of turn %s / %s; the other "
        "%zu: %s / %s (p50 / p95)\n",
        continuing.size(), ms(bench::delay_percentile(continuing, &D::end_of_turn, 0.5)).c_str(),
        ms(bench::delay_percentile(continuing, &D::end_of_turn, 0.95)).c_str(), finished.size(),
        ms(bench::delay_percentile(finished, &D::end_of_turn, 0.5)).c_str(),
        ms(bench::delay_percentile(finished, &D::end_of_turn, 0.95)).c_str());
  }
  std::printf(
      "  (ms after each end of speech; %s, %d stream(s) %g s apart, %s, workload %s, "
      "%.0f s of audio in %.0f s)\n",
      bench::to_string(*s.turns), s.sessions, s.turn_stagger, plan.describe().c_str(), to_string(s.workload),
      run.audio_seconds, run.elapsed_seconds);
  for (const std::string& e : run.errors) std::printf("  stream error: %s\n", e.c_str());
  std::fflush(stdout);
  return run;
}

}  // namespace earshot::cli
