#include "policy/localagreement/local_agreement_processor.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "policy/alignatt/alignment.h"
#include "policy/decoding/token_decoder.h"
#include "policy/text_utils.h"

namespace earshot::policy {

namespace {
std::string trimmed(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}
bool ends_sentence(const std::string& word) {
  const std::string t = trimmed(word);
  return !t.empty() && (t.back() == '.' || t.back() == '?' || t.back() == '!');
}
}  // namespace

void LocalAgreementConfig::validate() const {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw Error(ErrorCode::kInvalidArgument, "LocalAgreement setting " + message);
  };
  require(!language.empty(), "language must be a language code or \"auto\"");
  require(buffer_trimming_sec > 0, "buffer_trimming_sec must be > 0 s");
  require(buffer_hard_limit_sec >= buffer_trimming_sec && buffer_hard_limit_sec <= 30.0,
          "buffer_hard_limit_sec must be in [buffer_trimming_sec, 30] s");
  require(min_token_budget >= 1, "min_token_budget must be >= 1");
  require(tokens_per_second_budget > 0, "tokens_per_second_budget must be > 0");
  require(long_silence > 0, "long_silence must be > 0 s");
}

LocalAgreementProcessor::LocalAgreementProcessor(std::unique_ptr<AsrDecoder> decoder, LocalAgreementConfig config)
    : asr_((config.validate(), std::move(decoder))),
      text_(asr_ ? asr_->text()
                 : throw Error(ErrorCode::kInvalidArgument, "LocalAgreementProcessor needs a decoder, got none")),
      config_(std::move(config)) {
  check_language(text_, config_.language, config_.task);
  static_tokens_ = text_.encode(config_.static_prompt);
  if (static_cast<int>(static_tokens_.size()) > asr_->n_text_ctx() / 2) {
    throw Error(ErrorCode::kInvalidArgument, "the static prompt is " + std::to_string(static_tokens_.size()) +
                                                 " tokens; at most half the text context (" +
                                                 std::to_string(asr_->n_text_ctx() / 2) + ") fits");
  }
  if (!text_.is_multilingual()) {
    language_ = "en";
  } else if (config_.language != "auto") {
    language_ = config_.language;
  }
}

void LocalAgreementProcessor::insert_audio(std::span<const float> samples, double stream_end_time) {
  audio_.insert(audio_.end(), samples.begin(), samples.end());
  stream_end_ = stream_end_time;
}

std::vector<int32_t> LocalAgreementProcessor::prompt_tokens() const {
  // Committed words that ended before the buffer, newest first, up to prompt_chars.
  size_t k = committed_.size();
  while (k > 0 && committed_[k - 1].end > buffer_start_time_) --k;
  std::vector<std::string> parts;
  size_t chars = 0;
  while (k > 0 && chars < config_.prompt_chars) {
    --k;
    chars += committed_[k].text.size() + 1;
    parts.push_back(committed_[k].text);
  }
  std::string text;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) text += *it;
  std::vector<int32_t> scrolled = text_.encode(text);
  if (static_tokens_.empty()) return scrolled;
  // The static part stays whole: the scrolled text gives way (transcribe keeps half the context).
  const size_t room = static_cast<size_t>(asr_->n_text_ctx() / 2) - static_tokens_.size();
  std::vector<int32_t> out = static_tokens_;
  const size_t skip = scrolled.size() > room ? scrolled.size() - room : 0;
  out.insert(out.end(), scrolled.begin() + static_cast<std::ptrdiff_t>(skip), scrolled.end());
  return out;
}

std::vector<Word> LocalAgreementProcessor::transcribe(const std::vector<int32_t>& prompt_tokens) {
  if (audio_.empty()) return {};
  std::vector<float> pcm(audio_.begin(), audio_.begin() + static_cast<std::ptrdiff_t>(
                                                              std::min<size_t>(audio_.size(), asr_->max_samples())));
  const int content_len = asr_->encode(pcm);
  std::string language = language_;
  if (config_.language == "auto" && text_.is_multilingual()) {
    language = most_likely_language(*asr_);
    language_ = language;
  }
  // Leave room for the answer: the prompt takes at most half the context.
  const size_t room = static_cast<size_t>(asr_->n_text_ctx() / 2);
  const size_t skip = prompt_tokens.size() > room ? prompt_tokens.size() - room : 0;
  std::vector<int32_t> prompt = text_.context_prompt(std::span<const int32_t>(prompt_tokens).subspan(skip));
  const auto start = text_.start_sequence(language, config_.task);
  prompt.insert(prompt.end(), start.begin(), start.end());

  const std::vector<int32_t> suppressed = text_.suppressed_tokens();
  const std::vector<int32_t> blank = text_.blank_tokens();

  GreedyDecoder greedy(text_.end_token());
  asr_->reset(1);
  const int budget =
      std::max(config_.min_token_budget, static_cast<int>(buffered_seconds() * config_.tokens_per_second_budget));
  // Rows of the query positions that chose each token: [head][row][frame].
  std::vector<std::vector<float>> rows;  // per step: heads*frames
  int n_heads = 0, n_frames = 0;
  bool first = true;
  for (int step = 0; step < budget; ++step) {
    const int appended = first ? static_cast<int>(prompt.size()) : 1;
    if (asr_->n_past() + appended > asr_->n_text_ctx()) break;
    DecodeRequest request;
    request.tokens = {first ? prompt : std::vector<int32_t>{greedy.sequences()[0].tokens.back()}};
    request.vocabulary_limit = text_.text_vocabulary_end();  // the suppressed tail (timestamps): skip its logits
    const DecodeResult r = asr_->decode(request);
    const int n_vocab = r.n_vocab;
    n_heads = r.n_heads;
    n_frames = r.n_frames;
    std::vector<float> row(static_cast<size_t>(n_heads) * n_frames);
    for (int h = 0; h < n_heads; ++h) {
      std::copy_n(r.attention_at(0, h, r.n_tokens - 1), n_frames, row.begin() + static_cast<size_t>(h) * n_frames);
    }
    rows.push_back(std::move(row));
    std::vector<float> logprobs(r.logits_at(0, r.n_positions - 1), r.logits_at(0, r.n_positions - 1) + n_vocab);
    if (first) suppress(logprobs, blank);
    suppress(logprobs, suppressed);
    log_softmax(logprobs);
    const int frame_placeholder = 0;
    if (greedy.update(logprobs, n_vocab, std::span<const int>(&frame_placeholder, 1)).completed) break;
    first = false;
  }
  asr_->reset(1);
  const Sequence result = greedy.best();
  const size_t n_tokens = result.tokens.size();
  if (n_tokens == 0) return {};

  std::vector<float> attention(static_cast<size_t>(n_heads) * n_tokens * n_frames);
  for (size_t t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      std::copy_n(rows[t].begin() + static_cast<size_t>(h) * n_frames, n_frames,
                  attention.begin() + (static_cast<size_t>(h) * n_tokens + t) * n_frames);
    }
  }
  const std::vector<int> frames =
      most_attended_frames(attention, n_heads, static_cast<int>(n_tokens), n_frames, content_len);
  const double fps = asr_->frames_per_second();
  const double buffer_end = buffer_start_time_ + buffered_seconds();
  std::vector<Word> words;
  double floor = buffer_start_time_;  // attention frames need not be monotonic; word times are
  size_t at = 0;
  for (const auto& w : text_.split_to_words(result.tokens, language)) {
    const size_t begin = at;
    at += w.tokens.size();
    if (!is_valid_utf8(w.text) || trimmed(w.text).empty()) continue;
    Word word;
    word.text = w.text;
    word.start = buffer_start_time_ + frames[begin] / fps;
    word.end = at < n_tokens ? buffer_start_time_ + frames[at] / fps : std::min(word.start + 0.1, buffer_end);
    word.start = std::clamp(word.start, floor, buffer_end);
    word.end = std::clamp(word.end, word.start, buffer_end);
    floor = word.start;
    double logprob = 0;
    for (size_t i = begin; i < at; ++i) logprob += result.logprobs[i];
    word.probability = static_cast<float>(std::exp(logprob / static_cast<double>(at - begin)));
    word.language = language;
    words.push_back(std::move(word));
  }
  // A decode stuck in a loop: keep the words before the second repetition.
  std::vector<std::string> normalized;
  for (const Word& w : words) normalized.push_back(normalize_word(w.text));
  if (const auto cut = find_repetition(normalized)) words.resize(*cut);
  return words;
}

void LocalAgreementProcessor::insert_hypothesis(std::vector<Word> words) {
  new_.clear();
  for (Word& w : words) {
    if (w.start > last_committed_time_ - 0.1) new_.push_back(std::move(w));
  }
  // Drop a repeat of the committed tail (up to 5 words) at the start of the new hypothesis.
  if (!new_.empty() && std::abs(new_.front().start - last_committed_time_) < 1 && !committed_in_buffer_.empty()) {
    const size_t limit = std::min({committed_in_buffer_.size(), new_.size(), size_t{5}});
    for (size_t i = 1; i <= limit; ++i) {
      bool same = true;
      for (size_t j = 0; j < i && same; ++j) {
        same = trimmed(committed_in_buffer_[committed_in_buffer_.size() - i + j].text) == trimmed(new_[j].text);
      }
      if (same) {
        new_.erase(new_.begin(), new_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
}

std::vector<Word> LocalAgreementProcessor::flush() {
  std::vector<Word> out;
  size_t i = 0;
  while (i < new_.size() && i < provisional_.size() && trimmed(new_[i].text) == trimmed(provisional_[i].text)) {
    out.push_back(new_[i]);
    last_committed_time_ = new_[i].end;
    ++i;
  }
  provisional_.assign(new_.begin() + static_cast<std::ptrdiff_t>(i), new_.end());
  new_.clear();
  committed_in_buffer_.insert(committed_in_buffer_.end(), out.begin(), out.end());
  return out;
}

void LocalAgreementProcessor::cut_buffer_at(double time) {
  const double cut = std::clamp(time - buffer_start_time_, 0.0, buffered_seconds());
  const auto samples = static_cast<size_t>(cut * kSampleRate);
  audio_.erase(audio_.begin(), audio_.begin() + static_cast<std::ptrdiff_t>(samples));
  buffer_start_time_ += static_cast<double>(samples) / kSampleRate;
  std::erase_if(committed_in_buffer_, [&](const Word& w) { return w.end <= buffer_start_time_; });
}

void LocalAgreementProcessor::trim_buffer() {
  if (buffered_seconds() <= config_.buffer_trimming_sec || committed_in_buffer_.empty()) return;
  for (auto it = committed_in_buffer_.rbegin(); it != committed_in_buffer_.rend(); ++it) {
    if (ends_sentence(it->text)) {
      cut_buffer_at(it->end);
      return;
    }
  }
  if (buffered_seconds() > config_.buffer_hard_limit_sec) cut_buffer_at(committed_in_buffer_.back().end);
}

std::vector<Word> LocalAgreementProcessor::commit_all() {
  std::vector<Word> out;
  for (Word& w : provisional_) out.push_back(std::move(w));
  provisional_.clear();
  if (!out.empty()) last_committed_time_ = out.back().end;
  return out;
}

void LocalAgreementProcessor::append_committed(std::vector<Word>& words) {
  // Committed times stay ordered: a word never starts before the previous one ended.
  for (Word& w : words) {
    if (!committed_.empty()) {
      w.start = std::max(w.start, committed_.back().end);
      w.end = std::max(w.end, w.start);
    }
    committed_.push_back(w);
  }
}

ProcessResult LocalAgreementProcessor::process(bool is_last) {
  ProcessResult result;
  result.processed_until = stream_end_;
  if (audio_.empty()) return result;
  insert_hypothesis(transcribe(prompt_tokens()));
  result.committed = flush();
  if (is_last) {
    // No more audio for this buffer: the whole latest hypothesis stands.
    std::vector<Word> rest = commit_all();
    result.committed.insert(result.committed.end(), rest.begin(), rest.end());
    append_committed(result.committed);
    // Everything in the buffer is committed: start the next buffer empty.
    cut_buffer_at(buffer_start_time_ + buffered_seconds());
    committed_in_buffer_.clear();
    return result;
  }
  append_committed(result.committed);
  trim_buffer();
  return result;
}

void LocalAgreementProcessor::end_silence(double duration, double offset) {
  if (duration < 0) throw Error(ErrorCode::kInvalidArgument, "silence duration must be >= 0 s");
  if (duration < config_.long_silence) {
    audio_.insert(audio_.end(), static_cast<size_t>(duration * kSampleRate), 0.0f);
  } else {
    audio_.clear();
    buffer_start_time_ = offset;
    committed_in_buffer_.clear();
    provisional_.clear();
  }
  stream_end_ = std::max(stream_end_, offset);
}

void LocalAgreementProcessor::warmup() {
  const std::vector<float> second(kSampleRate, 0.0f);
  audio_ = second;
  transcribe({});
  audio_.clear();
  if (config_.language == "auto" && text_.is_multilingual()) language_.clear();
}

}  // namespace earshot::policy
