// Record/replay of the translation stage (WhisperLiveKit #426's fixture): the stage's
// full input event stream from a live run as JSONL, one event a line with the
// wall time it reached the stage, replayed deterministically through a fresh
// synchronous stage (greedy; every draft run, none skipped) with any commit
// mode, for A/B comparisons. Also the figures of a run: draft coverage (how
// much of each final was shown before it, committed or drafted) and delays.
#pragma once

#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/event.h"
#include "stages/translation/translation_stage.h"

namespace earshot::stages::translation {

struct RecordedEvent {
  double t = 0;  // seconds since the stage's first input
  events::Event event;
};

// One line per event: {"t": ..., "type": "words"|"tail"|"pause"|"speech_start"|
// "speech_end"|"language"|"error"|"finalized"|"end", ...}; output events
// ("committed"|"draft"|"final") too, so a replay's output can be written alike.
std::string to_json_line(const RecordedEvent& e);
// Throws Error(kInvalidArgument) for a line that is not one of these.
RecordedEvent from_json_line(std::string_view line);
std::vector<RecordedEvent> read_recording(const std::string& path);

// Writes every event it is given to a JSONL file, timed from the first (thread-safe).
class InputRecorder {
 public:
  explicit InputRecorder(const std::string& path);  // throws Error(kIo)
  ~InputRecorder();
  void record(const events::Event& event);

 private:
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  double first_ = -1;
};

struct ReplayResult {
  std::vector<RecordedEvent> output;  // the stage's translation events, at the time of the input that produced them
  int model_calls = 0;
  // Share (in code points) of the finals' text first shown, committed or as a
  // draft, before each final arrived; 1 = everything was shown in advance.
  double draft_coverage = 0;
  // Per committed piece: its time minus its segment's first input (seconds).
  std::vector<double> commit_delays;
  // Per final: its time minus the segment's last committed source word's input.
  std::vector<double> final_lags;
  int finals = 0;
};

// Runs `input` through a fresh synchronous stage over `model` and `registry`
// with `options` and source language `source_language`.
ReplayResult replay(std::shared_ptr<const llm::LlmModel> model, const CalibrationRegistry& registry,
                    const std::vector<RecordedEvent>& input, const std::string& source_language,
                    const TranslationOptions& options);
// The figures of a replay as JSON (the command's report).
std::string replay_report_json(const ReplayResult& result);

}  // namespace earshot::stages::translation
