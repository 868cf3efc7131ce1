#include "session/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "../support/wait.h"
#include "common/pass_stop.h"
#include "common/pass_threads.h"
#include "fakes.h"
#include "protocol/wlk/projection.h"

namespace earshot::session {
namespace {

// The fakes and audio builders of fakes.h.
using namespace earshot::testing;

// The lines these tests assert are WhisperLiveKit's projection of the session's events.
using protocol::wlk::format_protocol_time;
using protocol::wlk::Line;
using protocol::wlk::Snapshot;
Snapshot snapshot(const StreamSession& session) { return protocol::wlk::snapshot_of(session); }

std::string text_of(const Snapshot& snap) {
  std::string out;
  for (const Line& l : snap.lines)
    out += std::to_string(l.speaker) + l.text + "@" + format_protocol_time(l.start) + "\n";
  return out;
}

std::vector<float> clip(int variant) {
  return concat({tone(0.6 + 0.1 * variant, 0.05f * static_cast<float>(variant + 1)), silence(5.5),
                 tone(1.7, 0.02f * static_cast<float>(variant + 2))});
}

std::string run_alone(const std::vector<float>& audio) {
  StreamSession session(std::make_unique<FakeProcessor>(), std::make_unique<FakeVad>(), {});
  session.push_audio(audio);
  session.end_of_stream();
  while (session.has_work()) session.step();
  return text_of(snapshot(session));
}

void wait_done(const std::vector<std::shared_ptr<StreamSession>>& sessions) {
  for (auto& s : sessions) {
    while (!s->done()) std::this_thread::yield();
  }
}

TEST(Scheduler, ManySessionsAtOnceEachEqualToRunningAlone) {
  constexpr int kSessions = 12;
  Scheduler scheduler(3);
  std::vector<std::shared_ptr<StreamSession>> sessions;
  for (int i = 0; i < kSessions; ++i)
    sessions.push_back(std::make_shared<StreamSession>(std::make_unique<FakeProcessor>(), std::make_unique<FakeVad>(),
                                                       StreamOptions{}));
  // Interleave pushes across sessions like a busy server.
  std::vector<std::vector<float>> clips;
  for (int i = 0; i < kSessions; ++i) clips.push_back(clip(i % 5));
  for (size_t offset = 0;; offset += 1234) {
    bool any = false;
    for (int i = 0; i < kSessions; ++i) {
      const auto& c = clips[static_cast<size_t>(i)];
      if (offset >= c.size()) continue;
      any = true;
      sessions[static_cast<size_t>(i)]->push_audio(
          std::span<const float>(c).subspan(offset, std::min<size_t>(1234, c.size() - offset)));
      scheduler.notify(sessions[static_cast<size_t>(i)]);
    }
    if (!any) break;
  }
  for (auto& s : sessions) {
    s->end_of_stream();
    scheduler.notify(s);
  }
  wait_done(sessions);
  for (int i = 0; i < kSessions; ++i) {
    Snapshot snap = snapshot(*sessions[static_cast<size_t>(i)]);
    EXPECT_TRUE(snap.finished);
    EXPECT_EQ(text_of(snap), run_alone(clips[static_cast<size_t>(i)])) << "session " << i;
    EXPECT_NE(text_of(snap), "");
  }
}

TEST(Scheduler, SessionsTakeTurnsOneStepEach) {
  std::mutex mutex;
  std::vector<char> order;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto make = [&](char name, bool gate) {
    FakeProcessor::Hooks hooks;
    hooks.on_process = [&, name, gate, first = std::make_shared<bool>(true)] {
      if (gate && *first) released.wait();  // holds A's first step until B is queued
      *first = false;
      std::lock_guard lock(mutex);
      order.push_back(name);
    };
    StreamOptions options;
    options.max_step_seconds = 1.0;
    return std::make_shared<StreamSession>(std::make_unique<FakeProcessor>(hooks), nullptr, options);
  };
  auto a = make('A', true);
  auto b = make('B', false);
  Scheduler scheduler(1);
  a->push_audio(tone(3.0, 0.1f));
  b->push_audio(tone(3.0, 0.1f));
  a->end_of_stream();
  b->end_of_stream();
  scheduler.notify(a);
  scheduler.notify(b);
  release.set_value();
  wait_done({a, b});
  // Three 1 s steps each (the third one flushes), alternating.
  EXPECT_EQ(std::string(order.begin(), order.end()), "ABABAB");
}

TEST(Scheduler, NotifyWithoutWorkQueuesNothing) {
  Scheduler scheduler(1);
  auto s = std::make_shared<StreamSession>(std::make_unique<FakeProcessor>(), nullptr, StreamOptions{});
  s->push_audio(tone(0.01, 0.1f));  // below the minimum step
  scheduler.notify(s);
  EXPECT_EQ(scheduler.queued(), 0u);
  EXPECT_FALSE(s->has_work());
}

// busy() counts sessions queued or being stepped; wait_busy() wakes on every
// step and on wake_waiters(), wait_idle() when nothing is busy.
TEST(Scheduler, BusyCountsSessionsQueuedOrSteppedAndWaitIdleSeesTheEnd) {
  earshot::testing::Gate gate;
  earshot::testing::Counter entered;
  FakeProcessor::Hooks hooks;
  hooks.on_process = [&] {
    entered.add();
    EXPECT_TRUE(gate.wait());
  };
  auto a = std::make_shared<StreamSession>(std::make_unique<FakeProcessor>(hooks), nullptr, StreamOptions{});
  auto b = std::make_shared<StreamSession>(std::make_unique<FakeProcessor>(), nullptr, StreamOptions{});
  Scheduler scheduler(1);
  EXPECT_EQ(scheduler.busy(), 0u);
  a->push_audio(tone(0.5, 0.1f));
  a->end_of_stream();
  b->push_audio(tone(0.5, 0.1f));
  b->end_of_stream();
  scheduler.notify(a);
  ASSERT_TRUE(entered.wait_for_at_least(1)) << "a's step never started";
  scheduler.notify(b);
  EXPECT_EQ(scheduler.busy(), 2u);  // a running (held at the gate), b queued
  EXPECT_EQ(scheduler.queued(), 1u);
  // A condition on something besides busy() is re-checked on wake_waiters().
  std::atomic<bool> flag = false;
  std::thread waker([&] {
    flag = true;
    scheduler.wake_waiters();
  });
  const auto guard = std::chrono::steady_clock::now() + earshot::testing::kHangGuard;
  EXPECT_TRUE(scheduler.wait_busy([&](size_t busy) { return busy == 2 && flag.load(); }, guard));
  waker.join();
  gate.open();
  EXPECT_TRUE(scheduler.wait_idle(guard)) << "the sessions never finished";
  EXPECT_EQ(scheduler.busy(), 0u);
  EXPECT_TRUE(a->done());
  EXPECT_TRUE(b->done());
}

// A session whose next step may end a turn (a finalize waiting, an end of speech
// pending) goes before the sessions queued earlier; the rest keep their order.
TEST(Scheduler, AnUrgentSessionGoesBeforeTheQueue) {
  std::mutex mutex;
  std::vector<char> order;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  earshot::testing::Counter g_entered;
  auto make = [&](char name) {
    FakeProcessor::Hooks hooks;
    hooks.on_process = [&, name, first = std::make_shared<bool>(true)] {
      if (name == 'G' && *first) {  // holds the worker until the others are queued
        g_entered.add();
        released.wait();
      }
      *first = false;
      std::lock_guard lock(mutex);
      order.push_back(name);
    };
    StreamOptions options;
    options.max_step_seconds = 1.0;
    return std::make_shared<StreamSession>(std::make_unique<FakeProcessor>(hooks), nullptr, options);
  };
  auto g = make('G'), b = make('B'), c = make('C'), u = make('U');
  Scheduler scheduler(1);
  g->push_audio(tone(2.0, 0.1f));
  scheduler.notify(g);
  ASSERT_TRUE(g_entered.wait_for_at_least(1)) << "g's step never started";  // the others queue behind it
  for (auto& s : {b, c, u}) {
    s->push_audio(tone(1.0, 0.1f));
    scheduler.notify(s);
  }
  EXPECT_FALSE(u->urgent());
  u->finalize();  // queued before it became urgent: it moves up
  scheduler.notify(u);
  release.set_value();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mutex);
    return order.size() >= 5;
  }));
  std::lock_guard lock(mutex);
  EXPECT_EQ(std::string(order.begin(), order.begin() + 5), "GUBCG");
}

// A processor whose first regular pass is a stoppable graph that runs until its
// listener stops it (common/pass_stop.h): between "nodes" it asks the listener.
class PassUntilStopped : public FakeProcessor {
 public:
  using FakeProcessor::FakeProcessor;
  std::atomic<bool> in_pass{false};
  std::atomic<int> stopped{0};
  ProcessResult process(bool is_last) override {
    if (!is_last && first_) {
      first_ = false;
      StoppablePass stoppable;
      in_pass = true;
      const bool stop = eventually([] {
        const std::function<bool()>* listener = pass_stop_listener();
        return listener && pass_listener_says_stop(*listener);
      });
      in_pass = false;
      if (stop) {
        ++stopped;
        throw PassStopped();
      }
    }
    return FakeProcessor::process(is_last);
  }

 private:
  bool first_ = true;
};

// A speaker stops while their session waits behind another's pass on the only
// worker: the worker's pass lets the waiting session's VAD hear, finds its end,
// stops its own pass and steps the urgent session first. The stopped session
// loses nothing: its words are those of the same audio stepped alone.
TEST(Scheduler, AnEndHeardWhileWaitingStopsAnotherPassAndGoesFirst) {
  std::mutex mutex;
  std::string order;
  auto hooks = [&](char name) {
    FakeProcessor::Hooks h;
    h.on_process = [&, name] {
      std::lock_guard lock(mutex);
      order += name;
    };
    return h;
  };
  auto a_processor = std::make_unique<PassUntilStopped>(hooks('A'));
  PassUntilStopped* a_pass = a_processor.get();
  auto a = std::make_shared<StreamSession>(std::move(a_processor), std::make_unique<FakeVad>(), StreamOptions{});
  auto b_processor = std::make_unique<FakeProcessor>(hooks('B'));
  FakeProcessor* b_model = b_processor.get();
  auto b = std::make_shared<StreamSession>(std::move(b_processor), std::make_unique<FakeVad>(), StreamOptions{});
  Scheduler scheduler(1);
  b->push_audio(tone(0.992, 0.1f));  // b is in speech
  scheduler.notify(b);
  ASSERT_TRUE(scheduler.wait_idle(std::chrono::steady_clock::now() + kHangGuard));
  const std::vector<float> a_audio = tone(1.504, 0.2f);
  a->push_audio(a_audio);
  scheduler.notify(a);
  ASSERT_TRUE(eventually([&] { return a_pass->in_pass.load(); })) << "a's pass never started";
  b->push_audio(silence(0.128));  // b's speaker stopped: its VAD's end, while b waits
  scheduler.notify(b);
  ASSERT_TRUE(scheduler.wait_idle(std::chrono::steady_clock::now() + kHangGuard));
  EXPECT_EQ(a_pass->stopped.load(), 1);
  EXPECT_EQ(a->stats().stopped_passes, 1u);
  EXPECT_GE(b_model->passes(), 2);  // b's flush
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(order, "BB");  // b's first pass and its flush; a's pass stopped unfinished
  }
  for (auto& s : {a, b}) {
    s->end_of_stream();
    scheduler.notify(s);
  }
  ASSERT_TRUE(scheduler.wait_idle(std::chrono::steady_clock::now() + kHangGuard));
  {
    std::lock_guard lock(mutex);
    EXPECT_NE(order.find('A'), std::string::npos) << order;  // a's audio, flushed at its end
  }
  auto alone = std::make_unique<FakeProcessor>();
  StreamSession plain(std::move(alone), std::make_unique<FakeVad>(), StreamOptions{});
  plain.push_audio(a_audio);
  plain.step();
  plain.end_of_stream();
  while (plain.has_work()) plain.step();
  EXPECT_EQ(text_of(snapshot(*a)), text_of(snapshot(plain)));
  EXPECT_NE(text_of(snapshot(*a)).find(" w"), std::string::npos);
}

// Without a thread policy a step decides nothing: each backend keeps its own.
TEST(Scheduler, WithoutAThreadPolicyPassesKeepTheirBackendsThreads) {
  std::atomic<int> seen = -1;
  FakeProcessor::Hooks hooks;
  hooks.on_process = [&] { seen = pass_threads(); };
  auto a = std::make_shared<StreamSession>(std::make_unique<FakeProcessor>(hooks), nullptr, StreamOptions{});
  Scheduler scheduler(2);
  a->push_audio(tone(0.5, 0.1f));
  a->end_of_stream();
  scheduler.notify(a);
  ASSERT_TRUE(scheduler.wait_idle(std::chrono::steady_clock::now() + earshot::testing::kHangGuard));
  EXPECT_EQ(seen.load(), 0);
  EXPECT_EQ(scheduler.lent_steps(), 0);
}

// A step with nothing waiting behind it borrows the idle workers' cores; a
// session queued meanwhile waits for them to come back, so the passes running at
// once never hold more than the workers' cores (workers x threads).
TEST(Scheduler, ALoneStepBorrowsTheIdleCoresAndNoneAreOversubscribed) {
  earshot::testing::Gate gate;
  earshot::testing::Counter entered;
  std::atomic<int> in_use = 0, most = 0, first_threads = 0;
  std::atomic<bool> a_held = false;
  auto make = [&](bool hold_first) {
    FakeProcessor::Hooks hooks;
    hooks.on_process = [&, hold_first, first = std::make_shared<bool>(true)] {
      const int threads = pass_threads();
      EXPECT_GE(threads, 1);
      const int now = in_use += threads;
      EXPECT_LE(now, 4) << "more threads than the workers' cores";
      int m = most.load();
      while (now > m && !most.compare_exchange_weak(m, now)) {
      }
      if (hold_first && *first) {
        first_threads = threads;
        a_held = true;
        entered.add();
        EXPECT_TRUE(gate.wait());
        a_held = false;
      } else {
        EXPECT_FALSE(a_held.load()) << "a step started while a lone step held every core";
      }
      *first = false;
      in_use -= threads;
    };
    StreamOptions options;
    options.max_step_seconds = 0.5;
    return std::make_shared<StreamSession>(std::make_unique<FakeProcessor>(hooks), nullptr, options);
  };
  auto a = make(true);
  std::vector<std::shared_ptr<StreamSession>> others = {make(false), make(false), make(false)};
  Scheduler scheduler(2, PassThreadPolicy{2, 4});
  EXPECT_EQ(scheduler.pass_threads().threads, 2);
  a->push_audio(tone(0.5, 0.1f));
  a->end_of_stream();
  scheduler.notify(a);
  ASSERT_TRUE(entered.wait_for_at_least(1)) << "a's step never started";
  EXPECT_EQ(first_threads.load(), 4);  // alone: both workers' cores
  for (auto& s : others) {
    s->push_audio(tone(2.0, 0.1f));
    s->end_of_stream();
    scheduler.notify(s);
  }
  EXPECT_EQ(scheduler.queued(), 3u);  // every one waits for the lent cores
  gate.open();
  ASSERT_TRUE(scheduler.wait_idle(std::chrono::steady_clock::now() + earshot::testing::kHangGuard));
  for (auto& s : others) EXPECT_TRUE(s->done());
  EXPECT_LE(most.load(), 4);
  EXPECT_GE(scheduler.lent_steps(), 1);
}

}  // namespace
}  // namespace earshot::session
