// A transducer's tokens become words with frame times: a token that starts a
// word completes the one before, any other continues it; a language tag sets
// the language instead. What every transducer policy shares.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "model/transducer_stream.h"
#include "policy/online_processor.h"

namespace earshot::policy {

struct WordAssembler {
  const TokenPieces* pieces = nullptr;
  double frame_seconds = 0.08;
  std::string language;
  bool stream_has_words = false;  // the very first word of a stream has no leading space
  Word pending;                   // the word in progress

  // A stream's assembler: its pieces and frame length, the request's language ("auto": none yet).
  static WordAssembler for_stream(const TransducerStream& stream, const std::string& language);

  // Emissions of frames whose frame 0 is at time_origin; completed words go to
  // `out`. No word starts or ends past audio_end, the end of the audio decoded: a
  // TDT duration can reach past the last frame, the last frame past the last
  // sample, and Voxtral's tokens of its right padding (the slots after the audio
  // that let its last words out) past the audio itself.
  void add(const std::vector<TokenEmission>& emissions, double time_origin, std::vector<Word>& out,
           double audio_end = std::numeric_limits<double>::infinity());
  // The word in progress, if any, to `out`.
  void flush(std::vector<Word>& out);
};

}  // namespace earshot::policy
