#include "bench/prompted_reference.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/sample_rate.h"

namespace earshot::bench {

PromptedReference::PromptedReference(std::unique_ptr<PromptedAsrDecoder> inner, std::vector<TimedWord> words,
                                     std::shared_ptr<FedAudio> fed)
    : inner_(std::move(inner)), fed_(std::move(fed)) {
  if (!inner_ || !fed_) throw Error(ErrorCode::kInternal, "PromptedReference needs a decoder and a fed-audio record");
  ReferenceTokens r = reference_tokens(
      words, [&](const std::string& s) { return inner_->tokenize(s); },
      [&](int32_t id) { return inner_->detokenize(std::span<const int32_t>(&id, 1)); }, [](int32_t) { return true; });
  tokens_ = std::move(r.tokens);
  token_time_ = std::move(r.time);
  word_end_ = std::move(r.word_end);
  header_ = inner_->tokenize("language English");
  header_.push_back(inner_->text_marker());
}

int PromptedReference::encode(std::span<const float> pcm) {
  n_audio_ = inner_->encode(pcm);
  buffer_end_ = fed_->seconds;
  buffer_start_ = buffer_end_ - static_cast<double>(pcm.size()) / kSampleRate;
  return n_audio_;
}

int PromptedReference::frame_at(double time) const {
  const double span = buffer_end_ - buffer_start_;
  if (n_audio_ <= 0 || span <= 0) return 0;
  const auto f = static_cast<int>(std::floor((time - buffer_start_) / span * n_audio_));
  return std::clamp(f, 0, n_audio_ - 1);
}

int32_t PromptedReference::choose() {
  chosen_is_reference_ = false;
  if (header_at_ < header_.size()) {  // a header token attends where the transcript goes on
    chosen_ = header_[header_at_++];
    chosen_time_ = cursor_ < tokens_.size() ? std::min(token_time_[cursor_], buffer_end_) : buffer_end_;
    return chosen_;
  }
  if (!derailed_ && cursor_ < tokens_.size() && word_end_[cursor_] <= buffer_end_ + 1e-9) {
    chosen_ = tokens_[cursor_];
    chosen_time_ = token_time_[cursor_];
    chosen_is_reference_ = true;
    return chosen_;
  }
  chosen_ = inner_->end_token();  // nothing whole left to say
  chosen_time_ = buffer_end_;
  return chosen_;
}

int32_t PromptedReference::prefill(const PromptedRequest& request) {
  inner_->prefill(request);
  derailed_ = false;
  cursor_ = place_.locate(tokens_, request.prefix_tokens);
  header_at_ = request.language.empty() ? 0 : header_.size();
  return choose();
}

int32_t PromptedReference::step(int32_t token) {
  inner_->step(token);
  double time = buffer_end_;
  if (!derailed_ && token == chosen_) {
    time = chosen_time_;
    if (chosen_is_reference_) ++cursor_;
  } else {
    derailed_ = true;  // the policy fed a token of its own: end the pass
  }
  frames_.assign(inner_->step_frames().size(), frame_at(time));
  return choose();
}

}  // namespace earshot::bench
