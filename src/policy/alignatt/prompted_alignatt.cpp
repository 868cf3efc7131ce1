#include "policy/alignatt/prompted_alignatt.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "policy/commit/text_units.h"
#include "policy/text_utils.h"

namespace earshot::policy {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorCode::kInvalidArgument, "AlignAtt (Qwen3-ASR) setting " + message);
}

// The vote of the alignment heads: the median (upper middle for an even count, as the seed) of their frames.
int median_frame(std::vector<int> frames) {
  std::sort(frames.begin(), frames.end());
  return frames[frames.size() / 2];
}

// A decode loop: one token 8 times in a row, or the last n tokens (2 <= n <= 8) three times in a row.
bool repeating(const std::vector<int32_t>& t) {
  const size_t n = t.size();
  if (n >= 8 && std::all_of(t.end() - 8, t.end(), [&](int32_t x) { return x == t.back(); })) return true;
  for (size_t len = 2; len <= 8 && 3 * len <= n; ++len) {
    bool same = true;
    for (size_t i = 0; i < 2 * len && same; ++i) same = t[n - 1 - i] == t[n - 1 - i - len];
    if (same) return true;
  }
  return false;
}

bool starts_unspaced(const std::string& text) {
  const auto units = commit::split_text_units(text);
  if (units.empty()) return false;
  const std::string& k = units.front().key;
  const auto c = static_cast<unsigned char>(k[0]);
  if (c < 0x80) return false;
  uint32_t code = 0;
  if ((c & 0xF0) == 0xE0 && k.size() >= 3) {
    code = ((c & 0x0Fu) << 12) | ((static_cast<unsigned char>(k[1]) & 0x3Fu) << 6) |
           (static_cast<unsigned char>(k[2]) & 0x3Fu);
  } else if ((c & 0xF8) == 0xF0 && k.size() >= 4) {
    code = ((c & 0x07u) << 18) | ((static_cast<unsigned char>(k[1]) & 0x3Fu) << 12) |
           ((static_cast<unsigned char>(k[2]) & 0x3Fu) << 6) | (static_cast<unsigned char>(k[3]) & 0x3Fu);
  }
  return commit::is_unspaced_script(code);
}

}  // namespace

void PromptedAlignAttConfig::validate() const {
  require(!language.empty(), "language must be a language code or \"auto\", got an empty string");
  require(border_fraction > 0 && border_fraction < 1, "border_fraction must be in (0, 1)");
  require(rewind_fraction > 0 && rewind_fraction < 1, "rewind_fraction must be in (0, 1)");
  require(min_border >= 0, "min_border must be >= 0");
  require(checks_after_steps >= 1, "checks_after_steps must be >= 1");
  require(audio_min_len >= 0, "audio_min_len must be >= 0 s");
  require(audio_max_len > audio_min_len, "audio_max_len must exceed audio_min_len");
  require(min_chunk >= 0, "min_chunk must be >= 0 s");
  require(min_chunk_slack >= 0, "min_chunk_slack must be >= 0 s");
  require(max_context_tokens >= 0, "max_context_tokens must be >= 0");
  require(tokens_per_second > 0 && max_tokens >= 1 && max_tokens_last >= 1, "token budgets must be positive");
  require(max_flush_passes >= 1, "max_flush_passes must be >= 1");
  require(long_silence > 0, "long_silence must be > 0 s");
}

int PromptedAlignAttProcessor::threshold(double fraction, int n_audio, int minimum) {
  return std::max(minimum, static_cast<int>(static_cast<double>(n_audio) * fraction));
}

PromptedAlignAttProcessor::PromptedAlignAttProcessor(std::unique_ptr<PromptedAsrDecoder> decoder,
                                                     PromptedAlignAttConfig config)
    : asr_(std::move(decoder)), config_(std::move(config)) {
  config_.validate();
  if (!asr_) throw Error(ErrorCode::kInternal, "PromptedAlignAttProcessor needs a decoder");
  if (config_.language != "auto") {
    if (!asr_->supports_language(config_.language)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "language '" + config_.language + "' is not one Qwen3-ASR knows (use e.g. en, zh, de, or auto)");
    }
    language_ = config_.language;
  }
}

void PromptedAlignAttProcessor::insert_audio(std::span<const float> samples, double stream_end_time) {
  audio_.insert(audio_.end(), samples.begin(), samples.end());
  stream_end_ = stream_end_time;
  const auto max_samples = static_cast<size_t>(config_.audio_max_len * kSampleRate);
  if (audio_.size() > max_samples) {
    size_t trim = audio_.size() - max_samples;
    const auto window = static_cast<size_t>(std::max(0, asr_->window_samples()));
    if (config_.trim == PromptedAlignAttConfig::Trim::kWindow && window > 0 && window <= max_samples) {
      trim = (trim + window - 1) / window * window;  // whole windows: audio_max_len - window to audio_max_len remain
    }
    audio_.erase(audio_.begin(), audio_.begin() + static_cast<std::ptrdiff_t>(trim));
    buffer_start_time_ += static_cast<double>(trim) / kSampleRate;
    last_infer_samples_ = last_infer_samples_ > trim ? last_infer_samples_ - trim : 0;
  }
}

ProcessResult PromptedAlignAttProcessor::process(bool is_last) {
  ProcessResult out;
  out.processed_until = stream_end_;
  last_stop_ = Stop::kNone;
  if (audio_.empty() || buffered_seconds() < config_.audio_min_len) return out;
  const size_t fresh = audio_.size() - std::min(last_infer_samples_, audio_.size());
  if (!is_last && static_cast<double>(fresh) < (config_.min_chunk - config_.min_chunk_slack) * kSampleRate) return out;
  last_infer_samples_ = audio_.size();
  out.committed = infer(is_last, static_cast<double>(fresh) / kSampleRate);
  committed_.insert(committed_.end(), out.committed.begin(), out.committed.end());
  return out;
}

std::vector<Word> PromptedAlignAttProcessor::infer(bool is_last, double fresh_seconds) {
  const PassScope scope(*asr_);  // the pass, from its encode to its last step
  const int n_audio = asr_->encode(audio_);
  if (n_audio <= 0) return {};
  const double duration = buffered_seconds();
  PromptedRequest request;
  request.context = config_.context;
  if (config_.language != "auto" || config_.keep_detected_language) request.language = language_;
  const size_t n_context = std::min(committed_tokens_.size(), static_cast<size_t>(config_.max_context_tokens));
  request.prefix_tokens.assign(committed_tokens_.end() - static_cast<std::ptrdiff_t>(n_context),
                               committed_tokens_.end());

  const int border = threshold(config_.border_fraction, n_audio, config_.min_border);
  const int rewind = threshold(config_.rewind_fraction, n_audio, config_.min_border);
  // A running pass's budget counts the audio new since the previous pass (the seed
  // measures it after moving the mark, which always gives its 1 s floor).
  const int budget =
      is_last ? std::min(static_cast<int>(duration * config_.tokens_per_second) + 10, config_.max_tokens_last)
              : std::min(static_cast<int>(std::max(fresh_seconds, 1.0) * config_.tokens_per_second) + 5,
                         config_.max_tokens);

  int32_t token = asr_->prefill(request);
  std::vector<int32_t> generated{token};
  std::vector<std::vector<int>> step_frames;
  int last_attend = last_attend_frame_;
  int stop_at = -1;  // tokens to emit when the policy stopped the pass
  last_stop_ = Stop::kBudget;
  for (int step = 1; step < budget; ++step) {
    if (asr_->is_end(token)) {
      last_stop_ = Stop::kEnd;
      break;
    }
    if (repeating(generated)) break;
    token = asr_->step(token);
    generated.push_back(token);
    std::vector<int> frames;
    for (int f : asr_->step_frames()) {
      if (f >= 0) frames.push_back(f);
    }
    if (!frames.empty()) step_frames.push_back(std::move(frames));
    if (is_last || static_cast<int>(step_frames.size()) < config_.checks_after_steps || step_frames.empty()) continue;
    const int attended = median_frame(step_frames.back());
    if (last_attend - attended > rewind) {
      stop_at = std::max(0, static_cast<int>(step_frames.size()) - 2);
      last_stop_ = Stop::kRewind;
      break;
    }
    last_attend = attended;
    if (n_audio - attended <= border) {
      stop_at = static_cast<int>(step_frames.size()) - 1;
      last_stop_ = Stop::kBorder;
      break;
    }
  }
  if (last_stop_ == Stop::kBudget && asr_->is_end(generated.back())) last_stop_ = Stop::kEnd;
  last_attend_frame_ = last_attend;
  while (!generated.empty() && asr_->is_end(generated.back())) generated.pop_back();

  // The header "language X<asr_text>" the model writes when the language is not forced.
  size_t header = 0;
  for (size_t i = 0; i < std::min<size_t>(generated.size(), 10); ++i) {
    if (generated[i] == asr_->text_marker()) {
      header = i + 1;
      if (language_.empty()) {
        language_ = asr_->language_of_header(asr_->detokenize(std::span(generated.data(), i)));
      }
      break;
    }
  }
  generated.erase(generated.begin(), generated.begin() + static_cast<std::ptrdiff_t>(header));
  step_frames.erase(step_frames.begin(),
                    step_frames.begin() + static_cast<std::ptrdiff_t>(std::min(header, step_frames.size())));
  // The stop index counts steps from the start of the pass; the header is not transcript.
  if (stop_at >= 0) stop_at = std::max(0, stop_at - static_cast<int>(header));
  size_t emit = stop_at >= 0 ? std::min(static_cast<size_t>(stop_at), generated.size()) : generated.size();
  // A token cut inside a UTF-8 character waits for the next pass (decoded again from the context).
  while (emit > 0 && !is_valid_utf8(asr_->detokenize(std::span(generated.data(), emit)))) --emit;
  if (emit == 0) return {};
  const std::vector<int32_t> emitted(generated.begin(), generated.begin() + static_cast<std::ptrdiff_t>(emit));
  std::vector<int> token_frames;
  for (size_t i = 0; i < emit && i < step_frames.size(); ++i) token_frames.push_back(median_frame(step_frames[i]));
  std::vector<Word> words = to_words(asr_->detokenize(emitted), token_frames, n_audio);
  committed_tokens_.insert(committed_tokens_.end(), emitted.begin(), emitted.end());
  return words;
}

std::vector<Word> PromptedAlignAttProcessor::to_words(const std::string& text, const std::vector<int>& token_frames,
                                                      int n_audio) {
  std::vector<commit::TextUnit> units = commit::split_text_units(text);
  std::vector<Word> words;
  const double duration = buffered_seconds();
  for (size_t i = 0; i < units.size(); ++i) {
    Word w;
    // Words map onto the emitted tokens' frames proportionally (the seed's mapping).
    if (!token_frames.empty()) {
      const size_t k = std::min(i * token_frames.size() / units.size(), token_frames.size() - 1);
      w.start = token_frames[k] / static_cast<double>(n_audio) * duration + buffer_start_time_;
    } else {
      w.start = static_cast<double>(i) / static_cast<double>(units.size()) * duration + buffer_start_time_;
    }
    if (!committed_.empty()) w.start = std::max(w.start, committed_.back().start);
    if (!words.empty()) w.start = std::max(w.start, words.back().start);
    w.end = w.start + 0.1;
    std::string t = std::move(units[i].text);
    if (committed_words_ == 0 && words.empty()) {
      t = units[i].key;  // the very first word of the session has no leading space
    } else if (words.empty() && t == units[i].key && !starts_unspaced(t)) {
      t = " " + t;  // a pass's first word after earlier words, in a spaced script
    }
    w.text = std::move(t);
    w.language = language_;
    words.push_back(std::move(w));
  }
  committed_words_ += words.size();
  return words;
}

ProcessResult PromptedAlignAttProcessor::flush() {
  ProcessResult out;
  out.processed_until = stream_end_;
  // More last passes only while each runs into its token budget: the rest of the buffer is still to come.
  for (int i = 0; i < config_.max_flush_passes; ++i) {
    ProcessResult r = process(/*is_last=*/true);
    out.committed.insert(out.committed.end(), r.committed.begin(), r.committed.end());
    if (r.committed.empty() || last_stop_ != Stop::kBudget) break;
  }
  return out;
}

void PromptedAlignAttProcessor::reset_state() {
  audio_.clear();
  last_infer_samples_ = 0;
  committed_tokens_.clear();
  committed_words_ = 0;
  last_attend_frame_ = 0;
  if (config_.language == "auto") language_.clear();
}

void PromptedAlignAttProcessor::end_silence(double duration, double offset) {
  if (duration < 0) throw Error(ErrorCode::kInvalidArgument, "silence duration must be >= 0 s");
  if (duration < config_.long_silence) {
    insert_audio(std::vector<float>(static_cast<size_t>(duration * kSampleRate), 0.0f), stream_end_);
  } else {
    reset_state();
    buffer_start_time_ = offset;
  }
  stream_end_ = std::max(stream_end_, offset);
}

void PromptedAlignAttProcessor::warmup() {
  const PassScope scope(*asr_);
  asr_->encode(std::vector<float>(kSampleRate, 0.0f));
  asr_->prefill({config_.context, language_, {}});
}

}  // namespace earshot::policy
