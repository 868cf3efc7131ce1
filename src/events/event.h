// What a stream session emits: transcript events on the audio clock, in order.
// Stages (translation, diarization) consume and produce them; every wire
// protocol (WhisperLiveKit's /asr, Deepgram's /v1/listen, the OpenAI file
// endpoint, the CLI's renderings) is a projection of the same stream. Events
// are append-only: a consumer that has seen event n never needs it again.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "common/word.h"

namespace earshot::events {

// Newly committed words, in order; never retracted or repeated. A session fills
// each word's language from the processor when the word has none. The stream's
// committed words are numbered from 0 in this order (SpeakersAssigned names them so).
struct WordsCommitted {
  std::vector<Word> words;
  // A stage (diarization) will name these words' speakers in a later
  // SpeakersAssigned, always before EndOfStream; until then their speaker is -1.
  bool speakers_pending = false;
};

// The whole uncommitted tail now (replaces the previous one; may be empty).
struct ProvisionalChanged {
  std::vector<Word> words;
};

// Voice activity on the audio clock (seconds since the stream started).
struct SpeechStarted {
  double at = 0;
};
struct SpeechEnded {
  double at = 0;  // everything before it has been flushed through the model
};

// A pause of at least the session's pause-segmentation length. While it goes on
// the same pause is re-emitted with a later end (same start); ongoing = false
// once speech resumed or the stream ended.
struct Pause {
  double start = 0;
  double end = 0;
  bool ongoing = true;
};

struct LanguageDetected {
  std::string language;  // a code ("en")
};

// The session failed; nothing follows but EndOfStream.
struct StreamError {
  std::string message;
};

// The client asked for a flush (StreamSession::finalize): every word of the
// audio before `at` has been committed (the words of that flush precede this).
// Requests at the same stream position merge into one Finalized: `requests`
// counts the finalize() calls answered so far (cumulative), so a caller that
// numbered its requests knows which are done.
struct Finalized {
  double at = 0;
  uint64_t requests = 0;
};

// Everything the stream will ever produce has been emitted.
struct EndOfStream {};

// Audio of [start, end) (stream seconds) was received but never reached the
// model: the session fell too far behind a client paced in real time and
// skipped its oldest waiting audio to stay live. Nothing is transcribed there;
// the words before it were flushed first. A client sending faster than real
// time is held back instead (the transport stops reading) and loses nothing.
struct AudioSkipped {
  double start = 0;
  double end = 0;
};

// Translation (stages/translation). Segments are numbered from 0 in stream order;
// `start` is the stream time of the segment's first source word.
// Target text newly committed for the open segment: append-only within it.
struct TranslationCommitted {
  int segment = 0;
  double start = 0;
  std::string text;
};
// The provisional rest of the open segment's draft now (replaces the previous
// one; may be empty), after what TranslationCommitted has sent.
struct TranslationDraftChanged {
  int segment = 0;
  double start = 0;
  std::string text;
};
// A closed segment's full-quality translation: it replaces the segment's
// committed text and draft (which may differ from it).
struct SegmentTranslated {
  int segment = 0;
  double start = 0;
  double end = 0;
  std::string source;
  std::string translation;
};

// Diarization (stages/diarization): the speakers of committed words that came
// with speakers_pending, final (never revised). speakers[i] is the speaker of
// committed word first_word + i (1-based, as Word::speaker; -1 = unknown: no
// speech activity near the word). Assignments come in word order, each word once.
// Provisional words need no event: a ProvisionalChanged's words carry their
// current (revisable) speaker.
struct SpeakersAssigned {
  uint64_t first_word = 0;
  std::vector<int> speakers;
};

// Turn detection (stages/turns): a speaker's turn as a voice agent needs it. Turns
// are numbered from 0 in stream order. A turn starts with speech (TurnStarted); it
// may be judged likely over (TurnEndLikely: an eager end, on which an agent may
// start preparing a reply), after which it either resumes (TurnResumed: speech came
// back before the end was confirmed) or ends (TurnEnded). Every word of a turn is
// committed before its TurnEnded in the log, and before its TurnEndLikely: a
// TurnEnded that follows a TurnEndLikely without a TurnResumed between them has the
// same words.
struct TurnEvidence {
  double silence_seconds = 0;          // of the pause after the turn's last speech (VAD)
  bool all_committed = false;          // no word of the turn is still provisional
  bool sentence_end = false;           // the committed text ends a sentence (. ? ! and their CJK forms)
  bool trailing_continuation = false;  // it ends on a word that continues ("and", "but", "um"...)
  double semantic = -1;                // a semantic end-of-turn model's probability; -1 = none ran
  // What decided: "silence", "semantic", "timeout" (the longest pause allowed),
  // "finalize" (the client asked), "end_of_stream".
  std::string reason;
};
struct TurnStarted {
  int turn = 0;
  double at = 0;  // stream seconds: the start of its speech
};
struct TurnEndLikely {
  int turn = 0;
  double at = 0;          // the end of its speech
  double confidence = 0;  // that the turn is over, 0..1
  TurnEvidence evidence;
};
struct TurnResumed {
  int turn = 0;
  double at = 0;  // where speech came back
};
struct TurnEnded {
  int turn = 0;
  double at = 0;  // the end of its speech
  double confidence = 0;
  TurnEvidence evidence;
};

// A client changed the stream's stage settings mid-stream (Deepgram Flux's Configure):
// from here on the stages run with `params` (the stream's whole set, under
// stages::StreamRequest::params names). It comes in audio order: at the stream
// position the client had sent when it asked (StreamSession::change_settings).
struct SettingsChanged {
  double at = 0;
  std::map<std::string, std::string> params;
};

using Event =
    std::variant<WordsCommitted, ProvisionalChanged, SpeechStarted, SpeechEnded, Pause, LanguageDetected, StreamError,
                 Finalized, EndOfStream, TranslationCommitted, TranslationDraftChanged, SegmentTranslated,
                 SpeakersAssigned, AudioSkipped, TurnStarted, TurnEndLikely, TurnResumed, TurnEnded, SettingsChanged>;

}  // namespace earshot::events
