// What the streaming policies (AlignAtt, LocalAgreement-2) keep alike behind the
// OnlineProcessor contract: the committed words, the provisional tail, the
// language and speaker new words are tagged with, and last-pass flushes on a
// pause and at the end of the stream.
#pragma once

#include <string>
#include <vector>

#include "common/sample_rate.h"
#include "model/asr_decoder.h"
#include "model/asr_text.h"
#include "policy/online_processor.h"

namespace earshot::policy {

class ProcessorBase : public OnlineProcessor {
 public:
  std::vector<Word> provisional() const override { return provisional_; }
  std::vector<Word> hypothesis() const override;
  ProcessResult start_silence() override { return process(/*is_last=*/true); }
  ProcessResult finish() override { return process(/*is_last=*/true); }
  std::string language() const override { return language_; }

  double buffer_start_time() const { return buffer_start_time_; }  // stream time of the first buffered sample

 protected:
  // Throws earshot::Error(kInvalidArgument) unless the model behind `text` can run
  // `task` in `language` (a code or "auto").
  static void check_language(const AsrText& text, const std::string& language, Task task);
  // The code of the most probable language of the audio `asr` encoded last; throws
  // earshot::Error(kInternal) when detection returns no probabilities.
  static std::string most_likely_language(AsrDecoder& asr);

  double buffer_start_time_ = 0;
  double stream_end_ = 0;  // stream time at the end of the last inserted audio
  std::string language_;
  std::vector<Word> committed_;    // everything committed, in order
  std::vector<Word> provisional_;  // the uncommitted tail
};

}  // namespace earshot::policy
