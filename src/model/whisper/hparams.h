// Whisper hyper-parameters as stored in the legacy ggml file header, and the
// model family facts derived from them (vocabulary layout, size name).
#pragma once

#include <cstdint>
#include <string>

namespace earshot::whisper {

struct Hparams {
  int32_t n_vocab = 51864;
  int32_t n_audio_ctx = 1500;
  int32_t n_audio_state = 384;
  int32_t n_audio_head = 6;
  int32_t n_audio_layer = 4;
  int32_t n_text_ctx = 448;
  int32_t n_text_state = 384;
  int32_t n_text_head = 6;
  int32_t n_text_layer = 4;
  int32_t n_mels = 80;
  int32_t ftype = 1;               // weight type, without the quantisation version
  int32_t quantization_version = 0;  // ftype / 1000 in the file (GGML_QNT_VERSION_FACTOR)

  bool is_multilingual() const { return n_vocab >= 51865; }
  int n_languages() const { return n_vocab == 51866 ? 100 : 99; }  // large-v3 added Cantonese
};

}  // namespace earshot::whisper
