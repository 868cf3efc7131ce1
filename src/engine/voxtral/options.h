// The Voxtral family's own settings (ModelSpec::options<VoxtralOptions>()).
#pragma once

namespace earshot::engine {

struct VoxtralOptions {
  static constexpr const char* kFamily = "voxtral";
  // How far the text trails its audio (--delay-ms): a multiple of the 80 ms slot
  // the model was trained with (80 ... 1200 or 2400 ms); 0 = the file's default
  // (480 ms). Every other family refuses a value other than 0.
  int delay_ms = 0;
};

}  // namespace earshot::engine
