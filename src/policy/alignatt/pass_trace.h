// One AlignAtt decoding pass as a JSON line (`earshot transcribe --trace`): what
// went in (audio range, encoder content frames, prompt ids), every token decoded
// with the frame it attended and how clear that choice was, why the pass
// stopped, and what it committed. The format is documented in docs/architecture.md
// ("Per-pass trace"); fields are only ever added.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace earshot::policy {

// Why a pass stopped decoding.
enum class StopReason {
  kBorder,        // the newest token attends within the frame threshold of the end (dropped)
  kRewind,        // attention jumped back beyond the rewind threshold (pass discarded)
  kEndOfText,     // the model ended the transcription
  kContextLimit,  // the text context is full
  kTokenBudget,   // guard: more decoder calls than the audio can hold
  kNoSpeech,      // P(no speech) at SOT above nonspeech_prob
};
const char* stop_reason_name(StopReason reason);

struct PassTrace {
  struct Token {
    int32_t id = 0;
    std::string text;          // bytes of this token alone
    int frame = 0;             // most attended encoder frame, buffer-relative
    double frame_margin = 0;   // its score minus the runner-up frame's (0 = exact tie)
    double logit_margin = -1;  // log-probability over the runner-up token's; -1 = not known (beams)
    float logprob = 0;
  };
  long index = 0;  // passes of this stream, from 0
  bool is_last = false;
  std::string language;                     // "" while detection waits
  double buffer_start = 0, buffer_end = 0;  // stream seconds
  int content_frames = 0;
  int sot_index = 0;  // where start_sequence() begins in the prompt
  std::vector<int32_t> prompt;
  std::vector<Token> tokens;  // decoded this pass, in order, the one stopped at included
  StopReason stop = StopReason::kEndOfText;
  std::vector<int32_t> committed;   // appended to the forced prefix
  std::vector<std::string> words;   // emitted as committed words
  std::vector<std::string> guards;  // what a guard did, one line each
};

std::string to_json(const PassTrace& trace);

}  // namespace earshot::policy
