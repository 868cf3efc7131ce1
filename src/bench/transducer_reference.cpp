#include "bench/transducer_reference.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "common/error.h"
#include "common/sample_rate.h"

namespace earshot::bench {
namespace {

// A stand-in costs more than any exact spelling.
constexpr int kStandInCost = 1000;

// The vocabulary by text: word-start pieces (their text after the space) and continuations.
class Spelling {
 public:
  Spelling(const TokenPieces& pieces, int n_vocab) {
    for (int id = 0; id < n_vocab; ++id) {
      std::string text = pieces.text(id, /*first_in_text=*/false);
      if (text.empty() || !pieces.language_tag(id).empty()) continue;
      if (pieces.starts_word(id)) {
        if (text[0] == ' ') text.erase(0, 1);
        start_.try_emplace(text, id);
        if (stand_in_start_ < 0 && !text.empty()) stand_in_start_ = id;
      } else if (text[0] != ' ') {
        continuation_.try_emplace(text, id);
        if (stand_in_continuation_ < 0) stand_in_continuation_ = id;
      }
      longest_ = std::max(longest_, text.size());
    }
    if (stand_in_start_ < 0 || stand_in_continuation_ < 0)
      throw Error(ErrorCode::kUnsupported,
                  "--workload reference: the model's vocabulary has no word-start or no continuation pieces");
  }

  // The fewest pieces spelling `w`, stand-ins (counted in *stand_ins) where none covers a character.
  std::vector<int> spell(const std::string& w, int* stand_ins) const {
    const size_t n = w.size();
    constexpr int kInf = std::numeric_limits<int>::max() / 2;
    // State i: the word begun, w[0, i) spelt. A step into it: from state `from`
    // (-1: not begun) by `piece`.
    struct Step {
      int cost = kInf;
      long long from = -1;
      int piece = -1;
      bool stand_in = false;
    };
    std::vector<Step> best(n + 1);
    auto relax = [&](long long at, size_t to, int piece, int cost, bool is_stand_in) {
      if (cost < best[to].cost) best[to] = {cost, at, piece, is_stand_in};
    };
    for (size_t l = 0; l <= std::min(n, longest_); ++l)
      if (auto it = start_.find(w.substr(0, l)); it != start_.end()) relax(-1, l, it->second, 1, false);
    if (n > 0) relax(-1, char_end(w, 0), stand_in_start_, kStandInCost, true);
    for (size_t i = 0; i < n; ++i) {
      if (best[i].cost >= kInf) continue;
      for (size_t l = 1; l <= std::min(n - i, longest_); ++l)
        if (auto it = continuation_.find(w.substr(i, l)); it != continuation_.end())
          relax(static_cast<long long>(i), i + l, it->second, best[i].cost + 1, false);
      relax(static_cast<long long>(i), char_end(w, i), stand_in_continuation_, best[i].cost + kStandInCost, true);
    }
    std::vector<int> out;
    for (long long at = static_cast<long long>(n); at >= 0; at = best[static_cast<size_t>(at)].from) {
      const Step& s = best[static_cast<size_t>(at)];
      out.push_back(s.piece);
      if (s.stand_in) ++*stand_ins;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }

 private:
  // The end of the UTF-8 character at i.
  static size_t char_end(const std::string& w, size_t i) {
    size_t e = i + 1;
    while (e < w.size() && (static_cast<unsigned char>(w[e]) & 0xC0) == 0x80) ++e;
    return e;
  }

  std::unordered_map<std::string, int> start_, continuation_;
  int stand_in_start_ = -1, stand_in_continuation_ = -1;
  size_t longest_ = 0;
};

}  // namespace

TransducerReference::TransducerReference(std::vector<TimedWord> words, std::shared_ptr<const SegmentClock> clock)
    : words_(std::move(words)), clock_(std::move(clock)) {}

void TransducerReference::bind(const TokenPieces& pieces, int n_vocab, const std::vector<int>& durations,
                               double frame_seconds) {
  if (bound_) throw Error(ErrorCode::kInternal, "a transducer reference steers one stream");
  bound_ = true;
  const Spelling spelling(pieces, n_vocab);
  blank_ = n_vocab;
  durations_ = durations;
  if (!durations_.empty()) largest_duration_ = *std::max_element(durations_.begin(), durations_.end());
  frame_seconds_ = frame_seconds;
  for (const TimedWord& word : words_) {
    int missing = 0;
    std::vector<int> spelt = spelling.spell(word.text, &missing);
    if (missing > 0) {
      // Case and punctuation the vocabulary lacks: the word's letters and digits, lower-cased.
      std::string folded;
      for (unsigned char c : word.text)
        if (c >= 0x80 || std::isalnum(c)) folded += static_cast<char>(c < 0x80 ? std::tolower(c) : c);
      int folded_missing = 0;
      std::vector<int> other = folded.empty() ? std::vector<int>{} : spelling.spell(folded, &folded_missing);
      if (!other.empty() && folded_missing < missing) spelt = std::move(other), missing = folded_missing;
    }
    stand_ins_ += missing;
    const double span = word.end - word.start;
    for (size_t k = 0; k < spelt.size(); ++k) {
      tokens_.push_back(spelt[k]);
      token_time_.push_back(word.start + span * static_cast<double>(k + 1) / static_cast<double>(spelt.size()));
    }
  }
}

long long TransducerReference::frame_of(double t) const {
  // The frame f with start + f * fs < t <= start + (f + 1) * fs.
  return static_cast<long long>(std::ceil((t - clock_->start) / frame_seconds_ - 1e-9)) - 1;
}

int TransducerReference::duration_index_at_most(long long frames) const {
  // The largest duration that fits; none fits: the smallest.
  int best = -1;
  for (int i = 0; i < static_cast<int>(durations_.size()); ++i)
    if (durations_[i] <= frames && (best < 0 || durations_[i] > durations_[best])) best = i;
  if (best >= 0) return best;
  return static_cast<int>(std::min_element(durations_.begin(), durations_.end()) - durations_.begin());
}

TransducerSteer::Choice TransducerReference::choose(int frame) {
  ++steps_;
  const bool tdt = !durations_.empty();
  // The frame of the next piece due (far away when none is left).
  auto next_due = [&] {
    return cursor_ < tokens_.size() ? frame_of(token_time_[cursor_])
                                    : frame + static_cast<long long>(largest_duration_);
  };
  if (cursor_ < tokens_.size() && frame_of(token_time_[cursor_]) <= frame) {
    const int token = tokens_[cursor_++];
    return {token, tdt ? duration_index_at_most(std::max(0LL, next_due() - frame)) : 0};
  }
  return {blank_, tdt ? duration_index_at_most(std::max(1LL, next_due() - frame)) : 0};
}

void SegmentClockProcessor::insert_audio(std::span<const float> samples, double stream_end_time) {
  if (!clock_->open) {
    clock_->start = stream_end_time - static_cast<double>(samples.size()) / kSampleRate;
    clock_->open = true;
  }
  inner_->insert_audio(samples, stream_end_time);
}

ProcessResult SegmentClockProcessor::process(bool is_last) {
  ProcessResult r = inner_->process(is_last);
  if (is_last) clock_->open = false;
  return r;
}

}  // namespace earshot::bench
