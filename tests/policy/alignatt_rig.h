// An AlignAttProcessor over a FakeDecoder, with warnings captured.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fake_decoder.h"
#include "policy/alignatt/alignatt_processor.h"
#include "test_helpers.h"

namespace earshot::policy::testing {

struct Rig {
  FakeDecoder* fake = nullptr;
  std::unique_ptr<AlignAttProcessor> processor;
  std::shared_ptr<std::vector<std::string>> warnings = std::make_shared<std::vector<std::string>>();
  std::vector<Word> all_committed;
  double fed = 0;

  Rig(std::shared_ptr<const whisper::Tokenizer> tokenizer, FakeDecoder::Script script, AlignAttConfig config = {},
      int n_text_ctx = 448) {
    auto decoder = std::make_unique<FakeDecoder>(std::move(tokenizer), std::move(script), n_text_ctx);
    fake = decoder.get();
    config.on_warning = [w = warnings](const std::string& m) { w->push_back(m); };
    processor = std::make_unique<AlignAttProcessor>(std::move(decoder), std::move(config));
  }
  void feed(double s) {
    fed += s;
    const auto pcm = seconds(s);
    processor->insert_audio(pcm, fed);
  }
  std::vector<Word> run(bool is_last = false) { return keep(processor->process(is_last).committed); }
  std::vector<Word> keep(std::vector<Word> w) {
    all_committed.insert(all_committed.end(), w.begin(), w.end());
    return w;
  }
  bool warned(const std::string& part) const {
    for (const auto& w : *warnings)
      if (w.find(part) != std::string::npos) return true;
    return false;
  }
};

}  // namespace earshot::policy::testing
