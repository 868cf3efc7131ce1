// The vocabulary side of a scripted PromptedAsrDecoder, shared by the policy tests
// of audio-LLM ASR (Qwen3-ASR's AlignAtt and rolling modes): tokens 1..40 are
// " w1".." w40", 0 ends, and the language header "language English" is en. Each
// test's subclass scripts what encode, prefill and step return.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "model/prompted_asr.h"

namespace earshot::policy::scripted {

inline constexpr int32_t kEnd = 0, kMarker = 99, kLanguage = 50, kEnglish = 51;

struct ScriptedPromptedDecoder : PromptedAsrDecoder {
  std::vector<PromptedRequest> requests;  // every prefill's request, in order
  std::vector<int> frames;                // the last step's attended frame per head
  std::map<int32_t, std::string> pieces;
  std::set<std::string> languages = {"en"};

  ScriptedPromptedDecoder() {
    for (int i = 1; i <= 40; ++i) pieces[i] = " w" + std::to_string(i);
    pieces[kLanguage] = "language";
    pieces[kEnglish] = " English";
    pieces[kMarker] = "<asr_text>";
  }
  const std::vector<int>& step_frames() const override { return frames; }
  bool is_end(int32_t t) const override { return t == kEnd; }
  int32_t text_marker() const override { return kMarker; }
  std::string detokenize(std::span<const int32_t> tokens) const override {
    std::string s;
    for (int32_t t : tokens) s += pieces.at(t);
    return s;
  }
  bool supports_language(const std::string& code) const override { return languages.count(code) != 0; }
  std::string language_of_header(const std::string& header) const override {
    return header == "language English" ? "en" : "";
  }
};

}  // namespace earshot::policy::scripted
