// Deepgram's /v1/listen messages as data: the server's Results, Metadata,
// SpeechStarted, UtteranceEnd and Error messages, the prerecorded response, and
// the client's KeepAlive / Finalize / CloseStream. Shapes follow the official
// SDK's types (@deepgram/sdk LiveTranscriptionEvent, SyncPrerecordedResponse).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/word.h"
#include "protocol/deepgram/options.h"

namespace earshot::deepgram {

// Who answers: the same for every message of one request.
struct StreamInfo {
  std::string request_id;              // a UUID
  std::string created;                 // ISO 8601, UTC
  std::string model_name = "earshot";  // the model option, or the server's model id
  std::string model_uuid;
  std::string model_arch = "whisper";
  std::string model_version = "earshot";
  int channels = 1;  // of the audio (Metadata's channels; Results' channel_index [i, channels])
};

// One Results message: a window of the audio and the words in it.
struct Results {
  std::vector<Word> words;
  double start = 0;
  double duration = 0;
  bool is_final = false;
  bool speech_final = false;
  bool from_finalize = false;
  int channel = 0;  // of StreamInfo::channels (multichannel: each its own transcript)
};

// words[] entries: `word` lower-case without surrounding punctuation,
// `punctuated_word` as the model wrote it; a punctuation-only word joins the one
// before it. Unknown probabilities become confidence 0. With diarize, `speaker`
// is the word's speaker as given (Deepgram numbers speakers from 0: see
// number_speakers_from_zero) and absent when unknown.
nlohmann::json words_json(const std::vector<Word>& words, const ListenOptions& options);
// Word::speaker counts from 1 (stages/diarization, WhisperLiveKit's lines);
// Deepgram's from 0: speaker 1 becomes 0, unknown (< 1) stays unknown (-1).
void number_speakers_from_zero(std::vector<Word>& words);
// The alternative's transcript: punctuated words with punctuate/smart_format, plain ones otherwise.
std::string transcript(const std::vector<Word>& words, const ListenOptions& options);

nlohmann::json results_message(const Results& results, const ListenOptions& options, const StreamInfo& info);
// `skipped_seconds` > 0 adds that field (an addition: audio the server skipped to stay live).
nlohmann::json metadata_message(const StreamInfo& info, double duration, const std::string& sha256,
                                double skipped_seconds = 0);
// A Warning (the stream goes on; the SDKs' Warning event): audio of [start, end) was
// received but skipped, the server being too far behind a client sending in real time.
// No Results cover that time. Fields: variant "audio_skipped", description, start, duration.
nlohmann::json audio_skipped_message(double start, double end);
nlohmann::json speech_started_message(double timestamp, int channel = 0);
nlohmann::json utterance_end_message(double last_word_end, int channel = 0, int channels = 1);
nlohmann::json error_message(const std::string& description);
// POST /v1/listen's answer for a whole file. `language` is reported as detected_language when set.
nlohmann::json prerecorded_response(const std::vector<Word>& words, double duration, const std::string& language,
                                    const ListenOptions& options, const StreamInfo& info, const std::string& sha256);
// The same with a transcript per channel (multichannel), each with its detected language ("" = none).
struct ChannelTranscript {
  std::vector<Word> words;
  std::string language;
};
nlohmann::json prerecorded_response(const std::vector<ChannelTranscript>& channels, double duration,
                                    const ListenOptions& options, const StreamInfo& info, const std::string& sha256);
// A REST error body as Deepgram writes it.
nlohmann::json rest_error(const std::string& code, const std::string& message, const std::string& request_id);

enum class ClientMessage { kKeepAlive, kFinalize, kCloseStream };
// Throws Error(kInvalidArgument) for text that is not one of the three.
ClientMessage parse_client_message(std::string_view text);

}  // namespace earshot::deepgram
