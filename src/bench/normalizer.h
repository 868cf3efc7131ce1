// Text normalisation before scoring, so WER counts recognition errors rather
// than spelling conventions. Two flavours, after Whisper's normalisers:
//
// kEnglish (in the spirit of Whisper's EnglishTextNormalizer; a documented subset):
//   1. lower case (Latin, Latin-1/Extended-A, Greek, Cyrillic);
//   2. text in [brackets], <angle brackets> and (parentheses) is removed;
//   3. curly apostrophes become ', "don 't" becomes "don't";
//   4. punctuation and symbols become spaces, except ' inside words, '.' and
//      ',' between digits ("3.5", "1,000" -> "1000") and '%' after a digit;
//   5. fillers removed: hmm mm mhm mmm uh um;
//   6. whole-word replacements: won't -> will not, can't -> can not,
//      let's -> let us, ain't -> aint, y'all -> you all, wanna/gonna/gotta,
//      i'ma/imma, woulda/coulda/shoulda, ma'am -> madam, and titles
//      (mr -> mister, mrs -> missus, dr -> doctor, st -> saint, ...);
//   7. contraction suffixes: n't -> not, 're -> are, 's -> is, 'd -> would,
//      'll -> will, 've -> have, 'm -> am (like Whisper, possessive 's too);
//      any apostrophe left becomes a space ("o'clock" -> "o clock");
//   8. spelled-out numbers become digits: cardinals with hundred/thousand/
//      million/billion and an inner "and" ("one hundred and five" -> "105"),
//      ordinals ("twenty first" -> "21st"); a run of plain digits words that
//      cannot form one number stays split ("one two" -> "1 2");
//   9. British spellings become American (a list of ~90 common words:
//      colour, centre, realise, travelled, grey, programme, ...);
//  10. diacritics removed from Latin letters (cafe == café), whitespace collapsed.
// kBasic (Whisper's BasicTextNormalizer, for any language): steps 1, 2, and
//   every punctuation/symbol becomes a space; diacritics are kept.
// kNone: whitespace collapsed only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace earshot::bench {

enum class NormalizerKind { kEnglish, kBasic, kNone };

// Parses "english" / "basic" / "none"; throws earshot::Error(kInvalidArgument).
NormalizerKind parse_normalizer_kind(std::string_view name);
const char* to_string(NormalizerKind kind);

std::string normalize_text(std::string_view text, NormalizerKind kind);

// Whitespace-separated words of already normalised text.
std::vector<std::string> split_words(std::string_view text);
// Unicode code points (as UTF-8 strings) with whitespace removed: the CER units,
// matching sclite -c.
std::vector<std::string> split_characters(std::string_view text);

// UTF-8 helpers shared by the bench (invalid bytes decode to U+FFFD).
std::u32string utf8_decode(std::string_view text);
std::string utf8_encode(std::u32string_view text);

}  // namespace earshot::bench
