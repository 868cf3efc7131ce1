#include "policy/transducer/phrase_boost.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <limits>
#include <unordered_map>

namespace earshot::policy {

namespace {

// The pieces' surfaces (a word start's marker as a space) for spelling phrases.
class Speller {
 public:
  explicit Speller(const TokenPieces& pieces) {
    for (int id = 0; id < pieces.size(); ++id) {
      const std::string surface = pieces.text(id, false);
      if (surface.empty()) continue;  // control pieces, language tags
      longest_ = std::max(longest_, surface.size());
      by_surface_.emplace(surface, id);  // the first of equal surfaces
    }
  }

  // Fewest pieces; among equally few, the longest first pieces (the scan prefers them).
  std::vector<int> spell(const std::string& phrase) const {
    std::string text;
    bool space = true;
    for (unsigned char c : phrase) {
      if (std::isspace(c)) {
        space = true;
        continue;
      }
      if (space) text += ' ';
      space = false;
      text += static_cast<char>(c);
    }
    if (text.empty()) return {};
    const size_t n = text.size();
    constexpr int kNone = std::numeric_limits<int>::max();
    std::vector<int> count(n + 1, kNone), piece(n + 1, -1), from(n + 1, 0);
    count[0] = 0;
    for (size_t i = 0; i < n; ++i) {
      if (count[i] == kNone) continue;
      for (size_t len = std::min(longest_, n - i); len >= 1; --len) {
        const auto it = by_surface_.find(text.substr(i, len));
        if (it == by_surface_.end() || count[i] + 1 >= count[i + len]) continue;
        count[i + len] = count[i] + 1;
        piece[i + len] = it->second;
        from[i + len] = static_cast<int>(i);
      }
    }
    if (count[n] == kNone) return {};
    std::vector<int> out;
    for (size_t at = n; at > 0; at = static_cast<size_t>(from[at])) out.push_back(piece[at]);
    std::reverse(out.begin(), out.end());
    return out;
  }

 private:
  std::unordered_map<std::string, int> by_surface_;
  size_t longest_ = 0;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Of two bonuses for one piece, the stronger: positive over negative, then the larger magnitude.
float stronger(float a, float b) {
  if ((a > 0) != (b > 0)) return a > 0 ? a : b;
  return std::abs(a) >= std::abs(b) ? a : b;
}

}  // namespace

std::shared_ptr<const PhraseBoost> PhraseBoost::for_keyterms(
    const Keyterms& keyterms, const TokenPieces& pieces, float bonus,
    const std::function<void(const std::string&)>& on_warning) {
  if (keyterms.empty()) return nullptr;
  std::vector<std::string> skipped;
  std::shared_ptr<const PhraseBoost> boost = build(keyterms.phrases(), pieces, bonus, &skipped);
  if (!skipped.empty() && on_warning) {
    std::string names;
    for (const std::string& s : skipped) names += (names.empty() ? "'" : ", '") + s + "'";
    on_warning("keyterms no piece sequence of the model spells (not boosted): " + names);
  }
  return boost;
}

std::vector<int> spell_phrase(const std::string& text, const TokenPieces& pieces) {
  return Speller(pieces).spell(text);
}

int PhraseBoost::child(int node, int piece) const {
  const auto& c = nodes_[static_cast<size_t>(node)].children;
  const auto it = std::lower_bound(c.begin(), c.end(), std::make_pair(piece, -1));
  return it != c.end() && it->first == piece ? it->second : -1;
}

void PhraseBoost::insert(const std::vector<int>& pieces, float bonus) {
  int node = 0;
  for (int piece : pieces) {
    int next = child(node, piece);
    if (next < 0) {
      next = static_cast<int>(nodes_.size());
      Node n;
      n.parent = node;
      n.bonus = bonus;
      nodes_.push_back(n);
      auto& c = nodes_[static_cast<size_t>(node)].children;
      c.insert(std::lower_bound(c.begin(), c.end(), std::make_pair(piece, -1)), {piece, next});
    } else {
      nodes_[static_cast<size_t>(next)].bonus = stronger(nodes_[static_cast<size_t>(next)].bonus, bonus);
    }
    node = next;
  }
  nodes_[static_cast<size_t>(node)].end = true;
}

// Scores from the root, fail links (breadth first), then every state's arcs: the
// pieces that lead anywhere but the root, found along the fail chain, each
// scoring what the new match's unconfirmed part adds less what the old one's loses.
void PhraseBoost::link() {
  std::deque<int> queue;
  std::vector<int> order;
  for (const auto& [piece, c] : nodes_[0].children) {
    nodes_[static_cast<size_t>(c)].fail = 0;
    queue.push_back(c);
  }
  while (!queue.empty()) {
    const int n = queue.front();
    queue.pop_front();
    order.push_back(n);
    Node& node = nodes_[static_cast<size_t>(n)];
    const Node& parent = nodes_[static_cast<size_t>(node.parent)];
    node.score = parent.score + node.bonus;
    // Kept whatever follows: the deepest whole phrase on the path, or one the path
    // ends in (a fail link's output: "the earshot" ends in the phrase "earshot").
    const Node& fail = nodes_[static_cast<size_t>(node.fail)];
    node.output = node.end ? node.score : fail.output;
    node.confirmed = std::max(parent.confirmed, node.output);
    for (const auto& [piece, c] : node.children) {
      int f = node.fail;
      while (f != 0 && child(f, piece) < 0) f = nodes_[static_cast<size_t>(f)].fail;
      const int target = child(f, piece);
      nodes_[static_cast<size_t>(c)].fail = target >= 0 && target != c ? target : 0;
      queue.push_back(c);
    }
  }
  auto partial = [&](int n) { return nodes_[static_cast<size_t>(n)].score - nodes_[static_cast<size_t>(n)].confirmed; };
  auto arrive = [&](int n) {
    const Node& node = nodes_[static_cast<size_t>(n)];
    return node.score - nodes_[static_cast<size_t>(node.parent)].confirmed;
  };
  order.insert(order.begin(), 0);
  for (int s : order) {
    std::vector<std::pair<int, int>> reach;  // (piece, node), the deepest match first
    for (int f = s;; f = nodes_[static_cast<size_t>(f)].fail) {
      for (const auto& [piece, c] : nodes_[static_cast<size_t>(f)].children)
        if (std::none_of(reach.begin(), reach.end(), [&](const auto& r) { return r.first == piece; }))
          reach.emplace_back(piece, c);
      if (f == 0) break;
    }
    std::sort(reach.begin(), reach.end());
    std::vector<Arc>& arcs = nodes_[static_cast<size_t>(s)].arcs;
    for (const auto& [piece, c] : reach) arcs.push_back({piece, static_cast<float>(arrive(c) - partial(s)), c});
  }
}

std::shared_ptr<const PhraseBoost> PhraseBoost::build(const std::vector<Keyterm>& phrases, const TokenPieces& pieces,
                                                      float bonus, std::vector<std::string>* skipped) {
  auto boost = std::shared_ptr<PhraseBoost>(new PhraseBoost());
  boost->nodes_.emplace_back();  // the root
  const Speller speller(pieces);
  std::vector<std::vector<int>> seen;
  for (const Keyterm& phrase : phrases) {
    if (phrase.weight == 0) continue;
    bool spelt = false;
    for (const std::string& form : {phrase.text, lower(phrase.text)}) {
      std::vector<int> spelling = speller.spell(form);
      if (spelling.empty()) continue;
      spelt = true;
      if (std::find(seen.begin(), seen.end(), spelling) != seen.end()) continue;
      boost->insert(spelling, bonus * static_cast<float>(phrase.weight));
      seen.push_back(std::move(spelling));
      ++boost->phrases_;
    }
    if (!spelt && skipped) skipped->push_back(phrase.text);
  }
  if (boost->phrases_ == 0) return nullptr;
  boost->link();
  return boost;
}

std::span<const TokenBoost::Arc> PhraseBoost::arcs(int state) const {
  return nodes_.at(static_cast<size_t>(state)).arcs;
}

float PhraseBoost::leave(int state) const {
  const Node& n = nodes_.at(static_cast<size_t>(state));
  return static_cast<float>(n.confirmed - n.score);
}

}  // namespace earshot::policy
