#include "policy/alignatt/alignatt_processor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "common/error.h"
#include "common/pass_stop.h"
#include "policy/text_utils.h"

namespace earshot::policy {

namespace {
// AsrText::split_to_words, made to cover every token: a trailing incomplete
// character the splitter leaves out becomes a last word of its own.
std::vector<AsrText::Unit> split_all(const AsrText& text, std::span<const int32_t> ids, std::string_view language) {
  auto words = text.split_to_words(ids, language);
  size_t covered = 0;
  for (const auto& w : words) covered += w.tokens.size();
  if (covered < ids.size()) {
    AsrText::Unit tail;
    tail.tokens.assign(ids.begin() + static_cast<std::ptrdiff_t>(covered), ids.end());
    tail.text = text.decode(tail.tokens);
    words.push_back(std::move(tail));
  }
  return words;
}
}  // namespace

AlignAttProcessor::AlignAttProcessor(std::unique_ptr<AsrDecoder> decoder, AlignAttConfig config)
    : asr_((config.validate(), std::move(decoder))),
      text_(asr_ ? asr_->text()
                 : throw Error(ErrorCode::kInvalidArgument, "AlignAttProcessor needs a decoder, got none")),
      config_(std::move(config)),
      alignment_(config_.attention_window == 0 ? AlignmentAccumulator::kAllCalls : config_.attention_window) {
  check_language(text_, config_.language, config_.task);
  max_context_tokens_ = config_.max_context_tokens < 0 ? asr_->n_text_ctx() : config_.max_context_tokens;
  static_tokens_ = text_.encode(config_.static_init_prompt);
  init_tokens_ = text_.encode(config_.init_prompt);
  if (static_cast<int>(static_tokens_.size()) > asr_->n_text_ctx() / 2) {
    throw Error(ErrorCode::kInvalidArgument, "static_init_prompt is " + std::to_string(static_tokens_.size()) +
                                                 " tokens; at most half the text context (" +
                                                 std::to_string(asr_->n_text_ctx() / 2) + ") fits");
  }
  // SimulStreaming leaves timestamps choosable; suppress_timestamps opts in.
  for (int32_t id : text_.suppressed_tokens()) {
    if (config_.suppress_timestamps || id < text_.text_vocabulary_end()) suppress_tokens_.push_back(id);
  }
  suppress_tokens_.insert(suppress_tokens_.end(), config_.suppress_tokens.begin(), config_.suppress_tokens.end());
  blank_tokens_ = text_.blank_tokens();
  if (config_.beams == 1) {
    token_decoder_ = std::make_unique<GreedyDecoder>(text_.end_token());
  } else {
    token_decoder_ = std::make_unique<BeamSearchDecoder>(text_.end_token(), config_.beams);
  }
  reset_all();
}

void AlignAttProcessor::warn(const std::string& message) const {
  if (config_.on_warning) {
    config_.on_warning(message);
  } else {
    std::fprintf(stderr, "earshot alignatt: %s\n", message.c_str());
  }
}

void AlignAttProcessor::reset_all() {
  prepared_content_.reset();
  chunks_.clear();
  buffered_samples_ = 0;
  buffer_start_time_ = 0;
  stream_end_ = 0;
  language_ = !text_.is_multilingual() ? "en" : (config_.language == "auto" ? "" : config_.language);
  first_timestamp_.reset();
  committed_.clear();
  last_committed_end_ = -1e300;
  stale_until_.reset();
  passes_ = 0;
  reset_segment();
}

void AlignAttProcessor::reset_segment() {
  context_ = init_tokens_;
  committed_blocks_.clear();
  pending_.clear();
  provisional_.clear();
  last_attend_frame_ = -config_.rewind_threshold;
}

double AlignAttProcessor::frame_time(int frame) const {
  return buffer_start_time_ + static_cast<double>(frame) / asr_->frames_per_second();
}

std::vector<int32_t> AlignAttProcessor::context_tokens() const {
  std::vector<int32_t> all = static_tokens_;
  all.insert(all.end(), context_.begin(), context_.end());
  return all;
}

void AlignAttProcessor::insert_audio(std::span<const float> samples, double stream_end_time) {
  stream_end_ = stream_end_time;
  // A chunk longer than the buffer cap could never be trimmed whole; split it.
  const auto piece = static_cast<size_t>(config_.audio_max_len * kSampleRate);
  for (size_t at = 0; at < samples.size(); at += piece) {
    const size_t n = std::min(piece, samples.size() - at);
    add_chunk(std::vector<float>(samples.begin() + at, samples.begin() + at + n));
  }
}

void AlignAttProcessor::add_chunk(std::vector<float> chunk) {
  if (chunk.empty()) return;
  prepared_content_.reset();
  buffered_samples_ += chunk.size();
  chunks_.push_back(std::move(chunk));
  while (chunks_.size() > 1 && buffered_seconds() > config_.audio_max_len) {
    const double removed = static_cast<double>(chunks_.front().size()) / kSampleRate;
    buffered_samples_ -= chunks_.front().size();
    chunks_.pop_front();
    last_attend_frame_ -= static_cast<int>(asr_->frames_per_second() * removed);
    buffer_start_time_ += removed;
    // The oldest committed block's audio is gone: it becomes text context.
    if (!committed_blocks_.empty()) {
      context_.insert(context_.end(), committed_blocks_.front().begin(), committed_blocks_.front().end());
      committed_blocks_.erase(committed_blocks_.begin());
    }
  }
}

void AlignAttProcessor::trim_front(double seconds) {
  auto samples = static_cast<size_t>(std::max(0.0, seconds) * kSampleRate);
  samples = std::min(samples, buffered_samples_);
  if (samples > 0) prepared_content_.reset();
  size_t left = samples;
  while (left > 0 && !chunks_.empty()) {
    std::vector<float>& first = chunks_.front();
    if (first.size() <= left) {
      left -= first.size();
      chunks_.pop_front();
    } else {
      first.erase(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(left));
      left = 0;
    }
  }
  buffered_samples_ -= samples;
  buffer_start_time_ += static_cast<double>(samples) / kSampleRate;
}

void AlignAttProcessor::trim_context() {
  size_t forced = 0;
  for (const auto& b : committed_blocks_) forced += b.size();
  const size_t sot_len = text_.start_sequence(language_, config_.task).size();
  auto context_len = static_cast<long>(static_tokens_.size() + context_.size());
  auto total = static_cast<long>(sot_len + forced) + context_len;
  const long limit = asr_->n_text_ctx() - 20;
  while (context_len > max_context_tokens_ || total > limit) {
    const auto words = text_.split_to_words(context_, language_);
    if (words.empty()) break;
    const size_t n = words.front().tokens.size();
    if (n == 0) break;
    context_.erase(context_.begin(), context_.begin() + static_cast<std::ptrdiff_t>(n));
    context_len -= static_cast<long>(n);
    total -= static_cast<long>(n);
  }
}

std::vector<int32_t> AlignAttProcessor::build_prompt(bool with_language, int& sot_index) const {
  std::vector<int32_t> prompt = text_.context_prompt(context_tokens());
  sot_index = static_cast<int>(prompt.size());
  const auto start = text_.start_sequence(with_language ? language_ : "", config_.task);
  prompt.insert(prompt.end(), start.begin(), start.end());
  for (const auto& block : committed_blocks_) prompt.insert(prompt.end(), block.begin(), block.end());
  return prompt;
}

AlignAttProcessor::Pass AlignAttProcessor::decode_pass(const std::vector<int32_t>& prompt, int sot_index,
                                                       int content_len, bool is_last) {
  Pass pass;
  const int n = token_decoder_->n_sequences();
  asr_->reset(n);
  alignment_.reset();
  token_decoder_->reset();
  const int budget =
      std::max(config_.min_token_budget, static_cast<int>(buffered_seconds() * config_.tokens_per_second_budget));
  const int threshold = is_last ? config_.last_frame_threshold : config_.frame_threshold;
  const bool tracing = static_cast<bool>(config_.on_trace);
  int steps = 0;  // tokens chosen so far, per sequence
  bool first = true;
  auto keep = [&](const Sequence& s, size_t count) {
    for (size_t i = 0; i < count && i < s.tokens.size(); ++i) {
      pass.tokens.push_back({s.tokens[i], frame_time(s.frames[i]), s.logprobs[i]});
    }
  };
  auto keep_all = [&](StopReason reason) {
    keep(token_decoder_->sequences()[0], token_decoder_->sequences()[0].tokens.size());
    pass.stop = reason;
  };
  while (true) {
    // As the reference: decode while prompt + chosen tokens are fewer than the text context.
    if (static_cast<int>(prompt.size()) + steps >= asr_->n_text_ctx()) {
      keep_all(StopReason::kContextLimit);
      break;
    }
    if (config_.token_budget_guard && steps >= budget) {
      warn("pass stopped at the token budget of " + std::to_string(budget) + " tokens for " +
           std::to_string(buffered_seconds()) + " s of audio (repetition loop?); its tokens are kept");
      keep_all(StopReason::kTokenBudget);
      break;
    }
    DecodeRequest request;
    request.want_attention = true;
    if (first) {
      request.tokens.assign(n, prompt);
      request.logits_positions = {sot_index, static_cast<int>(prompt.size()) - 1};
    } else {
      for (const Sequence& s : token_decoder_->sequences()) request.tokens.push_back({s.tokens.back()});
      // Suppressed timestamps: skip their logits. The first step needs the whole
      // vocabulary, for the no-speech probability at SOT.
      if (config_.suppress_timestamps) request.vocabulary_limit = text_.text_vocabulary_end();
    }
    const DecodeResult result = asr_->decode(request);
    const int n_vocab = result.n_vocab;
    alignment_.add(result);
    const int position = result.n_positions - 1;
    if (first && config_.nonspeech_prob < 1.0 && text_.no_speech_token() >= 0) {
      std::vector<float> at_sot(result.logits_at(0, 0), result.logits_at(0, 0) + n_vocab);
      log_softmax(at_sot);
      if (std::exp(at_sot[text_.no_speech_token()]) > config_.nonspeech_prob) {
        pass.stop = StopReason::kNoSpeech;
        break;
      }
    }
    std::vector<float> logprobs(static_cast<size_t>(n) * n_vocab);
    std::vector<int> frames(n);
    std::vector<FrameChoice> choices(n);
    for (int s = 0; s < n; ++s) {
      std::span<float> row(logprobs.data() + static_cast<size_t>(s) * n_vocab, n_vocab);
      std::copy_n(result.logits_at(s, position), n_vocab, row.begin());
      if (first) suppress(row, blank_tokens_);
      suppress(row, suppress_tokens_);
      log_softmax(row);
      choices[s] = alignment_.most_attended(s, content_len);
      frames[s] = choices[s].frame;
    }
    const DecoderStep step = token_decoder_->update(logprobs, n_vocab, frames);
    if (n > 1) {
      asr_->reorder(step.source);
      alignment_.reorder(step.source);
    }
    first = false;
    ++steps;
    if (tracing) {
      const int source = step.source.empty() ? 0 : step.source[0];
      PassTrace::Token t;
      const Sequence& top = token_decoder_->sequences()[0];
      t.id = step.completed && n == 1 ? text_.end_token() : top.tokens.back();
      t.text = text_.decode(std::span<const int32_t>(&t.id, 1));
      t.frame = choices[source].frame;
      t.frame_margin = choices[source].margin;
      if (n == 1) {  // greedy: how far the chosen token is above the runner-up
        std::span<const float> row(logprobs.data(), n_vocab);
        float best = -INFINITY, second = -INFINITY;
        for (float v : row) {
          if (v > best) {
            second = best;
            best = v;
          } else if (v > second) {
            second = v;
          }
        }
        t.logprob = best;
        t.logit_margin = std::isfinite(second) ? best - second : 0.0;
      } else {
        t.logprob = top.logprobs.empty() ? 0.0f : top.logprobs.back();
      }
      pass.decoded.push_back(std::move(t));
    }
    if (step.completed) {
      const Sequence best = token_decoder_->best();
      pass.step_times.push_back(frame_time(best.frames.empty() ? 0 : best.frames.back()));
      keep(best, best.tokens.size());
      pass.stop = StopReason::kEndOfText;
      break;
    }
    const Sequence& top = token_decoder_->sequences()[0];
    const int frame = top.frames.back();
    pass.step_times.push_back(frame_time(frame));
    if (!is_last && last_attend_frame_ - frame > config_.rewind_threshold) {
      const int32_t previous = top.tokens.size() >= 2 ? top.tokens[top.tokens.size() - 2] : prompt.back();
      if (text_.is_special(previous)) {
        last_attend_frame_ = frame;  // a jump right after a special token is the start of speech, not a rewind
      } else {
        last_attend_frame_ = -config_.rewind_threshold;
        pass.stop = StopReason::kRewind;
        break;  // discard the pass
      }
    } else {
      last_attend_frame_ = frame;
    }
    if (content_len - frame <= threshold) {
      keep(top, top.tokens.size() - 1);
      pass.stop = StopReason::kBorder;
      break;
    }
  }
  return pass;
}

std::vector<Word> AlignAttProcessor::to_words(const std::vector<TimedToken>& tokens, bool keep_incomplete) const {
  std::vector<int32_t> ids;
  for (const TimedToken& t : tokens) ids.push_back(t.token);
  const auto split = split_all(text_, ids, language_);
  std::vector<Word> words;
  size_t at = 0;
  for (const auto& w : split) {
    const size_t begin = at;
    at += w.tokens.size();
    if (begin >= tokens.size()) break;
    if (!keep_incomplete && !is_valid_utf8(w.text)) continue;
    Word word;
    word.text = w.text;
    word.start = tokens[begin].time;
    double logprob = 0;
    for (size_t i = begin; i < at && i < tokens.size(); ++i) logprob += tokens[i].logprob;
    word.probability = static_cast<float>(std::exp(logprob / std::max<size_t>(1, at - begin)));
    word.language = language_;
    word.end = at < tokens.size() ? tokens[at].time : word.start + 0.1;
    words.push_back(std::move(word));
  }
  return words;
}

std::vector<Word> AlignAttProcessor::commit(const Pass& pass, bool is_last, PassTrace& trace) {
  const std::vector<TimedToken>& new_tokens = pass.tokens;
  std::vector<TimedToken> combined = pending_;
  const size_t n_pending = pending_.size();
  combined.insert(combined.end(), new_tokens.begin(), new_tokens.end());
  std::vector<int32_t> ids;
  for (const TimedToken& t : combined) ids.push_back(t.token);
  const auto split = split_all(text_, ids, language_);

  // Token range of each word within `combined`.
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t at = 0;
  for (const auto& w : split) {
    ranges.emplace_back(at, std::min(at + w.tokens.size(), combined.size()));
    at += w.tokens.size();
  }
  const bool fire = !config_.never_fire || is_last;
  size_t commit_end = combined.size();
  size_t n_emit = split.size();
  if (!fire && !split.empty() && ranges.back().first >= n_pending) {
    commit_end = ranges.back().first;
    n_emit = split.size() - 1;
  }
  committed_blocks_.emplace_back();
  std::vector<int32_t>& block = committed_blocks_.back();
  for (size_t i = n_pending; i < commit_end; ++i) block.push_back(combined[i].token);

  const std::vector<Word> timed = to_words(combined, /*keep_incomplete=*/true);
  std::vector<Word> fresh;
  std::vector<TimedToken> next_pending;
  size_t stale_tokens = 0;  // leading tokens of this pass's block dropped as stale
  size_t stale_words = 0;
  for (size_t i = 0; i < n_emit && i < timed.size(); ++i) {
    const size_t n_tokens = ranges[i].second - ranges[i].first;
    if (!is_valid_utf8(timed[i].text)) {
      if (i + 1 == n_emit && static_cast<int>(n_tokens) <= config_.max_pending_utf8_tokens && !is_last) {
        next_pending.assign(combined.begin() + static_cast<std::ptrdiff_t>(ranges[i].first),
                            combined.begin() + static_cast<std::ptrdiff_t>(ranges[i].second));
      } else {
        warn("dropped an incomplete UTF-8 word of " + std::to_string(n_tokens) + " tokens");
      }
      continue;
    }
    // Stale guard: audio already transcribed before a reset coming back. Only a
    // leading run of this pass's own words goes, from the output and the block alike.
    if (config_.stale_guard && stale_until_ && fresh.empty() && ranges[i].first == n_pending + stale_tokens &&
        timed[i].end <= *stale_until_ + config_.stale_margin) {
      stale_tokens = std::min(ranges[i].second, commit_end) - n_pending;
      ++stale_words;
      continue;
    }
    fresh.push_back(timed[i]);
  }
  if (stale_tokens > 0) {
    block.erase(block.begin(), block.begin() + static_cast<std::ptrdiff_t>(std::min(stale_tokens, block.size())));
    trace.guards.push_back("stale: dropped " + std::to_string(stale_words) + " leading words ending before " +
                           std::to_string(*stale_until_) + " s");
  }
  if (!fresh.empty()) stale_until_.reset();
  pending_ = std::move(next_pending);
  provisional_.clear();
  for (size_t i = n_emit; i < timed.size(); ++i) {
    if (is_valid_utf8(timed[i].text)) provisional_.push_back(timed[i]);
  }

  // Repetition guard: only a pass that ran into the budget or the context limit,
  // where the reference would commit the loop whole.
  const bool ran_out = pass.stop == StopReason::kTokenBudget || pass.stop == StopReason::kContextLimit;
  const size_t cut = config_.repetition_guard && ran_out ? repetition_cut(fresh) : fresh.size();
  const bool looping = cut < fresh.size();
  if (looping) {
    warn("repetition loop detected; segment reset after " + std::to_string(cut) + " new words");
    trace.guards.push_back("repetition: kept " + std::to_string(cut) + " of " + std::to_string(fresh.size()) +
                           " new words, segment reset");
    fresh.resize(cut);
  }
  // Attention frames need not be monotonic: keep committed times ordered and inside the audio.
  const double audio_end = buffer_start_time_ + buffered_seconds();
  for (Word& w : fresh) {
    const double floor = committed_.empty() ? buffer_start_time_ : std::max(committed_.back().end, buffer_start_time_);
    w.start = std::clamp(w.start, std::min(floor, audio_end), audio_end);
    w.end = std::clamp(w.end, w.start, audio_end);
    committed_.push_back(w);
    last_committed_end_ = std::max(last_committed_end_, w.end);
  }
  trace.committed = block;
  for (const Word& w : fresh) trace.words.push_back(w.text);
  if (looping) {
    // Restart from the end of the last good word with a clean context.
    const double keep_from = committed_.empty() ? buffer_start_time_ : committed_.back().end;
    trim_front(keep_from - buffer_start_time_);
    reset_segment();
    if (!committed_.empty()) stale_until_ = last_committed_end_;
  }
  return fresh;
}

size_t AlignAttProcessor::repetition_cut(const std::vector<Word>& fresh) const {
  // Look at the recent committed words together with the new ones.
  const size_t history = std::min<size_t>(committed_.size(), 64);
  std::vector<std::string> words;
  for (size_t i = committed_.size() - history; i < committed_.size(); ++i) {
    words.push_back(normalize_word(committed_[i].text));
  }
  for (const Word& w : fresh) words.push_back(normalize_word(w.text));
  const std::optional<size_t> cut = find_repetition(words, history);
  if (!cut || *cut >= words.size()) return fresh.size();
  return *cut <= history ? 0 : *cut - history;
}

std::vector<float> AlignAttProcessor::buffer_pcm() const {
  std::vector<float> pcm;
  pcm.reserve(buffered_samples_);
  for (const auto& c : chunks_) pcm.insert(pcm.end(), c.begin(), c.end());
  if (pcm.size() > static_cast<size_t>(asr_->max_samples())) pcm.resize(asr_->max_samples());
  return pcm;
}

int AlignAttProcessor::encode_buffer() {
  const std::vector<float> pcm = buffer_pcm();
  // Content frames as the reference counts them: whole frames of audio, a half
  // frame at the end rounds down (Whisper: int(mel frames / 2)).
  const int whole_frames = static_cast<int>(static_cast<double>(pcm.size()) * asr_->frames_per_second() / kSampleRate);
  return std::min(asr_->encode(pcm), whole_frames);
}

void AlignAttProcessor::prepare_flush() {
  if (prepared_content_ || chunks_.empty() || buffered_seconds() < config_.audio_min_len) return;
  prepared_content_ = encode_buffer();
}

ProcessResult AlignAttProcessor::process(bool is_last) {
  ProcessResult out;
  out.processed_until = stream_end_;
  if (chunks_.empty() || buffered_seconds() < config_.audio_min_len) return out;

  // A flush's encoder pass may have run ahead on this very buffer (the encoder's
  // output and cross K/V are still the decoder's: nothing encoded since).
  const std::optional<int> prepared = std::exchange(prepared_content_, std::nullopt);
  int content_len = 0;
  if (is_last && prepared) {
    content_len = *prepared;
  } else if (is_last) {
    content_len = encode_buffer();
  } else {
    // A pass that is no flush may be stopped (common/pass_stop.h) while it encodes
    // and decodes: its audio stays buffered, the stream's state as it was (the
    // language detected in between is kept: the next pass would detect it anyway).
    StoppablePass stoppable;
    content_len = encode_buffer();
  }

  bool detecting = language_.empty();
  if (detecting) {
    const double buffer_end = buffer_start_time_ + buffered_seconds();
    if (is_last || (first_timestamp_ && buffer_end - *first_timestamp_ >= config_.language_detect_after)) {
      language_ = most_likely_language(*asr_);
      reset_segment();
      detecting = false;
    }
  }
  trim_context();
  int sot_index = 0;
  const std::vector<int32_t> prompt = build_prompt(!detecting, sot_index);
  PassTrace trace;
  trace.index = passes_++;
  trace.is_last = is_last;
  trace.language = language_;
  trace.buffer_start = buffer_start_time_;
  trace.buffer_end = buffer_start_time_ + buffered_seconds();
  trace.content_frames = content_len;
  Pass pass;
  if (is_last) {
    pass = decode_pass(prompt, sot_index, content_len, is_last);
  } else {
    const int attend_before = last_attend_frame_;
    try {
      StoppablePass stoppable;  // between decoder steps too
      pass = decode_pass(prompt, sot_index, content_len, is_last);
    } catch (const PassStopped&) {
      last_attend_frame_ = attend_before;  // the one thing decoding changes that outlives a pass
      --passes_;
      throw;
    }
  }
  asr_->reset(1);  // the pass's cache is of no further use; keep the memory small
  if (config_.on_trace) {
    trace.sot_index = sot_index;
    trace.prompt = prompt;
    trace.tokens = pass.decoded;
    trace.stop = pass.stop;
  }

  if (detecting) {
    // Words before the language is known are shown, never committed.
    provisional_ = to_words(pass.tokens, /*keep_incomplete=*/false);
    if (!first_timestamp_ && pass.step_times.size() >= 2) first_timestamp_ = pass.step_times.front();
  } else {
    out.committed = commit(pass, is_last, trace);
  }
  if (config_.on_trace) config_.on_trace(to_json(trace));
  return out;
}

void AlignAttProcessor::end_silence(double duration, double offset) {
  if (duration < 0) throw Error(ErrorCode::kInvalidArgument, "silence duration must be >= 0 s");
  if (duration < config_.long_silence) {
    add_chunk(std::vector<float>(static_cast<size_t>(duration * kSampleRate), 0.0f));
  } else {
    prepared_content_.reset();
    chunks_.clear();
    buffered_samples_ = 0;
    buffer_start_time_ = offset;
    reset_segment();
    if (!committed_.empty()) stale_until_ = last_committed_end_;
  }
  stream_end_ = std::max(stream_end_, offset);
}

void AlignAttProcessor::warmup() {
  const std::vector<float> second(kSampleRate, 0.0f);
  auto trace = std::move(config_.on_trace);  // a warm-up pass is no pass of the stream
  config_.on_trace = nullptr;
  insert_audio(second, 1.0);
  process(/*is_last=*/true);
  config_.on_trace = std::move(trace);
  reset_all();
}

}  // namespace earshot::policy
