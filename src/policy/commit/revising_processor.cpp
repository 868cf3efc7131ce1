#include "policy/commit/revising_processor.h"

#include <algorithm>

#include "common/error.h"

namespace earshot::policy::commit {

void RevisingConfig::validate() const {
  commit.validate();
  if (pass_interval_sec < 0) throw Error(ErrorCode::kInvalidArgument, "the pass interval must be >= 0 s");
  if (min_audio_sec < 0) throw Error(ErrorCode::kInvalidArgument, "the minimum audio length must be >= 0 s");
  if (max_segment_sec <= min_audio_sec) {
    throw Error(ErrorCode::kInvalidArgument, "the longest segment must be longer than the minimum audio length");
  }
}

RevisingProcessor::RevisingProcessor(std::unique_ptr<WindowDecoder> decoder, RevisingConfig config)
    : decoder_(std::move(decoder)), config_(std::move(config)), committer_(config_.commit) {
  config_.validate();
  if (!decoder_) throw Error(ErrorCode::kInternal, "RevisingProcessor needs a decoder");
  if (config_.language != "auto") language_ = config_.language;
}

void RevisingProcessor::insert_audio(std::span<const float> samples, double stream_end_time) {
  audio_.insert(audio_.end(), samples.begin(), samples.end());
  stream_end_ = stream_end_time;
}

WindowRequest RevisingProcessor::request(bool is_last) const {
  WindowRequest r;
  r.audio = audio_;
  r.committed = committer_.committed_text();
  r.language = config_.language;
  r.is_last = is_last;
  r.pass = passes_;
  // Committed words of earlier segments, up to context_chars, whole words only.
  size_t k = committed_.size(), chars = 0;
  while (k > 0 && committed_[k - 1].end > buffer_start_time_) --k;
  size_t begin = k;
  while (begin > 0 && chars + committed_[begin - 1].text.size() <= config_.context_chars) {
    chars += committed_[--begin].text.size();
  }
  for (size_t i = begin; i < k; ++i) r.context += committed_[i].text;
  return r;
}

void WindowDecoder::warmup(const std::string& language) {
  const std::vector<float> second(kSampleRate, 0.0f);
  WindowRequest r;
  r.audio = second;
  r.language = language;
  r.is_last = true;
  decode(r);
}

std::vector<Word> RevisingProcessor::words_of(const std::string& text, size_t offset, size_t total) const {
  std::vector<Word> words;
  const double duration = buffered_seconds();
  const double floor = committed_.empty() ? buffer_start_time_ : std::max(buffer_start_time_, committed_.back().end);
  const auto time_at = [&](size_t byte) {
    return buffer_start_time_ + duration * static_cast<double>(std::min(byte, total)) / std::max<size_t>(total, 1);
  };
  // The timed word holding hypothesis byte `byte`, if the pass has one there.
  const auto timed_word_at = [&](size_t byte) -> const Word* {
    size_t begin = 0;
    for (const Word& w : pass_words_) {
      if (byte < begin + w.text.size()) return &w;
      begin += w.text.size();
    }
    return nullptr;
  };
  size_t at = offset;
  for (TextUnit& u : split_text_units(text)) {
    Word w;
    const size_t first = at + (u.text.size() - u.key.size()), last = at + u.text.size() - 1;  // its non-space bytes
    const Word* starts_in = timed_word_at(first);
    const Word* ends_in = timed_word_at(last);
    const double start = starts_in ? buffer_start_time_ + starts_in->start : time_at(at);
    const double end = ends_in ? buffer_start_time_ + ends_in->end : time_at(at + u.text.size());
    w.start = std::max(start, words.empty() ? floor : words.back().end);
    at += u.text.size();
    w.end = std::max(end, w.start);
    w.text = std::move(u.text);
    w.language = language_;
    words.push_back(std::move(w));
  }
  return words;
}

void RevisingProcessor::end_segment() {
  buffer_start_time_ += buffered_seconds();
  audio_.clear();
  samples_at_last_pass_ = 0;
  passes_ = 0;
  provisional_.clear();
}

ProcessResult RevisingProcessor::process(bool is_last) {
  ProcessResult result;
  result.processed_until = stream_end_;
  if (audio_.empty()) return result;
  const double buffered = buffered_seconds();
  const bool too_long = buffered >= config_.max_segment_sec;
  const double fresh = static_cast<double>(audio_.size() - samples_at_last_pass_) / kSampleRate;
  if (!is_last && !too_long && (buffered < config_.min_audio_sec || fresh < config_.pass_interval_sec)) {
    return result;
  }
  const bool final_pass = is_last || too_long;
  WindowPass pass = decoder_->decode(request(final_pass));
  samples_at_last_pass_ = audio_.size();
  ++passes_;
  if (!pass.language.empty()) language_ = pass.language;
  pass_words_ = std::move(pass.words);

  const size_t before = committer_.committed_text().size();
  const size_t total = pass.hypothesis.text.size();
  if (final_pass) {
    const FinalUpdate final = committer_.finalize(pass.hypothesis);
    if (final.corrected) ++corrections_;
    // The appended text ends the final text, whether or not it was corrected.
    const size_t final_size = final.text.size();
    result.committed = words_of(final.append, final_size - std::min(final.append.size(), final_size), total);
    committed_.insert(committed_.end(), result.committed.begin(), result.committed.end());
    end_segment();
  } else {
    const CommitUpdate update = committer_.update(pass.hypothesis);
    result.committed = words_of(update.committed, before, total);
    committed_.insert(committed_.end(), result.committed.begin(), result.committed.end());
    provisional_ = words_of(update.provisional, committer_.committed_text().size(), total);
  }
  return result;
}

void RevisingProcessor::end_silence(double duration, double offset) {
  if (duration < 0) throw Error(ErrorCode::kInvalidArgument, "silence duration must be >= 0 s");
  if (duration < config_.long_silence) {
    audio_.insert(audio_.end(), static_cast<size_t>(duration * kSampleRate), 0.0f);
  } else {
    audio_.clear();
    samples_at_last_pass_ = 0;
    passes_ = 0;
    committer_.reset();
    provisional_.clear();
    pass_words_.clear();
    buffer_start_time_ = offset;
    decoder_->reset();
  }
  stream_end_ = std::max(stream_end_, offset);
}

void RevisingProcessor::warmup() { decoder_->warmup(config_.language); }

}  // namespace earshot::policy::commit
