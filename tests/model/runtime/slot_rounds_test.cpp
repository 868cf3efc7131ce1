// runtime::next_slot_round: the rounds in which streams on the slots of one llama
// context go through it (libllama's equal rows from consecutive sequences).
#include "model/runtime/slot_rounds.h"

#include <gtest/gtest.h>

#include <vector>

namespace earshot::runtime {
namespace {

struct Batch {
  std::vector<int> slots, rows;
  std::vector<std::size_t> order;  // items by slot
  std::vector<int> done;

  // Every round until the batch is done: its members' slots and its rows each.
  std::vector<std::pair<std::vector<int>, int>> rounds(int round_rows) {
    done.assign(rows.size(), 0);
    std::vector<std::pair<std::vector<int>, int>> out;
    auto remaining = [&](std::size_t i) { return rows[i] - done[i]; };
    for (;;) {
      const SlotRound r = next_slot_round(
          order, [&](std::size_t i) { return slots[i]; }, remaining, round_rows);
      if (r.rows == 0) {
        EXPECT_TRUE(r.members.empty());
        return out;
      }
      std::vector<int> members;
      for (std::size_t i : r.members) {
        members.push_back(slots[i]);
        done[i] += r.rows;
      }
      out.emplace_back(members, r.rows);
    }
  }
};

using Rounds = std::vector<std::pair<std::vector<int>, int>>;

TEST(SlotRounds, ConsecutiveSlotsGiveEqualRowsUntilEachIsIn) {
  // Slots 0, 1, 2 with 5, 3 and 7 rows: 3 each; then slot 1 is done and 0 and 2
  // are not consecutive: slot 0's last 2 alone, then slot 2's last 4.
  Batch b{{0, 1, 2}, {5, 3, 7}, {0, 1, 2}, {}};
  EXPECT_EQ(b.rounds(512), (Rounds{{{0, 1, 2}, 3}, {{0}, 2}, {{2}, 4}}));
}

TEST(SlotRounds, TheOrderIsBySlotWhateverTheItemsOrder) {
  // Items listed out of slot order; `order` puts them in it.
  Batch b{{3, 1, 2}, {2, 4, 2}, {1, 2, 0}, {}};
  EXPECT_EQ(b.rounds(512), (Rounds{{{1, 2, 3}, 2}, {{1}, 2}}));
}

TEST(SlotRounds, ARoundHoldsAtMostRoundRows) {
  // Three streams of 10 rows in rounds of 4 rows: 1 row each (4 / 3), and at most 4 members.
  Batch b{{0, 1, 2}, {10, 10, 2}, {0, 1, 2}, {}};
  const Rounds r = b.rounds(4);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r.front(), (std::pair<std::vector<int>, int>{{0, 1, 2}, 1}));
  for (const auto& [members, rows] : r) EXPECT_LE(static_cast<int>(members.size()) * rows, 4);
  Batch many{{0, 1, 2, 3, 4}, {1, 1, 1, 1, 1}, {0, 1, 2, 3, 4}, {}};
  EXPECT_EQ(many.rounds(2), (Rounds{{{0, 1}, 1}, {{2, 3}, 1}, {{4}, 1}}));
}

TEST(SlotRounds, AnEmptyOrDoneBatchHasNoRound) {
  Batch none{{}, {}, {}, {}};
  EXPECT_TRUE(none.rounds(8).empty());
  Batch done{{0, 1}, {0, 0}, {0, 1}, {}};
  EXPECT_TRUE(done.rounds(8).empty());
}

}  // namespace
}  // namespace earshot::runtime
