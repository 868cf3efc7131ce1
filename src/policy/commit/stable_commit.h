// The stable/unstable commit layer for models that revise their hypothesis
// (WhisperLiveKit #426): each pass re-decodes the whole segment, and the text the last K
// passes agree on, less the last N units, is committed. Committed text is
// append-only: once returned it is never returned again, and finalisation gives
// only what was not shown (or says that a re-decode corrected the prefix).
// Pure logic over text; any backend that re-decodes a window can use it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "policy/commit/text_units.h"

namespace earshot::policy::commit {

enum class UnitKind {
  kText,   // words for spaced scripts, characters for CJK and kana (text_units.h)
  kToken,  // the decoder's token pieces (Hypothesis::tokens): the same budget for every script
};

struct CommitConfig {
  size_t hold_back = 2;        // N: the last units of a hypothesis are never committed while the segment runs
  size_t agreeing_passes = 2;  // K: a unit is committed once the last K hypotheses agree up to it
  UnitKind units = UnitKind::kText;
  void validate() const;  // throws earshot::Error(kInvalidArgument)
};

// One pass's output for the whole segment.
struct Hypothesis {
  std::string text;
  std::vector<std::string> tokens;  // decoded token pieces; needed for UnitKind::kToken
  // The backend's own stable prefix, where it has one: it wins over the
  // agreement of passes (no LCP, no hold-back), being the model's own claim.
  std::optional<std::string> native_stable;
};

struct CommitUpdate {
  std::string committed;    // newly committed text: append it to what was committed before
  std::string provisional;  // the uncommitted tail of this hypothesis
};

struct FinalUpdate {
  std::string append;  // what to append to the committed text so it reads as the final text
  // The committed text is not a prefix of the final text: a re-decode changed
  // words already shown. `text` is then the corrected segment for consumers
  // that can replace a line; `append` is the final text past as many units as
  // were committed, for append-only consumers.
  bool corrected = false;
  std::string text;  // the final text of the segment
};

class StableCommitter {
 public:
  explicit StableCommitter(CommitConfig config = {});

  CommitUpdate update(const Hypothesis& hypothesis);
  // The segment ends with `final_hypothesis` (its last pass); the committer is
  // reset for the next segment.
  FinalUpdate finalize(const Hypothesis& final_hypothesis);
  void reset();

  const std::string& committed_text() const { return committed_text_; }
  size_t committed_units() const { return committed_.size(); }
  size_t revisions() const { return revisions_; }  // passes that contradicted committed text

 private:
  std::vector<TextUnit> units_of(const Hypothesis& h) const;
  bool extends_committed(const std::vector<TextUnit>& units) const;
  void commit_to(const std::vector<TextUnit>& units, size_t end, CommitUpdate& update);

  CommitConfig config_;
  std::vector<std::vector<TextUnit>> history_;  // the last K hypotheses, oldest first
  std::vector<TextUnit> committed_;
  std::string committed_text_;
  size_t revisions_ = 0;
};

}  // namespace earshot::policy::commit
