// Phrase boosting for the transducers (context biasing): a stream's keyterms
// become a trie of the pieces that spell them, and while a decoder (greedy or
// beam, model/transducer) chooses pieces, each piece that continues a phrase
// gets a bonus, and a piece that breaks a phrase off takes back the bonus of
// the part matched so far: only whole phrases keep their bonus (a phrase a
// longer match ends in too; where whole phrases overlap, the larger bonus is
// kept), and a phrase cut short by the end of decoding gives it back.
// This is sherpa-onnx's hotwords / icefall's ContextGraph and NeMo's boosting
// tree, written here as an Aho-Corasick automaton over piece ids: a piece that
// breaks one phrase may start or continue another (its fail links), with the
// bonus re-counted for the new match.
//
// Scores: a phrase of weight w (Keyterm::weight: Deepgram's intensifier) gives
// bonus x w per piece; a negative weight penalises the phrase instead (taken
// back the same way when the match breaks). Phrases sharing pieces keep the
// strongest bonus for them (positive over negative).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/keyterms.h"
#include "model/transducer_stream.h"

namespace earshot::policy {

class PhraseBoost final : public TokenBoost {
 public:
  // The boost for `phrases` over a stream's pieces, `bonus` per piece at weight 1.
  // A phrase is spelt as a word start, words joined by spaces, in the fewest
  // pieces (as given and in lower case, when that differs); one no sequence of
  // pieces spells is left out and named in `skipped`. nullptr when no phrase is
  // left: decoding is then exactly the model's own.
  static std::shared_ptr<const PhraseBoost> build(const std::vector<Keyterm>& phrases, const TokenPieces& pieces,
                                                  float bonus, std::vector<std::string>* skipped = nullptr);
  // A stream's keyterms (their phrases) as build() takes them; the phrases left
  // out are named in one warning. nullptr for no keyterms.
  static std::shared_ptr<const PhraseBoost> for_keyterms(const Keyterms& keyterms, const TokenPieces& pieces,
                                                         float bonus,
                                                         const std::function<void(const std::string&)>& on_warning);

  std::span<const Arc> arcs(int state) const override;
  float leave(int state) const override;

  size_t phrases() const { return phrases_; }  // piece sequences in the trie
  int states() const { return static_cast<int>(nodes_.size()); }

 private:
  struct Node {
    std::vector<std::pair<int, int>> children;  // (piece, node), sorted
    int parent = -1;
    int fail = 0;
    float bonus = 0;       // of the piece that leads here
    double score = 0;      // bonus summed from the root
    bool end = false;      // a phrase ends here
    double output = 0;     // score of the longest whole phrase the path ends in (0: none)
    double confirmed = 0;  // what of the score is kept whatever follows
    std::vector<Arc> arcs;
  };
  int child(int node, int piece) const;
  void insert(const std::vector<int>& pieces, float bonus);
  void link();

  std::vector<Node> nodes_;
  size_t phrases_ = 0;
};

// The pieces that spell `text` (a word start first, whitespace collapsed to one
// space) in the fewest pieces; empty when none does. For tests and reports.
std::vector<int> spell_phrase(const std::string& text, const TokenPieces& pieces);

}  // namespace earshot::policy
