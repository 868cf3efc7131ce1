// The Whisper tokenizer (GPT-2's byte-level BPE from whisper-gpt2.tiktoken, and
// the multilingual vocabulary): the first input byte chooses the vocabulary and
// the mode. Encode: arbitrary bytes as a prompt (--init-prompt and friends);
// valid UTF-8 must decode back to itself. Decode: the rest as int32 token ids
// (any value, as a model or a trace could produce), through decode,
// token_to_string and split_to_words. Any exception other than earshot::Error,
// any sanitizer report or a broken round trip is a finding.
#include "model/whisper/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"
#include "fuzz_input.h"

namespace {

using earshot::whisper::Tokenizer;

const Tokenizer& tokenizer(bool multilingual) {
  static const Tokenizer english = Tokenizer::from_tiktoken(EARSHOT_SHARED_DIR "/models/whisper-gpt2.tiktoken", 51864);
  static const Tokenizer multi =
      Tokenizer::from_tiktoken(EARSHOT_SHARED_DIR "/models/whisper-multilingual.tiktoken", 51866);
  return multilingual ? multi : english;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Tokenizer& tok = tokenizer(data[0] & 1);
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] & 2) {
      const std::vector<int32_t> ids = tok.encode(rest);
      for (int32_t id : ids) earshot::fuzz::check(id >= 0 && id < tok.special().eot, "encode yields text tokens");
      if (earshot::is_valid_utf8(rest)) earshot::fuzz::check(tok.decode(ids) == rest, "decode(encode(text)) == text");
    } else {
      std::vector<int32_t> ids(rest.size() / 4);
      if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
      for (int32_t id : ids) {
        try {
          tok.token_to_string(id);
        } catch (const earshot::Error&) {
        }
      }
      tok.split_to_words(ids, data[0] & 4 ? "ja" : "en");
      tok.decode(ids);
    }
  } catch (const earshot::Error&) {
  }
  return 0;
}
