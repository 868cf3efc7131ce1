#include "bench/reference_workload.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <unordered_set>

#include "bench/prompted_reference.h"
#include "bench/transducer_reference.h"
#include "common/error.h"
#include "common/sample_rate.h"
#include "vad/vad.h"

namespace earshot::bench {
namespace {

// The last pass's border is 4 frames (80 ms): word times end before it.
constexpr double kEndMargin = 0.12;
// The live VAD's end of a speech segment falls up to a 32 ms window either side of
// the offline segmentation's: a segment's words end this much before its end, so a
// flush at the live end finds the segment's last word whole (else it was held at
// the border and committed with the next segment's audio).
constexpr double kSegmentEndSlack = 0.04;
// Logit of the chosen token over 0 for every other: log-probability ~ -V e^-30.
constexpr float kChosenLogit = 30.0f;
// Attention of the chosen position: a 7-frame plateau (the median filter's
// width, so the filtered peak survives and its first frame wins the argmax)
// over a floor equal in every other row, which z-scores to 0 where no row peaks.
constexpr float kPeak = 0.1f, kFloor = 1e-4f;
constexpr int kPlateau = 7;

bool all_space(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

}  // namespace

std::vector<SpeechSpan> speech_segments(std::shared_ptr<const vad::VadModel> model, std::span<const float> samples) {
  vad::SpeechDetector detector(std::move(model));
  std::vector<vad::SpeechEvent> events = detector.push(samples).events;
  for (const vad::SpeechEvent& e : detector.finish().events) events.push_back(e);
  std::vector<SpeechSpan> spans;
  for (const vad::SpeechEvent& e : events) {
    if (e.kind == vad::SpeechEvent::Kind::kSpeechStart) {
      spans.push_back({e.seconds(), e.seconds()});
    } else if (!spans.empty()) {
      spans.back().end = e.seconds();
    }
  }
  std::erase_if(spans, [](const SpeechSpan& s) { return !(s.end > s.start); });
  return spans;
}

std::vector<TimedWord> estimate_word_times(const std::string& reference, const std::vector<SpeechSpan>& speech,
                                           double audio_seconds) {
  std::vector<TimedWord> words;
  std::istringstream in(reference);
  std::string w;
  while (in >> w) words.push_back({w, 0, 0});
  if (words.empty()) return words;
  const double limit = std::max(0.0, audio_seconds - kEndMargin);
  std::vector<SpeechSpan> spans;
  for (const SpeechSpan& s : speech) {
    const double end = s.end - std::min(kSegmentEndSlack, (s.end - s.start) / 2);
    const SpeechSpan c{std::clamp(s.start, 0.0, limit), std::clamp(end, 0.0, limit)};
    if (c.end > c.start) spans.push_back(c);
  }
  if (spans.empty()) spans.push_back({0.0, limit});
  double speech_seconds = 0;
  for (const SpeechSpan& s : spans) speech_seconds += s.end - s.start;
  double weight = -1;  // no gap after the last word
  for (const TimedWord& t : words) weight += static_cast<double>(t.text.size()) + 1;
  // Speech-time offset -> stream time; `starting` puts a boundary at the next span.
  auto at = [&](double x, bool starting) {
    double offset = weight > 0 ? x / weight * speech_seconds : 0;
    for (size_t i = 0; i < spans.size(); ++i) {
      const double d = spans[i].end - spans[i].start;
      if (offset < d || (!starting && offset <= d) || i + 1 == spans.size())
        return std::min(spans[i].start + offset, spans[i].end);
      offset -= d;
    }
    return spans.back().end;
  };
  double x = 0;
  for (TimedWord& t : words) {
    t.start = at(x, true);
    x += static_cast<double>(t.text.size());
    t.end = std::max(t.start, at(x, false));
    x += 1;
  }
  return words;
}

ReferenceTokens reference_tokens(const std::vector<TimedWord>& words,
                                 const std::function<std::vector<int32_t>(const std::string&)>& encode,
                                 const std::function<std::string(int32_t)>& decode,
                                 const std::function<bool(int32_t)>& keep) {
  std::string joined;
  std::vector<size_t> word_end_byte;  // each word's end in `joined`, its leading space included before it
  for (const TimedWord& w : words) {
    joined += " " + w.text;
    word_end_byte.push_back(joined.size());
  }
  ReferenceTokens out;
  std::vector<size_t> word_of;
  size_t byte = 0, word = 0;
  for (int32_t id : encode(joined)) {
    while (word + 1 < word_end_byte.size() && byte >= word_end_byte[word]) ++word;
    byte += decode(id).size();
    if (!keep(id)) continue;
    out.tokens.push_back(id);
    word_of.push_back(word);
  }
  for (size_t i = 0; i < out.tokens.size();) {
    size_t j = i;
    while (j < out.tokens.size() && word_of[j] == word_of[i]) ++j;
    const TimedWord& w = words[word_of[i]];
    for (size_t k = i; k < j; ++k) {
      out.time.push_back(w.start + (w.end - w.start) * static_cast<double>(k - i) / static_cast<double>(j - i));
      out.word_start.push_back(w.start);
      out.word_end.push_back(w.end);
    }
    i = j;
  }
  return out;
}

size_t ReferencePlace::locate(const std::vector<int32_t>& reference, const std::vector<int32_t>& history) {
  size_t best_length = 0, best_end = 0;
  for (size_t e = floor + 1; e <= reference.size(); ++e) {
    size_t k = 0;
    while (k < history.size() && k < e - floor && reference[e - 1 - k] == history[history.size() - 1 - k]) ++k;
    if (k > best_length) {
      best_length = k;
      best_end = e;
      if (k == history.size()) break;
    }
  }
  if (best_length == 0) return known_end;
  floor = best_end - best_length;
  known_end = std::max(known_end, best_end);
  return best_end;
}

ReferenceDecoder::ReferenceDecoder(std::unique_ptr<AsrDecoder> inner, std::vector<TimedWord> words,
                                   std::shared_ptr<FedAudio> fed, PartialWord partial)
    : inner_(std::move(inner)), fed_(std::move(fed)), partial_(partial) {
  if (!inner_ || !fed_) throw Error(ErrorCode::kInternal, "ReferenceDecoder needs a decoder and a fed-audio record");
  const AsrText& text = inner_->text();
  const std::vector<int32_t> suppressed_list = text.suppressed_tokens();
  const std::unordered_set<int32_t> suppressed(suppressed_list.begin(), suppressed_list.end());
  // Tokens a Whisper model never chooses are dropped (a real model could not write them either).
  ReferenceTokens r = reference_tokens(
      words, [&](const std::string& s) { return text.encode(s); },
      [&](int32_t id) { return text.decode(std::span<const int32_t>(&id, 1)); },
      [&](int32_t id) { return !suppressed.count(id) && !text.is_special(id); });
  tokens_ = std::move(r.tokens);
  token_time_ = std::move(r.time);
  word_start_ = std::move(r.word_start);
  word_end_ = std::move(r.word_end);
  // A first step that has nothing to say cannot end the pass (the end token is
  // suppressed there): it says whitespace, which no policy shows or commits.
  const std::vector<int32_t> blank_list = text.blank_tokens();
  const std::unordered_set<int32_t> blank(blank_list.begin(), blank_list.end());
  const int32_t end = std::min(text.text_vocabulary_end(), text.n_vocab());
  for (int32_t id = 0; id < end && filler_ < 0; ++id) {
    if (suppressed.count(id) || blank.count(id) || text.is_special(id)) continue;
    if (all_space(text.decode(std::span<const int32_t>(&id, 1)))) filler_ = id;
  }
}

int ReferenceDecoder::encode(std::span<const float> pcm) {
  const int content = inner_->encode(pcm);
  // The policies' count of content frames: whole frames of audio.
  const int whole = static_cast<int>(static_cast<double>(pcm.size()) * inner_->frames_per_second() / kSampleRate);
  content_frames_ = std::min(content, whole);
  buffer_end_ = fed_->seconds;
  buffer_start_ = buffer_end_ - static_cast<double>(pcm.size()) / kSampleRate;
  return content;
}

void ReferenceDecoder::reset(int n_sequences) {
  if (n_sequences != 1)
    throw Error(ErrorCode::kInvalidArgument,
                "the reference workload decodes greedily: use --beams 1 (a pass asked for " +
                    std::to_string(n_sequences) + " sequences)");
  inner_->reset(n_sequences);
}

void ReferenceDecoder::locate(std::span<const int32_t> prompt) {
  std::vector<int32_t> history;
  for (int32_t id : prompt)
    if (!inner_->text().is_special(id)) history.push_back(id);
  cursor_ = place_.locate(tokens_, history);
}

DecodeResult ReferenceDecoder::decode(const DecodeRequest& request) {
  const int before = inner_->n_past();
  const bool first = before == 0;
  DecodeResult result = inner_->decode(request);
  if (request.tokens.size() != 1) throw Error(ErrorCode::kInternal, "the reference workload decodes one sequence");
  const std::vector<int32_t>& appended = request.tokens[0];
  if (first) {
    derailed_ = false;
    locate(appended);
  } else {
    for (int32_t id : appended) {
      if (!derailed_ && cursor_ < tokens_.size() && id == tokens_[cursor_]) {
        ++cursor_;
      } else {
        derailed_ = true;  // a filler, or a token the policy chose itself: end the pass
      }
    }
  }
  const int32_t end_token = inner_->text().end_token();
  int32_t token = end_token;
  double time = buffer_end_;
  if (!derailed_ && cursor_ < tokens_.size()) {
    if (word_end_[cursor_] <= buffer_end_ + 1e-9) {
      token = tokens_[cursor_];
      time = token_time_[cursor_];
    } else if (partial_ == PartialWord::kHoldAtBorder && word_start_[cursor_] < buffer_end_) {
      token = tokens_[cursor_];
    }
  }
  const bool nothing = token == end_token;
  if (first && nothing && filler_ >= 0) token = filler_;
  fill(result, token, time, first && nothing);
  return result;
}

void ReferenceDecoder::fill(DecodeResult& r, int32_t token, double time, bool no_speech) const {
  const int32_t no_speech_token = inner_->text().no_speech_token();
  for (int s = 0; s < r.n_sequences; ++s) {
    for (int p = 0; p < r.n_positions; ++p) {
      float* row = r.logits.data() + (static_cast<size_t>(s) * r.n_positions + p) * r.n_vocab;
      std::fill(row, row + r.n_vocab, 0.0f);
      // The first of two positions is the start of transcript, where the
      // no-speech probability is read: certain when there is nothing to say.
      if (no_speech && p == 0 && r.n_positions > 1 && no_speech_token >= 0 && no_speech_token < r.n_vocab) {
        row[no_speech_token] = kChosenLogit;
      } else if (token >= 0 && token < r.n_vocab) {
        row[token] = kChosenLogit;
      }
    }
  }
  if (r.attention.empty() || r.n_frames == 0) return;
  const int last_frame = std::max(0, std::min(content_frames_, r.n_frames) - 1);
  const int frame =
      std::clamp(static_cast<int>(std::lround((time - buffer_start_) * inner_->frames_per_second())), 0, last_frame);
  // The plateau stays inside the frames, or the median filter's reflection at
  // the last frame would flatten it (the argmax then lands up to 6 frames early).
  const int plateau = std::max(0, std::min(frame, r.n_frames - kPlateau));
  for (int s = 0; s < r.n_sequences; ++s) {
    for (int h = 0; h < r.n_heads; ++h) {
      for (int t = 0; t < r.n_tokens; ++t) {
        float* row = r.attention.data() + ((static_cast<size_t>(s) * r.n_heads + h) * r.n_tokens + t) * r.n_frames;
        std::fill(row, row + r.n_frames, kFloor);
        if (t + 1 == r.n_tokens) std::fill(row + plateau, row + std::min(r.n_frames, plateau + kPlateau), kPeak);
      }
    }
  }
}

ReferenceStream open_reference_stream(const engine::Engine& engine, engine::StreamRequest request,
                                      std::vector<TimedWord> words) {
  const std::string policy = engine.resolve_policy(request.policy);
  // AlignAtt's border holds a begun word back; LocalAgreement has no border, so
  // a word is offered only once it is whole.
  const PartialWord partial = policy == "alignatt" ? PartialWord::kHoldAtBorder : PartialWord::kEndOfText;
  auto fed = std::make_shared<FedAudio>();
  ReferenceStream out;
  // A streaming transducer is steered instead (transducer_reference.h).
  auto clock = std::make_shared<SegmentClock>();
  auto steer = std::make_shared<TransducerReference>(words, clock);
  request.steer_transducer = steer;
  // The caller's own wrapper (a profiler) stays next to the model, under this one.
  auto inner_wrap = std::move(request.wrap_decoder);
  request.wrap_decoder = [&](std::unique_ptr<AsrDecoder> decoder) -> std::unique_ptr<AsrDecoder> {
    if (inner_wrap) decoder = inner_wrap(std::move(decoder));
    auto d = std::make_unique<ReferenceDecoder>(std::move(decoder), std::move(words), fed, partial);
    out.decoder = d.get();
    return d;
  };
  // An audio-LLM decoder (Qwen3-ASR): its AlignAtt's border holds words back.
  auto inner_prompted = std::move(request.wrap_prompted_decoder);
  request.wrap_prompted_decoder =
      [&](std::unique_ptr<PromptedAsrDecoder> decoder) -> std::unique_ptr<PromptedAsrDecoder> {
    if (inner_prompted) decoder = inner_prompted(std::move(decoder));
    if (policy != "alignatt") {
      throw Error(ErrorCode::kUnsupported, "--workload reference runs " + engine.capabilities().family +
                                               " with --policy alignatt only (not " + policy + ")");
    }
    auto d = std::make_unique<PromptedReference>(std::move(decoder), std::move(words), fed);
    out.prompted = d.get();
    return d;
  };
  std::unique_ptr<OnlineProcessor> processor = engine.open_stream(request);
  if (out.decoder || out.prompted) {
    out.processor = std::make_unique<FedAudioProcessor>(std::move(processor), fed);
  } else if (steer->bound()) {
    out.transducer = steer.get();
    out.processor = std::make_unique<SegmentClockProcessor>(std::move(processor), clock);
  } else {
    throw Error(ErrorCode::kUnsupported,
                "--workload reference needs a model with an attention decoder or a "
                "cache-aware streaming transducer (" +
                    engine.capabilities().family + " " + engine.capabilities().model_name + " is neither)");
  }
  return out;
}

}  // namespace earshot::bench
