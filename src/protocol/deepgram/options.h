// Deepgram's /v1/listen query options, parsed and checked. Pure code: every bad
// value is an Error(kInvalidArgument) whose message names the option, which the
// server sends back as an Error message (live) or an HTTP 400 (prerecorded).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/keyterms.h"

namespace earshot::deepgram {

struct ListenOptions {
  std::string model = "earshot";
  std::string language;  // "" = the server's default; else a bare code ("en-US" -> "en", "multi" -> "auto")
  // "" = a container FFmpeg decodes (wav, webm, ogg, mp3...); raw audio: "linear16"
  // (s16le), "mulaw" or "alaw" (G.711, a byte per sample: telephony's 8 kHz).
  std::string encoding;
  int sample_rate = 0;  // raw encodings only (required there); other audio carries its own
  // Interleaved channels of raw audio: mixed down to one transcript, or with
  // multichannel a transcript per channel (Results carry channel_index).
  int channels = 1;
  bool multichannel = false;
  // keyterm (repeated; Nova-3's) and keywords (repeated, word:intensifier; Nova-2's),
  // in the order given.
  Keyterms keyterms;
  bool interim_results = false;
  bool punctuate = false;
  bool smart_format = false;  // accepted; punctuated_word carries the model's own formatting
  // Silence (ms) after speech that ends an utterance with speech_final; nullopt = endpointing=false.
  std::optional<int> endpointing_ms = 10;
  std::optional<int> utterance_end_ms;  // 1000-5000; needs interim_results
  bool vad_events = false;
  bool diarize = false;  // accepted; words carry speaker once diarization runs
  // earshot's own: how far the text may trail the audio, in ms, for a model that lets
  // a stream choose (Voxtral Realtime); 0 = the server's (the model checks the value).
  int delay_ms = 0;
};

// Reads the options of a /v1/listen request (decoded query). Unknown keys are
// ignored, as Deepgram ignores features a model lacks; `token` is auth, not an option.
// `pairs`: every parameter in order (protocol::Target::pairs), for the options
// that repeat (keyterm, keywords); without them the map's one value of each.
ListenOptions parse_listen_options(const std::map<std::string, std::string>& query,
                                   const std::vector<std::pair<std::string, std::string>>& pairs = {});

}  // namespace earshot::deepgram
