// A scripted AsrDecoder: the test says, per pass (encode call) and per generated
// history, which tokens get which logits and which encoder frame the query
// attends to. Attention rows are plateaus of 7 frames starting at that frame, so
// the z-normalised, median-filtered argmax is exactly that frame.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/pass_stop.h"
#include "model/asr_decoder.h"
#include "model/whisper/asr_text.h"
#include "model/whisper/tokenizer.h"

namespace earshot::policy::testing {

struct Reply {
  std::map<int32_t, float> logits;  // everything else gets kBaseLogit
  int frame = 0;                    // attended by the query that chooses the next token
};

// One pass of a greedy script: token i is chosen at step i, attending frame i.
struct Step {
  int32_t token;
  int frame;
};

class FakeDecoder : public AsrDecoder {
 public:
  static constexpr float kBaseLogit = -30.0f;
  static constexpr int kFrames = 1500;
  static constexpr int kHeads = 2;

  using Script = std::function<Reply(int pass, const std::vector<int32_t>& generated)>;

  FakeDecoder(std::shared_ptr<const whisper::Tokenizer> tokenizer, Script script, int n_text_ctx = 448)
      : tokenizer_(std::move(tokenizer)), text_(tokenizer_), script_(std::move(script)), n_text_ctx_(n_text_ctx) {}

  // A greedy script from a list of passes; past a pass's last step it answers EOT at end_frame.
  static Script from_passes(std::vector<std::vector<Step>> passes, int32_t eot) {
    return [passes = std::move(passes), eot](int pass, const std::vector<int32_t>& generated) {
      Reply r;
      const std::vector<Step>& steps = pass < static_cast<int>(passes.size()) ? passes[pass] : passes.back();
      const size_t k = generated.size();
      if (k < steps.size()) {
        r.logits[steps[k].token] = 10.0f;
        r.frame = steps[k].frame;
      } else {
        r.logits[eot] = 10.0f;
        r.frame = steps.empty() ? 0 : std::min(steps.back().frame + 7, kFrames - 8);
      }
      return r;
    };
  }

  const AsrText& text() const override { return text_; }
  int n_text_ctx() const override { return n_text_ctx_; }
  int n_alignment_heads() const override { return kHeads; }
  double frames_per_second() const override { return 50; }
  int max_samples() const override { return 30 * 16000; }

  int encode(std::span<const float> pcm) override {
    graph();
    ++passes_;
    encoded_samples.push_back(pcm.size());
    // round_half_frame_up: as earshot's Whisper session counts (mel frames + 1) / 2.
    const int frames =
        round_half_frame_up ? static_cast<int>((pcm.size() / 160 + 1) / 2) : static_cast<int>(pcm.size() / 320);
    return std::min<int>(frames, kFrames);
  }
  void reset(int n_sequences) override {
    histories_.assign(n_sequences, {});
    prompt_len_ = 0;
  }
  int n_past() const override { return histories_.empty() ? 0 : static_cast<int>(histories_[0].size()); }
  void rollback(int n_past) override {
    for (auto& h : histories_) h.resize(std::min<size_t>(h.size(), n_past));
  }
  void reorder(std::span<const int> source) override {
    auto copy = histories_;
    for (size_t i = 0; i < source.size(); ++i) histories_[i] = copy[source[i]];
  }
  DecodeResult decode(const DecodeRequest& request) override {
    graph();
    const int n_seq = static_cast<int>(request.tokens.size());
    if (n_seq != static_cast<int>(histories_.size())) throw Error(ErrorCode::kInternal, "fake: sequence count");
    const int n_tok = static_cast<int>(request.tokens[0].size());
    if (n_past() + n_tok > n_text_ctx_) throw Error(ErrorCode::kInvalidArgument, "fake: beyond n_text_ctx");
    if (n_past() == 0) {
      prompt_len_ = n_tok;
      prompts.push_back(request.tokens[0]);
    }
    DecodeResult r;
    r.n_sequences = n_seq;
    r.n_tokens = n_tok;
    r.n_positions = request.logits_positions.empty() ? 1 : static_cast<int>(request.logits_positions.size());
    r.n_vocab = request.vocabulary_limit > 0 ? request.vocabulary_limit : tokenizer_->n_vocab();
    vocabulary_limits.push_back(r.n_vocab);
    r.n_heads = kHeads;
    r.n_frames = kFrames;
    r.logits.assign(static_cast<size_t>(n_seq) * r.n_positions * r.n_vocab, kBaseLogit);
    r.attention.assign(static_cast<size_t>(n_seq) * kHeads * n_tok * kFrames, 0.0f);
    for (int s = 0; s < n_seq; ++s) {
      histories_[s].insert(histories_[s].end(), request.tokens[s].begin(), request.tokens[s].end());
      const std::vector<int32_t> generated(histories_[s].begin() + prompt_len_, histories_[s].end());
      const Reply reply = script_(passes_ - 1, generated);
      for (int p = 0; p < r.n_positions; ++p) {
        float* row = r.logits.data() + (static_cast<size_t>(s) * r.n_positions + p) * r.n_vocab;
        if (p + 1 < r.n_positions) {  // an earlier position: only the no-speech logit matters
          row[tokenizer_->special().no_speech] = no_speech_logit;
        } else {
          for (const auto& [token, logit] : reply.logits) {
            if (token < r.n_vocab) row[token] = logit;
          }
        }
      }
      for (int h = 0; h < kHeads; ++h) {
        float* row = r.attention.data() + ((static_cast<size_t>(s) * kHeads + h) * n_tok + n_tok - 1) * kFrames;
        for (int f = reply.frame; f < std::min(reply.frame + 7, kFrames); ++f) row[f] = 1.0f;
      }
    }
    return r;
  }
  std::vector<float> detect_language() override {
    ++language_detections;
    std::vector<float> probs(tokenizer_->special().n_languages, 0.0f);
    probs.at(detected_language_index) = 1.0f;
    return probs;
  }

  // Where a real model computes a graph: a stoppable pass's listener is asked
  // (common/pass_stop.h), once per graph here.
  static void graph() {
    if (const std::function<bool()>* listener = pass_stop_listener(); listener && pass_listener_says_stop(*listener))
      throw PassStopped();
  }

  // What the test inspects or sets.
  std::vector<std::vector<int32_t>> prompts;  // first decode call of every pass
  std::vector<int> vocabulary_limits;         // logits per position returned by every decode call
  std::vector<size_t> encoded_samples;
  float no_speech_logit = -30.0f;
  bool round_half_frame_up = false;
  int detected_language_index = 0;
  int language_detections = 0;
  int passes() const { return passes_; }

 private:
  std::shared_ptr<const whisper::Tokenizer> tokenizer_;
  whisper::WhisperText text_;
  Script script_;
  int n_text_ctx_;
  int passes_ = 0;
  int prompt_len_ = 0;
  std::vector<std::vector<int32_t>> histories_;
};

}  // namespace earshot::policy::testing
