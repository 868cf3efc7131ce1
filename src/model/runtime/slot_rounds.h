// The rounds in which several streams' rows go through one llama context whose
// sequences are the streams' slots (llm::BatchedLlamaModel's translation
// sessions, qwen3asr::SharedContext's streams). With kv_unified off, libllama
// evaluates several sequences in one ubatch only as the same number of rows from
// each of a run of consecutive sequence ids (its split_equal), so a batch goes
// in rounds: the first run of consecutive slots with rows left, each giving as
// many rows as all of them have left, at most round_rows rows in all.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace earshot::runtime {

struct SlotRound {
  std::vector<std::size_t> members;  // indices into the batch, in slot order
  int rows = 0;                      // rows each member gives (0: the batch is done)
};

// The next round of a batch: order lists the items by ascending slot, slot(i) is
// item i's slot and remaining(i) its rows left (0: done, or failed); round_rows >= 1.
template <typename Slot, typename Remaining>
SlotRound next_slot_round(std::span<const std::size_t> order, Slot&& slot, Remaining&& remaining, int round_rows) {
  SlotRound round;
  for (std::size_t i : order) {
    if (remaining(i) <= 0) continue;
    if (!round.members.empty() && slot(i) != slot(round.members.back()) + 1) break;
    if (static_cast<int>(round.members.size()) == round_rows) break;
    round.members.push_back(i);
  }
  if (round.members.empty()) return round;
  round.rows = round_rows / static_cast<int>(round.members.size());
  for (std::size_t i : round.members) round.rows = std::min(round.rows, static_cast<int>(remaining(i)));
  return round;
}

}  // namespace earshot::runtime
