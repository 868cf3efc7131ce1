// A transcribed word with its time: what a policy commits, the events carry, the
// stages label (speaker, language) and every protocol renders. Its own header so
// those layers share the type without the policy's contract.
#pragma once

#include <string>

namespace earshot {

struct Word {
  std::string text;  // UTF-8, leading space kept where the script uses spaces
  double start = 0;  // seconds since the stream started
  double end = 0;
  float probability = -1;  // < 0 when unknown
  std::string language;    // detected or configured language, "" when unknown
  int speaker = -1;        // -1 = no speaker information (the diarization stage labels it)
};

}  // namespace earshot
