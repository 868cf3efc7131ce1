#include "policy/commit/stable_commit.h"

#include <algorithm>

#include "common/error.h"
#include "policy/text_utils.h"

namespace earshot::policy::commit {

void CommitConfig::validate() const {
  if (agreeing_passes < 1) {
    throw Error(ErrorCode::kInvalidArgument, "the commit layer needs at least 1 agreeing pass (got 0)");
  }
}

StableCommitter::StableCommitter(CommitConfig config) : config_(config) { config_.validate(); }

std::vector<TextUnit> StableCommitter::units_of(const Hypothesis& h) const {
  if (config_.units == UnitKind::kText) return split_text_units(h.text);
  if (h.tokens.empty() && !h.text.empty()) {
    throw Error(ErrorCode::kInternal, "token-level commits need the hypothesis's token pieces");
  }
  return token_units(h.tokens);
}

bool StableCommitter::extends_committed(const std::vector<TextUnit>& units) const {
  if (units.size() < committed_.size()) return false;
  for (size_t i = 0; i < committed_.size(); ++i) {
    if (units[i].key != committed_[i].key) return false;
  }
  return true;
}

void StableCommitter::commit_to(const std::vector<TextUnit>& units, size_t end, CommitUpdate& update) {
  // A token piece cut inside a UTF-8 character (byte-level BPE) waits for the rest.
  while (end > committed_.size() && !is_valid_utf8(join_units(units, committed_.size(), end))) --end;
  for (size_t i = committed_.size(); i < end; ++i) {
    update.committed += units[i].text;
    committed_.push_back(units[i]);
  }
  committed_text_ += update.committed;
}

CommitUpdate StableCommitter::update(const Hypothesis& hypothesis) {
  std::vector<TextUnit> units = units_of(hypothesis);
  CommitUpdate update;
  const bool consistent = extends_committed(units);
  if (!consistent) ++revisions_;

  if (hypothesis.native_stable) {
    // The units whose text the native prefix covers entirely (a word it cuts stays provisional).
    if (consistent) {
      const std::string& native = *hypothesis.native_stable;
      size_t end = 0, covered = 0;
      while (end < units.size() && covered + units[end].text.size() <= native.size() &&
             native.compare(covered, units[end].text.size(), units[end].text) == 0) {
        covered += units[end].text.size();
        ++end;
      }
      if (end > committed_.size()) commit_to(units, end, update);
    }
  } else if (consistent) {
    history_.push_back(units);
    if (history_.size() > config_.agreeing_passes) history_.erase(history_.begin());
    if (history_.size() == config_.agreeing_passes) {
      size_t stable = units.size();
      for (const auto& past : history_) {
        size_t n = 0;
        while (n < stable && n < past.size() && past[n].key == units[n].key) ++n;
        stable = n;
      }
      const size_t held = units.size() > config_.hold_back ? units.size() - config_.hold_back : 0;
      const size_t end = std::min(stable, held);
      if (end > committed_.size()) commit_to(units, end, update);
    }
  }
  // A hypothesis that contradicts committed text does not join the agreement:
  // agreeing with it would commit units positioned against a different prefix.
  if (!consistent && !hypothesis.native_stable) history_.clear();

  update.provisional = join_units(units, std::min(committed_.size(), units.size()), units.size());
  return update;
}

FinalUpdate StableCommitter::finalize(const Hypothesis& final_hypothesis) {
  const std::vector<TextUnit> units = units_of(final_hypothesis);
  FinalUpdate out;
  out.text = join_units(units, 0, units.size());
  out.corrected = !extends_committed(units);
  out.append = join_units(units, std::min(committed_.size(), units.size()), units.size());
  reset();
  return out;
}

void StableCommitter::reset() {
  history_.clear();
  committed_.clear();
  committed_text_.clear();
}

}  // namespace earshot::policy::commit
