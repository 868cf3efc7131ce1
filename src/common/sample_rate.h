// The one sample rate of audio inside earshot: every input is resampled to it at
// the edge (audio::load_file, the stream decoders), and every model family, the
// VAD, the features, the policies and the session count samples at it.
#pragma once

namespace earshot {

inline constexpr int kSampleRate = 16000;  // Hz, mono float samples in [-1, 1]

}  // namespace earshot
