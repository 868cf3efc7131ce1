#include "policy/commit/rolling_decoder.h"

#include <algorithm>

#include "common/error.h"
#include "common/sample_rate.h"

namespace earshot::policy::commit {

void RollingConfig::validate() const {
  if (unfixed_passes < 0) throw Error(ErrorCode::kInvalidArgument, "the unfixed passes must be >= 0");
  if (unfixed_tokens < 0) throw Error(ErrorCode::kInvalidArgument, "the unfixed tokens must be >= 0");
}

RollingDecoder::RollingDecoder(std::unique_ptr<PromptedAsrDecoder> decoder, RollingConfig config)
    : decoder_(std::move(decoder)), config_(config) {
  config_.validate();
  if (!decoder_) throw Error(ErrorCode::kInternal, "RollingDecoder needs a decoder");
}

WindowPass RollingDecoder::decode(const WindowRequest& r) {
  WindowPass pass;
  if (r.pass == 0) previous_.clear();  // a new segment
  prefix_.clear();
  if (r.audio.empty()) return pass;
  const PassScope scope(*decoder_);  // the pass, from its encode to its last step
  decoder_->encode(r.audio);
  const std::string code = r.language != "auto" ? r.language : language_;
  // A forced language puts the "language X<asr_text>" header in the prompt: a
  // header the model wrote on an earlier pass must not follow it a second time.
  auto from = previous_.begin();
  if (!code.empty()) {
    const auto end = previous_.begin() + std::min<std::ptrdiff_t>(10, std::ssize(previous_));
    if (const auto marker = std::find(previous_.begin(), end, decoder_->text_marker()); marker != end) {
      from = marker + 1;
    }
  }
  // As the reference counts: pass (chunk) k of a segment, 1-based, uses a prefix once k > unfixed_passes.
  if (r.pass + 1 > static_cast<size_t>(config_.unfixed_passes) && previous_.end() - from > config_.unfixed_tokens) {
    prefix_.assign(from, previous_.end() - config_.unfixed_tokens);
  }
  PromptedRequest p;
  p.context =
      config_.context.empty() || r.context.empty() ? config_.context + r.context : config_.context + "\n" + r.context;
  p.language = code;
  p.prefix_tokens = prefix_;
  const double seconds = static_cast<double>(r.audio.size()) / kSampleRate;
  const int budget = std::min(static_cast<int>(seconds * 6) + 10, 120);  // new tokens, as the AlignAtt pass
  std::vector<int32_t> out = prefix_;
  int32_t token = decoder_->prefill(p);
  for (int n = 0; n < budget && !decoder_->is_end(token); ++n) {
    out.push_back(token);
    if (n + 1 < budget) token = decoder_->step(token);
  }
  previous_ = out;
  // Without a forced language the output starts with "language X<asr_text>".
  const auto head_end = out.begin() + std::min<std::ptrdiff_t>(10, std::ssize(out));
  const auto marker = std::find(out.begin(), head_end, decoder_->text_marker());
  const std::span<const int32_t> all(out);
  size_t text = 0;
  if (marker != head_end) {
    const size_t at = static_cast<size_t>(marker - out.begin());
    const std::string found = decoder_->language_of_header(decoder_->detokenize(all.first(at)));
    if (language_.empty() && !found.empty()) language_ = found;
    text = at + 1;
  }
  pass.hypothesis.text = decoder_->detokenize(all.subspan(text));
  for (size_t i = text; i < all.size(); ++i) pass.hypothesis.tokens.push_back(decoder_->detokenize(all.subspan(i, 1)));
  pass.language = code.empty() ? language_ : code;
  return pass;
}

}  // namespace earshot::policy::commit
