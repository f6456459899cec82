// A failed Redlock try releases its owner token on each node only once that node's acquire was
// answered (locks/redlock_answers.hpp): with two connections per node, a release sent at once
// could run before the acquire it was meant to undo, which then took the key for its TTL. The
// same for a kept try's straggler nodes once the hold was let go.
// And the fencing catch-up of a try that counted without a write-back round.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "locks/redlock_answers.hpp"

namespace dlock::detail {
namespace {

struct Sent {
  std::mutex mu;
  std::vector<std::size_t> nodes;
  void operator()(std::size_t i) {
    std::lock_guard lock(mu);
    nodes.push_back(i);
  }
};

TEST(AcquireAnswers, ReleasesAnsweredNodesAtOnceAndTheOthersAsTheyAnswer) {
  Sent sent;
  AcquireAnswers a(5, [&](std::size_t i) { sent(i); });
  a.answered(3);
  a.answered(0);
  EXPECT_TRUE(sent.nodes.empty()) << "nothing is released before the try is given up";
  a.release();
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{0, 3}));
  a.answered(4);  // a node still in flight when the try was given up
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{0, 3, 4}));
  a.answered(4);  // a second answer for the same node: no second release
  a.answered(9);  // no such node
  a.release();    // given up again: nothing new
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{0, 3, 4}));
  a.answered(1);
  a.answered(2);
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{0, 3, 4, 1, 2}));
}

TEST(AcquireAnswers, NothingIsReleasedForATryThatIsKept) {
  Sent sent;
  AcquireAnswers a(3, [&](std::size_t i) { sent(i); });
  for (std::size_t i = 0; i < 3; ++i) a.answered(i);
  EXPECT_TRUE(sent.nodes.empty());
}

// A try kept as a hold: a straggler that answers while the hold is held needs nothing (the
// hold's release comes after its answer); one that answers after the hold was let go is
// released, since the hold's release may have overtaken its acquire.
TEST(AcquireAnswers, AStragglerAnsweringAfterTheKeptHoldWasLetGoIsReleased) {
  Sent sent;
  std::atomic<bool> let_go{false};
  AcquireAnswers a(5, [&](std::size_t i) { sent(i); });
  a.answered(0);
  a.answered(1);
  a.answered(2);  // the majority: the try is kept
  a.kept([&] { return let_go.load(); });
  a.answered(3);
  EXPECT_TRUE(sent.nodes.empty()) << "a straggler answering while the hold is held was released";
  let_go = true;
  a.answered(4);
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{4}));
  a.answered(4);
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{4})) << "a second answer released again";
}

// The test write_back gives kept(): a real lease record, held, then releasing, lost or gone.
TEST(AcquireAnswers, AKeptHoldCountsAsLetGoOnceReleasingLostOrGone) {
  LeaseOptions o;
  auto make = [&] {
    return std::make_shared<LeaseRecord>(nullptr, "r", "owner", FencingToken{1}, HoldScripts{}, o, BootClock::now());
  };
  for (int how = 0; how < 3; ++how) {
    SCOPED_TRACE(how);
    auto rec = make();
    Sent sent;
    AcquireAnswers a(3, [&](std::size_t i) { sent(i); });
    a.answered(0);
    a.answered(1);
    a.kept(let_go_of(rec));
    EXPECT_FALSE(let_go_of(rec)());
    if (how == 0) {
      ASSERT_TRUE(rec->begin_release());
    } else if (how == 1) {
      ASSERT_TRUE(rec->mark_lost(LossReason::expired));
    } else {
      rec.reset();
    }
    a.answered(2);
    EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{2}));
  }
}

// Answers on the nodes' loop threads race with the verdict's release on another: each node is
// released exactly once, whichever comes first.
TEST(AcquireAnswers, EachNodeReleasedExactlyOnceUnderRaces) {
  for (int round = 0; round < 200; ++round) {
    Sent sent;
    AcquireAnswers a(4, [&](std::size_t i) { sent(i); });
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < 4; ++i) threads.emplace_back([&a, i] { a.answered(i); });
    threads.emplace_back([&a] { a.release(); });
    for (auto& t : threads) t.join();
    std::vector<int> count(4, 0);
    for (std::size_t i : sent.nodes) ++count[i];
    for (std::size_t i = 0; i < 4; ++i) ASSERT_EQ(count[i], 1) << "round " << round << ", node " << i;
  }
}

// The fencing catch-up of a try that counted without a write-back round: each node behind the
// chosen token (a lower grant, or none: busy or failed) gets it once, whether it answered
// before the verdict or after; a node that granted the token, or a higher one, gets nothing.
struct WriteBacks {
  std::mutex mu;
  std::vector<std::pair<std::size_t, std::uint64_t>> sent;
  void operator()(std::size_t i, std::uint64_t token) {
    std::lock_guard lock(mu);
    sent.emplace_back(i, token);
  }
};

TEST(AcquireAnswers, CatchUpSendsTheTokenToEachNodeBehindItOnce) {
  Sent released;
  WriteBacks wb;
  AcquireAnswers a(
      6, [&](std::size_t i) { released(i); }, [&](std::size_t i, std::uint64_t t) { wb(i, t); });
  a.answered(0, 7);
  a.answered(1, 5);             // granted a lower token
  a.answered(2, std::nullopt);  // busy, or failed
  a.answered(3, 7);
  EXPECT_TRUE(wb.sent.empty()) << "written back before the try counted";
  a.catch_up(7);
  using List = std::vector<std::pair<std::size_t, std::uint64_t>>;
  EXPECT_EQ(wb.sent, (List{{1, 7}, {2, 7}}));
  a.answered(4, 8);  // a straggler whose counter was ahead
  a.answered(5, 6);  // a straggler behind
  a.answered(5, 6);  // answered twice: once is enough
  EXPECT_EQ(wb.sent, (List{{1, 7}, {2, 7}, {5, 7}}));
  EXPECT_TRUE(released.nodes.empty()) << "a kept try's nodes were released";
}

TEST(AcquireAnswers, NoCatchUpWithoutTheCall) {
  Sent released;
  WriteBacks wb;
  AcquireAnswers a(
      3, [&](std::size_t i) { released(i); }, [&](std::size_t i, std::uint64_t t) { wb(i, t); });
  a.answered(0, 3);
  a.answered(1, std::nullopt);
  a.release();  // a failed try: released, never written back
  a.answered(2, 1);
  EXPECT_TRUE(wb.sent.empty());
  EXPECT_EQ(released.nodes, (std::vector<std::size_t>{0, 1, 2}));
}

// Answers racing the verdict's catch_up on another thread: each node behind is written back
// exactly once.
TEST(AcquireAnswers, CatchUpReachesEachNodeBehindExactlyOnceUnderRaces) {
  for (int round = 0; round < 200; ++round) {
    WriteBacks wb;
    AcquireAnswers a(4, [](std::size_t) {}, [&](std::size_t i, std::uint64_t t) { wb(i, t); });
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < 4; ++i) {
      threads.emplace_back([&a, i] { a.answered(i, i % 2 == 0 ? std::optional<std::uint64_t>(10) : std::nullopt); });
    }
    threads.emplace_back([&a] { a.catch_up(10); });
    for (auto& t : threads) t.join();
    std::vector<int> count(4, 0);
    for (const auto& [i, t] : wb.sent) {
      ++count[i];
      ASSERT_EQ(t, 10u);
    }
    for (std::size_t i = 0; i < 4; ++i) ASSERT_EQ(count[i], i % 2 == 0 ? 0 : 1) << "round " << round << ", node " << i;
  }
}

}  // namespace
}  // namespace dlock::detail
