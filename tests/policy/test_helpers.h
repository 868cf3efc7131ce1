// Shared fixtures for the policy tests: real tokenizers, token lookup, audio.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "model/whisper/tokenizer.h"
#include "policy/online_processor.h"

namespace earshot::policy::testing {

inline std::shared_ptr<const whisper::Tokenizer> english_tokenizer() {
  static auto t = std::make_shared<const whisper::Tokenizer>(
      whisper::Tokenizer::from_tiktoken(std::string(EARSHOT_SHARED_DIR) + "/models/whisper-gpt2.tiktoken", 51864));
  return t;
}
inline std::shared_ptr<const whisper::Tokenizer> multilingual_tokenizer() {
  static auto t = std::make_shared<const whisper::Tokenizer>(whisper::Tokenizer::from_tiktoken(
      std::string(EARSHOT_SHARED_DIR) + "/models/whisper-multilingual.tiktoken", 51865));
  return t;
}

// The single token spelling `text` (the test fails if it takes more).
inline int32_t tok(const whisper::Tokenizer& t, const std::string& text) {
  const auto ids = t.encode(text);
  EXPECT_EQ(ids.size(), 1u) << "'" << text << "' is not one token";
  return ids.empty() ? 0 : ids[0];
}
// The token whose bytes are exactly `bytes`.
inline int32_t byte_token(const whisper::Tokenizer& t, const std::string& bytes) {
  for (int32_t id = 0; id < t.special().eot; ++id) {
    if (t.token_bytes(id) == bytes) return id;
  }
  ADD_FAILURE() << "no token for the bytes";
  return 0;
}

inline std::vector<float> seconds(double s) { return std::vector<float>(static_cast<size_t>(s * 16000), 0.01f); }

struct Expected {
  std::string text;
  double start, end;
};
inline void expect_words(const std::vector<Word>& got, const std::vector<Expected>& want) {
  ASSERT_EQ(got.size(), want.size()) << [&] {
    std::string s;
    for (const auto& w : got) s += "[" + w.text + " " + std::to_string(w.start) + "-" + std::to_string(w.end) + "]";
    return s;
  }();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].text, want[i].text) << "word " << i;
    EXPECT_NEAR(got[i].start, want[i].start, 1e-9) << "start of word " << i << " '" << want[i].text << "'";
    EXPECT_NEAR(got[i].end, want[i].end, 1e-9) << "end of word " << i << " '" << want[i].text << "'";
  }
}

}  // namespace earshot::policy::testing
