// Token selection strategies for one decoder pass over an AsrDecoder: greedy
// (one sequence) and beam search (n sequences of the same AsrDecoder, kept in
// step with AsrDecoder::reorder). The policy runs the decoder and hands each
// step's log-probabilities here; the strategy picks the next tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace earshot::policy {

// One hypothesis: tokens chosen in this pass, the attended encoder frame each
// was chosen at, and their log-probabilities.
struct Sequence {
  std::vector<int32_t> tokens;
  std::vector<int> frames;
  std::vector<float> logprobs;
  double sum_logprob = 0;
};

struct DecoderStep {
  // Sequence i now continues from the previous sequence source[i]; the caller
  // applies the same permutation to the AsrDecoder cache and its own per-sequence state.
  std::vector<int> source;
  // True when decoding is over: EOT chosen (greedy) or enough finished beams.
  bool completed = false;
};

class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;
  virtual int n_sequences() const = 0;
  // Starts a new pass: every sequence empty.
  virtual void reset() = 0;
  // logprobs: [n_sequences][n_vocab] log-softmax with suppressed tokens at -inf;
  // frames[s]: the frame sequence s's last fed token attended to, recorded with the token chosen from it.
  virtual DecoderStep update(std::span<const float> logprobs, int n_vocab, std::span<const int> frames) = 0;
  // Live sequences, best first; sequences()[i].tokens.back() is what sequence i feeds next.
  virtual const std::vector<Sequence>& sequences() const = 0;
  // The result once completed: the best finished sequence with its EOT stripped.
  virtual Sequence best() const = 0;
};

class GreedyDecoder : public TokenDecoder {
 public:
  explicit GreedyDecoder(int32_t eot) : eot_(eot) { reset(); }
  int n_sequences() const override { return 1; }
  void reset() override;
  DecoderStep update(std::span<const float> logprobs, int n_vocab, std::span<const int> frames) override;
  const std::vector<Sequence>& sequences() const override { return sequences_; }
  Sequence best() const override;

 private:
  int32_t eot_;
  std::vector<Sequence> sequences_;
};

// Beam search ranked by the sum of log-probabilities. Each step every live beam
// proposes its n_beams + 1 best tokens; the best n_beams non-EOT candidates stay
// live, EOT candidates ranked above them finish. Completed once n_beams have finished.
class BeamSearchDecoder : public TokenDecoder {
 public:
  BeamSearchDecoder(int32_t eot, int n_beams);
  int n_sequences() const override { return n_beams_; }
  void reset() override;
  DecoderStep update(std::span<const float> logprobs, int n_vocab, std::span<const int> frames) override;
  const std::vector<Sequence>& sequences() const override { return sequences_; }
  Sequence best() const override;

 private:
  int32_t eot_;
  int n_beams_;
  std::vector<Sequence> sequences_;
  std::vector<Sequence> finished_;
};

// log-softmax of one row of logits in place; entries at -inf stay -inf.
void log_softmax(std::span<float> row);
// Sets the given tokens' logits to -inf (ids outside the row are ignored).
void suppress(std::span<float> row, std::span<const int32_t> tokens);

}  // namespace earshot::policy
