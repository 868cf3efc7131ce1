// One renderer of finished transcripts for the CLI (`earshot transcribe
// --format`) and the OpenAI endpoint: segments from committed words, plain
// text, SRT, WebVTT and the JSON shapes.
#pragma once

#include <string>
#include <vector>

#include "events/event.h"
#include "common/word.h"

namespace earshot::protocol {

struct Segment {
  double start = 0, end = 0;
  std::string text;  // the words' text as committed (leading spaces kept)
  int speaker = -1;  // its words' speaker (1-based, Word::speaker), -1 = none known
};

// Where segments end. One rule for subtitles and the OpenAI endpoint's segments
// (the CLI used to cut cues at 42 characters or 7 s, the server at its lines):
// a segment ends at a sentence end (. ? !), a speaker change, a pause of at
// least `pause_seconds` between words (the session's silence lines have the same
// threshold, so a line never spans one), or before a word that would take it
// past `max_seconds`. No 42-character/7-second cap: OpenAI clients pair SRT/VTT
// cues one to one with verbose_json segments, which are sentence-like spans up
// to Whisper's 30 s window, and subtitle players wrap long cues themselves.
struct SegmentRule {
  double pause_seconds = 5.0;
  double max_seconds = 30.0;
};
std::vector<Segment> segments(const std::vector<Word>& words, const SegmentRule& rule = {});

// The stream's committed words from its events, in order, each with the speaker
// a later SpeakersAssigned gave it (the file routes and the CLI read whole logs).
std::vector<Word> committed_words(const std::vector<events::Event>& log);

// The words' text joined, without the outer whitespace.
std::string transcript_text(const std::vector<Word>& words);
// The CLI's txt: transcript_text, or with speakers (a diarized transcript: some
// word's speaker known) one line per speaker turn, "[S1] Hello.\n[S2] Hi.", a
// word without a speaker staying in the turn before it.
std::string transcript_turns(const std::vector<Word>& words);

// "1\n00:00:00,500 --> 00:00:01,250\nHello.\n\n" per segment (text trimmed);
// "[S1] Hello." for a segment with a speaker.
std::string format_srt(const std::vector<Segment>& segments);
// "WEBVTT\n\n" then "00:00:00.500 --> 00:00:01.250\nHello.\n\n" per segment;
// a segment with a speaker is a voice span, "<v Speaker 1>Hello.".
std::string format_vtt(const std::vector<Segment>& segments);
// NIST RTTM of the segments that have a speaker: one `SPEAKER <file_id> 1 <start>
// <duration> <NA> <NA> S<speaker> <NA> <NA>` line each (what md-eval.pl and
// earshot-der score), through the one RTTM writer (protocol/rttm.h) with times
// to the millisecond; segments without a speaker are left out. Throws
// Error(kInvalidArgument) for a file_id that is not one non-empty word.
std::string format_rttm(const std::vector<Segment>& segments, const std::string& file_id);

// [{"text":" Hello","start":0.500,"end":1.000},...] (times with 3 decimals), and
// "speaker":N on a word whose speaker is known.
std::string words_json(const std::vector<Word>& words);
// The CLI's --format json: {"file":...,"language":...,"text":...,"words":[...]}.
std::string transcript_json(const std::vector<Word>& words, const std::string& language, const std::string& file_name);

// OpenAI's response_format json ({"text","usage"}) or, verbose, verbose_json
// (task, language, duration, words without their leading space, segments). A
// segment whose speaker is known also has "speaker": N (an addition: OpenAI's
// verbose_json has no speaker field; segments already end at speaker changes).
std::string openai_json(const std::vector<Word>& words, const std::vector<Segment>& segments, double duration_seconds,
                        const std::string& language, bool verbose);
// OpenAI's diarized_json (its CreateTranscriptionResponseDiarizedJson): task,
// duration, text, usage and segments of type "transcript.text.segment" with
// ids "seg_N" and speakers labelled as OpenAI does, "A", "B"... in order of
// arrival; "" for a segment no speaker was found for (OpenAI's field is a string).
std::string openai_diarized_json(const std::vector<Word>& words, const std::vector<Segment>& segments,
                                 double duration_seconds);

}  // namespace earshot::protocol
