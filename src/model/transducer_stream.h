// What the transducer policies (policy/transducer/) need from a transducer ASR
// model (FastConformer-TDT/RNN-T...), for one stream, in model-neutral terms:
// audio in, non-blank tokens out with their encoder frames and durations, the
// vocabulary's word structure, and the prediction network's state carried from
// call to call. The transducer family implements it
// (model/fastconformer/transducer_streams.h); the model behind it is shared and
// immutable, a stream object is used by one thread at a time.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace earshot {

// One non-blank token of greedy decoding.
struct TokenEmission {
  int token = 0;
  int frame = 0;       // encoder frame it was emitted at, from the start of what was decoded
  int duration = 0;    // frames it spans (TDT: the predicted duration; RNN-T: 1)
  float log_prob = 0;  // log-softmax over the pieces and blank
};

// The vocabulary as words are built from it.
class TokenPieces {
 public:
  virtual ~TokenPieces() = default;
  // The token's text: a word start's marker becomes a space, except at the start
  // of a text (first_in_text); "" for control pieces and language tags.
  virtual std::string text(int token, bool first_in_text) const = 0;
  // Whether the token starts a word (and so completes the one before).
  virtual bool starts_word(int token) const = 0;
  // A language tag token's locale ("de-DE", "auto"); "" for any other token.
  virtual std::string language_tag(int token) const = 0;
  // The number of pieces (token ids 0 .. size() - 1; blank is not one).
  virtual int size() const = 0;
};

// Phrase boosting (context biasing), as a decoder sees it: a score added to a
// piece's log-probability while decoding, read off a state each hypothesis
// carries (state 0: no phrase under way). policy/transducer/phrase_boost.h
// builds one from a stream's keyterms: a token trie with a bonus per matched
// piece, taken back when the match breaks off, as sherpa-onnx's hotwords and
// NeMo's boosting tree do. Immutable; shared by the hypotheses of one stream.
class TokenBoost {
 public:
  struct Arc {
    int token = 0;    // a piece
    float score = 0;  // added to the piece's log-probability
    int next = 0;     // the state after it
  };
  virtual ~TokenBoost() = default;
  // The pieces that move `state` anywhere but back to 0, sorted by token.
  virtual std::span<const Arc> arcs(int state) const = 0;
  // Any other piece from `state`: the score it adds (a partial match's bonus taken
  // back, so <= 0 for boosted phrases); the state after it is 0.
  virtual float leave(int state) const = 0;
  // Decoding ends in `state`: the same taking back, for a match cut short.
  virtual float finish(int state) const { return leave(state); }
};

// How a transducer stream decodes: greedy or a beam, with or without boosting.
struct TransducerDecoding {
  int beam = 1;                             // 1 = greedy
  std::shared_ptr<const TokenBoost> boost;  // null: no boosting (exactly the model's own choices)
};

// For measurement tools only (the bench's reference workload, bench/
// transducer_reference.h); no product code path installs one. It chooses each
// greedy step's output in place of the joint's argmax: the joint still runs, so
// the compute is the model's, but what it emits (and, for TDT, how far it
// skips) is the steer's. Used by one stream, on the thread that decodes it.
class TransducerSteer {
 public:
  struct Choice {
    int token = 0;           // a piece, or blank (= n_vocab)
    int duration_index = 0;  // into durations (TDT); ignored for RNN-T
  };
  virtual ~TransducerSteer() = default;
  // When the stream opens: its vocabulary (pieces 0..n_vocab-1, blank = n_vocab),
  // the TDT durations in frames (empty: RNN-T) and the encoder frame's length.
  virtual void bind(const TokenPieces& pieces, int n_vocab, const std::vector<int>& durations,
                    double frame_seconds) = 0;
  // A greedy step at encoder frame `frame` of the segment (as TokenEmission::frame).
  virtual Choice choose(int frame) = 0;
};

class TransducerStream {
 public:
  virtual ~TransducerStream() = default;
  virtual const TokenPieces& pieces() const = 0;
  virtual double frame_seconds() const = 0;  // one encoder frame
  // The prediction network's state afresh (a long pause).
  virtual void reset_state() = 0;
  // One pass over a second of silence, leaving the stream's state as it is.
  virtual void warmup() = 0;
  // Greedy or beam decoding, boosted or not, from the next pass on (a measurement
  // tool's steer, when one is bound, keeps greedy decoding).
  virtual void set_decoding(TransducerDecoding decoding) = 0;
};

// An offline model (Parakeet-TDT): a stretch of audio encoded at once.
class OfflineTransducer : public TransducerStream {
 public:
  // Encodes `audio` (16 kHz; its features normalised over it, as the model
  // expects) and decodes it greedily from the prediction network's state; frames
  // count from its first sample. keep_state: the state then stays where the
  // decoding ended, else as before the call. Audio without a feature frame
  // (NeMo's count: under 10 ms) gives nothing and runs no pass.
  virtual std::vector<TokenEmission> decode(std::span<const float> audio, bool keep_state) = 0;
};

// A cache-aware streaming model (Nemotron streaming): audio encoded in chunks as
// it arrives. A segment (audio from one push after finish() to the next finish())
// is one encoder stream: frames count from its first sample.
class StreamingTransducer : public TransducerStream {
 public:
  // The segment's next audio: the tokens of every chunk now complete.
  virtual std::vector<TokenEmission> push(std::span<const float> samples) = 0;
  // The segment ends: the tokens of the rest of its audio. The prediction
  // network's state carries into the next segment.
  virtual std::vector<TokenEmission> finish() = 0;
  // The segment's last audio and its end: push(samples) then finish(), with the
  // same tokens; a model that can encodes them in fewer passes (a flush at the
  // end of speech is then one pass, its weights read once).
  virtual std::vector<TokenEmission> finish_with(std::span<const float> samples) {
    std::vector<TokenEmission> out;
    if (!samples.empty()) out = push(samples);
    std::vector<TokenEmission> rest = finish();
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }
  // The segment may end with `samples` (a pending end of speech): encode them
  // and the segment's rest now, leaving the stream as it is; a finish_with() of
  // the same samples with nothing pushed between then only decodes (its encoder
  // pass already ran, while the VAD waited to decide). Does nothing where the
  // model cannot (the default).
  virtual void prepare_finish(std::span<const float> samples) { (void)samples; }
  // Encoder frames of the current segment decoded so far.
  virtual int frames_done() const = 0;
};

}  // namespace earshot
