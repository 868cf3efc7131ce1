// runtime::Rendezvous: continuous batching without a timer, and its participation
// rule (callers stepping together share every batch).
#include "model/runtime/rendezvous.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>
#include <vector>

namespace earshot::runtime {
namespace {

struct Item {
  int value = 0;
  int batch_size = 0;  // set by the run: the size of the batch it ran in
};

void run(std::span<Item> items) {
  for (Item& i : items) i.batch_size = static_cast<int>(items.size());
}

TEST(Rendezvous, ALoneItemRunsAtOnce) {
  Rendezvous<Item> r(4);
  const Item out = r.submit(Item{7, 0}, run);
  EXPECT_EQ(out.value, 7);
  EXPECT_EQ(out.batch_size, 1);
  EXPECT_EQ(r.counts().batches, 1);
}

TEST(Rendezvous, JoinedCallersShareEveryBatch) {
  // Two callers joined for a run of five items each: every batch waits for both,
  // so the ten items run as five batches of two, whatever the threads' timing.
  Rendezvous<Item> r(4);
  std::optional<Rendezvous<Item>::Participation> a, b;
  a.emplace(r);
  b.emplace(r);
  std::vector<int> sizes_a, sizes_b;
  auto caller = [&](std::optional<Rendezvous<Item>::Participation>& me, std::vector<int>& sizes) {
    for (int k = 0; k < 5; ++k) sizes.push_back(r.submit(Item{k, 0}, run).batch_size);
    me.reset();
  };
  std::thread ta([&] { caller(a, sizes_a); });
  std::thread tb([&] { caller(b, sizes_b); });
  ta.join();
  tb.join();
  EXPECT_EQ(sizes_a, std::vector<int>(5, 2));
  EXPECT_EQ(sizes_b, std::vector<int>(5, 2));
  const auto c = r.counts();
  EXPECT_EQ(c.items, 10);
  EXPECT_EQ(c.batches, 5);
  EXPECT_EQ(c.max_batch, 2);
}

TEST(Rendezvous, ACallerThatLeavesIsNoLongerWaitedFor) {
  // B joins but never submits: A's item waits for it until B leaves, then runs alone.
  Rendezvous<Item> r(4);
  std::optional<Rendezvous<Item>::Participation> a, b;
  a.emplace(r);
  b.emplace(r);
  int size = 0;
  std::thread ta([&] {
    size = r.submit(Item{1, 0}, run).batch_size;
    a.reset();
  });
  b.reset();
  ta.join();
  EXPECT_EQ(size, 1);
}

TEST(Rendezvous, ACallerNotJoinedIsNotWaitedFor) {
  // Nobody joined: each item runs as soon as the executor is idle (the plain rule).
  Rendezvous<Item> r(2);
  EXPECT_EQ(r.submit(Item{}, run).batch_size, 1);
  EXPECT_EQ(r.submit(Item{}, run).batch_size, 1);
}

}  // namespace
}  // namespace earshot::runtime
