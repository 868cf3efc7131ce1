// `earshot bench --turns`: how soon a voice agent hears that a speaker's turn is
// over. Streams of turns made from real speech clips (turn datasets below) run in
// real time, 20 ms frames, through the server's session pipeline (Silero VAD ->
// policy -> the stage chain with the turn stage) on a scheduler, N at once; a
// probe at the chain's end notes when each event came. Per reference turn, from
// its end of speech (the end of the clean clip's last speech segment by Silero VAD;
// its audio reaches the session at that moment of the run's clock):
//   vad         -> the session's SpeechEnded for it (the VAD's decision)
//   final text  -> the last of its words committed
//   end of turn -> its TurnEnded
// and the false end-of-turn rate: TurnEnded events inside a pause within a turn,
// per such pause. Turn datasets (make_turn_stream):
//   multi-turn   every clip a turn, one turn in three two clips joined by a 0.3 s
//                pause, turns 0.8 / 1.5 / 3 s apart in turn
//   two-speaker  JFK's phrases (cut at its pauses of 0.4 s or more) and the LibriVox
//                reader's clips alternating, 0.4 / 0.7 / 1.0 s apart (quick turn-taking)
// Pauses within a turn are the gaps between its clip's speech segments and the joins.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/reference_workload.h"
#include "bench/runner.h"
#include "events/event.h"
#include "policy/online_processor.h"
#include "session/scheduler.h"
#include "session/stream_session.h"
#include "session/voice_activity.h"
#include "stages/stage.h"

namespace earshot::bench {

struct RefTurn {
  double start = 0, end = 0;       // its speech, stream seconds
  std::vector<SpeechSpan> pauses;  // within it
  int speaker = 0;
};

struct TurnStream {
  std::string id;
  std::vector<float> samples;
  std::vector<RefTurn> turns;
  std::vector<TimedWord> words;  // the clips' reference words where they were placed (--workload reference)
};

// A source clip and its speech segments (seconds from its start).
struct TurnClip {
  std::string id;
  std::vector<float> samples;
  std::vector<SpeechSpan> speech;
  int speaker = 0;
  std::vector<TimedWord> words;  // its reference words with times (may be empty)
};

enum class TurnDatasetKind { kMultiTurn, kTwoSpeaker };
const char* to_string(TurnDatasetKind kind);  // "multi-turn", "two-speaker"
// Throws Error(kInvalidArgument) naming --turns for another name.
TurnDatasetKind parse_turn_dataset_kind(const std::string& name);

// The clip cut at its pauses of `min_pause` seconds or more (in their middle); each
// word goes to the part holding its middle.
std::vector<TurnClip> split_at_pauses(const TurnClip& clip, double min_pause);
// One stream of the dataset: `clips` (speaker 0's and speaker 1's for two-speaker)
// placed as the kind says, starting from clip `rotation` (mod their count),
// `lead_in` seconds of silence before (>= 0) and 2 s after. Deterministic.
inline constexpr double kTurnLeadInSeconds = 0.5;  // a stream's silence before its first turn
TurnStream make_turn_stream(TurnDatasetKind kind, const std::vector<TurnClip>& clips, int rotation,
                            double lead_in = kTurnLeadInSeconds);

// What the probe saw, on the run's clock (seconds since the feed started).
struct ProbedEvent {
  double wall = 0;
  events::Event event;
};

// One reference turn's delays (seconds after its end of speech reached the session).
struct TurnDelays {
  int stream = 0, turn = 0;
  double end_of_speech = 0;  // stream seconds
  std::optional<double> vad, final_text, end_of_turn;
  std::string reason;  // the TurnEnded's
  // The TurnEnded's text ended on a word that continues ("and", a comma...): the
  // rule then holds the turn for ~0.5 s of silence by design (docs/turns.md), so
  // its delay measures the rule, not how fast the pipeline is.
  bool text_continues = false;
  // Whether the system committed words in the turn's last stretch of speech
  // (after its last pause): without, what ends is a turn without words (noise,
  // a breath, or words the model did not hear), which the rule holds longer.
  bool last_part_has_words = false;
};

struct TurnScore {
  std::vector<TurnDelays> turns;
  long pauses = 0;       // pauses within turns
  long false_ends = 0;   // TurnEnded inside one of them
  long missed_ends = 0;  // turns without a TurnEnded of their own
};

// Matches one stream's probed events to its reference turns (the stream was fed
// in real time from wall 0: stream second T arrived at wall T).
TurnScore score_turns(const TurnStream& stream, const std::vector<ProbedEvent>& events, int stream_index = 0);

struct TurnBenchStream {
  std::unique_ptr<OnlineProcessor> processor;
  std::vector<std::unique_ptr<stages::Stage>> stages;  // with the turn stage
};
using TurnBenchFactory = std::function<TurnBenchStream(int session)>;

struct TurnRunOptions {
  int workers = 2;
  session::PassThreadPolicy pass_threads;  // threads per pass, what a lone pass may borrow (none by default)
  double frame_seconds = 0.02;
  session::StreamOptions stream;
  session::VadFactory vad;
};

struct TurnRun {
  TurnScore score;  // every stream's together
  std::vector<std::string> errors;
  double audio_seconds = 0;
  double elapsed_seconds = 0;
};

// Streams streams[s] through session s in real time (frames of frame_seconds, each
// when due on `clock`; null: the steady clock), all at once.
TurnRun run_turns(const TurnBenchFactory& factory, const std::vector<TurnStream>& streams,
                  const TurnRunOptions& options, Clock* clock = nullptr);

// One system's run, as `earshot bench --turns --json` writes it.
struct NamedTurnRun {
  std::string system;
  TurnRun run;
};
// {"turns": [{"system", "audio_seconds", "elapsed_seconds", "pauses", "false_ends",
// "missed_ends", "errors": [...], "turns": [{"stream", "turn", "end_of_speech",
// "vad", "final_text", "end_of_turn" (seconds; null when it never came), "reason",
// "text_continues", "last_part_has_words"}]}]}
void write_turns_json(std::ostream& out, const std::vector<NamedTurnRun>& runs);

// A percentile (0..1) of the given delays, linear between ranks; nullopt without any.
std::optional<double> delay_percentile(const std::vector<TurnDelays>& turns, std::optional<double> TurnDelays::*delay,
                                       double p);

}  // namespace earshot::bench
