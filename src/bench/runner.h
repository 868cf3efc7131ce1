// Feeds audio through an OnlineProcessor the way the server does (fixed-size
// chunks, insert_audio then process) and records when each word appeared.
//
// Clocks. Every stream has its own clock starting at 0 when its first chunk is
// due. Audio time T is the stream time of sample T*16000.
//  * Realtime pacing: the chunk ending at audio time T is inserted when the
//    wall clock reaches T; if processing fell behind, every chunk that is due
//    is inserted at once (as a server's receive buffer would hold them), so
//    nothing is dropped and the backlog shows as lag.
//  * As fast as possible: chunks are inserted back to back.
// Per emission (one process()/finish() call) we record the wall time after the
// call, the audio time fed so far, and the time spent inside the processor.
// Per committed word: the wall time and audio time of the emission that
// committed it, and of the emission from which on the same text stood at the
// same position of hypothesis() uninterrupted (its first provisional sighting;
// equal to the commit when it was never shown before).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "policy/online_processor.h"

namespace earshot::bench {

// Optional per-stream compute counters a system may expose (cumulative).
// "Pass" = one encoder run over the buffered audio and the decoding that
// follows it; decoder_calls counts the decoder graph evaluations.
struct ComputeStats {
  long encoder_passes = 0;
  double encoder_seconds = 0;
  long decoder_calls = 0;
  double decoder_seconds = 0;
  bool available = false;  // false: the system exposes no counters

  ComputeStats& operator+=(const ComputeStats& o);
  ComputeStats operator-(const ComputeStats& o) const;  // counters between two snapshots
};

// A processor plus its optional stats hook.
struct StreamHandle {
  std::unique_ptr<OnlineProcessor> processor;
  std::function<ComputeStats()> stats;  // may be empty
};
using ProcessorFactory = std::function<StreamHandle()>;
// The same, told which utterance the stream will carry (the reference workload
// needs its transcript).
using FileProcessorFactory = std::function<StreamHandle(int file)>;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now() = 0;  // seconds, any fixed origin
  virtual void sleep_until(double t) = 0;
};

// std::chrono::steady_clock.
class SteadyClock : public Clock {
 public:
  double now() override;
  void sleep_until(double t) override;
};

enum class Pacing { kRealtime, kAsFastAsPossible };
const char* to_string(Pacing pacing);

struct StreamOptions {
  double chunk_seconds = 0.5;  // the server's and `earshot transcribe`'s default chunk
  Pacing pacing = Pacing::kAsFastAsPossible;
  bool warmup = true;       // call warmup() before the stream clock starts (not measured)
  bool keep_tails = false;  // keep each emission's provisional words (StreamTrace::tails; translation input)
};

struct Emission {
  double wall = 0;      // stream wall time after the call returned
  double audio = 0;     // audio time fed before the call
  double compute = 0;   // seconds spent inside insert_audio + process/finish
  int committed = 0;    // words committed by this call
  int provisional = 0;  // provisional words after the call
};

struct CommittedWord {
  Word word;
  double commit_wall = 0;
  double commit_audio = 0;
  double first_seen_wall = 0;
  double first_seen_audio = 0;
};

struct StreamTrace {
  double audio_seconds = 0;
  double elapsed_wall = 0;  // first chunk due .. finish() returned
  double compute_wall = 0;  // sum of Emission::compute
  std::vector<Emission> emissions;
  std::vector<CommittedWord> words;
  std::string text;                      // committed words joined (the transcript scored)
  std::vector<std::vector<Word>> tails;  // per emission, its provisional words (StreamOptions::keep_tails)
};

// Runs one stream to its end (finish()). Throws what the processor throws.
StreamTrace run_stream(OnlineProcessor& processor, std::span<const float> samples, const StreamOptions& options,
                       Clock& clock);

struct StreamRecord {
  int file = 0;     // index into the utterance list
  int session = 0;  // 0..sessions-1
  StreamTrace trace;
  std::string error;  // non-empty when the stream failed (trace is partial)
};

struct SystemRun {
  std::vector<StreamRecord> streams;
  ComputeStats stats;
  double elapsed_wall = 0;  // whole run, all sessions
};

// Progress callback: (session, files done by that session, files per session).
using Progress = std::function<void(int session, int done, int total)>;

// Runs `sessions` concurrent sessions (threads); each streams every utterance
// once, session s starting at utterance s (mod count) so that different audio
// overlaps. A processor error ends that stream only, recorded in StreamRecord.
SystemRun run_system(const ProcessorFactory& factory, const std::vector<std::vector<float>>& audio,
                     const StreamOptions& options, int sessions, const Progress& progress = {},
                     const std::function<std::unique_ptr<Clock>()>& make_clock = {});
SystemRun run_system(const FileProcessorFactory& factory, const std::vector<std::vector<float>>& audio,
                     const StreamOptions& options, int sessions, const Progress& progress = {},
                     const std::function<std::unique_ptr<Clock>()>& make_clock = {});

}  // namespace earshot::bench
