// A two-speaker conversation made of real speech, with its RTTM truth, for
// diarization tests: JFK's inaugural excerpt (shared/data/jfk.wav, one
// speaker, cut into its three phrases) and the LibriVox reader of Sense and
// Sensibility (shared/data/librivox/*.wav, five excerpts of one chapter read
// by one person) take turns with pauses, and talk over each other twice.
//
// The truth comes from the sources, not the mix: each source clip's speech is
// found by its own frame energy (20 ms frames louder than the clip's loudest
// less 30 dB, gaps under 0.3 s closed, 50 ms pad), then placed where the clip
// is placed. Deterministic: the same data give the same bytes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bench/der.h"

namespace earshot::tools {

struct Conversation {
  std::vector<float> samples;                // 16 kHz mono
  std::vector<bench::SpeakerSegment> truth;  // sorted by start
};

// Speech intervals (seconds from the clip's start) of one clip by the energy
// rule above. Exposed for tests.
std::vector<bench::TimeRange> speech_in_clip(const std::vector<float>& samples);

// Reads DATA/jfk.wav and DATA/librivox/sense_and_sensibility_01_austen_64kb-0{870,880,890,920,930}.wav.
// Throws earshot::Error naming a missing file.
Conversation make_conversation(const std::filesystem::path& data_dir, const std::string& file_id = "conversation");

// 16-bit PCM WAV, 16 kHz mono (samples clipped to [-1, 1]).
void write_wav_16k(const std::filesystem::path& path, const std::vector<float>& samples);

}  // namespace earshot::tools
