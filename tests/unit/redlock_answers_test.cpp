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

NodeAnswer took(std::uint64_t token) { return NodeAnswer::took_with(token); }

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
// hold's release comes after its answer); one that answers after the hold ended without a
// release of its own there (lost, gone) is released at once.
TEST(AcquireAnswers, AStragglerAnsweringAfterTheKeptHoldEndedIsReleased) {
  Sent sent;
  std::atomic<HoldNow> now{HoldNow::held};
  AcquireAnswers a(5, [&](std::size_t i) { sent(i); });
  a.answered(0);
  a.answered(1);
  a.answered(2);  // the majority: the try is kept
  a.kept([&] { return now.load(); });
  a.answered(3);
  EXPECT_TRUE(sent.nodes.empty()) << "a straggler answering while the hold is held was released";
  now = HoldNow::ended;
  a.answered(4);
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{4}));
  a.answered(4);
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{4})) << "a second answer released again";
}

// hold_now_of, the view kept() gets of a real lease record: held, then releasing, lost or gone.
// A straggler answering while the hold is releasing waits for that release's answer (none comes
// here): it is released when the AcquireAnswers ends. Lost or gone: released at once.
TEST(AcquireAnswers, HoldNowOfALeaseRecord) {
  LeaseOptions o;
  auto make = [&] {
    return std::make_shared<LeaseRecord>(nullptr, "r", "owner", FencingToken{1}, HoldScripts{}, o, BootClock::now());
  };
  for (int how = 0; how < 3; ++how) {
    SCOPED_TRACE(how);
    auto rec = make();
    Sent sent;
    {
      AcquireAnswers a(3, [&](std::size_t i) { sent(i); });
      a.answered(0);
      a.answered(1);
      a.kept(hold_now_of(rec));
      EXPECT_EQ(hold_now_of(rec)(), HoldNow::held);
      if (how == 0) {
        ASSERT_TRUE(rec->begin_release());
        EXPECT_EQ(hold_now_of(rec)(), HoldNow::releasing);
      } else if (how == 1) {
        ASSERT_TRUE(rec->mark_lost(LossReason::expired));
        EXPECT_EQ(hold_now_of(rec)(), HoldNow::ended);
      } else {
        rec.reset();
      }
      a.answered(2);
      EXPECT_EQ(sent.nodes, how == 0 ? std::vector<std::size_t>{} : std::vector<std::size_t>{2});
    }
    EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{2})) << "released " << sent.nodes.size() << " times";
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
  a.answered(0, took(7));
  a.answered(1, took(5));             // granted a lower token
  a.answered(2, NodeAnswer::took_nothing());  // busy
  a.answered(3, took(7));
  EXPECT_TRUE(wb.sent.empty()) << "written back before the try counted";
  a.catch_up(7);
  using List = std::vector<std::pair<std::size_t, std::uint64_t>>;
  EXPECT_EQ(wb.sent, (List{{1, 7}, {2, 7}}));
  a.answered(4, took(8));  // a straggler whose counter was ahead
  a.answered(5, took(6));  // a straggler behind
  a.answered(5, took(6));  // answered twice: once is enough
  EXPECT_EQ(wb.sent, (List{{1, 7}, {2, 7}, {5, 7}}));
  EXPECT_TRUE(released.nodes.empty()) << "a kept try's nodes were released";
}

TEST(AcquireAnswers, NoCatchUpWithoutTheCall) {
  Sent released;
  WriteBacks wb;
  AcquireAnswers a(
      3, [&](std::size_t i) { released(i); }, [&](std::size_t i, std::uint64_t t) { wb(i, t); });
  a.answered(0, took(3));
  a.answered(1, NodeAnswer::not_known());  // failed
  a.release();  // a failed try: released, never written back
  a.answered(2, took(1));
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
      threads.emplace_back([&a, i] { a.answered(i, i % 2 == 0 ? took(10) : NodeAnswer::not_known()); });
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

// A node whose acquire took nothing (busy, another type, this owner's tombstone) holds nothing
// of the try's: a failed try does not release it, before or after the verdict.
TEST(AcquireAnswers, ANodeThatTookNothingIsNeverReleased) {
  Sent sent;
  AcquireAnswers a(5, [&](std::size_t i) { sent(i); });
  a.answered(0, took(4));
  a.answered(1, NodeAnswer::took_nothing());
  a.answered(2, NodeAnswer::not_known());  // an error or a failed command: it may have taken it
  a.release();
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{0, 2}));
  a.answered(3, NodeAnswer::took_nothing());
  a.answered(4, took(4));
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{0, 2, 4}));
}

// A straggler that took the key after the kept hold began its release is released again only
// where the hold's release did not take effect: that release answered 0 or failed. Where it
// answered 1 or 2 it ran after the acquire, and the key is gone. Until it answers there (it may
// not have been sent yet), the decision waits.
TEST(AcquireAnswers, AStragglerIsReleasedAgainOnlyWhereTheHoldsReleaseDidNotTakeEffect) {
  Sent sent;
  std::atomic<HoldNow> now{HoldNow::held};
  AcquireAnswers a(7, [&](std::size_t i) { sent(i); });
  a.answered(0, took(1));
  a.answered(1, took(1));
  a.answered(2, took(1));
  a.answered(3, took(1));  // the majority of 7
  a.kept([&] { return now.load(); });
  now = HoldNow::releasing;
  a.answered(4, took(1));  // its release claimed but not sent yet: waits
  a.hold_release_sent();
  a.hold_released(6, true);  // answered before the acquire did (another connection)
  a.answered(5, took(1));    // the hold's release in flight here: waits
  a.answered(6, took(1));    // the hold's release took effect here: nothing more to do
  EXPECT_TRUE(sent.nodes.empty());
  now = HoldNow::ended;       // the release's verdict came from a majority
  a.hold_released(4, true);   // it ran after the acquire: nothing more to do
  a.hold_released(5, false);  // it found nothing: it ran before the acquire
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{5}));
  a.hold_released(5, false);  // a second answer: released once
  EXPECT_EQ(sent.nodes, (std::vector<std::size_t>{5}));
}

TEST(AcquireAnswers, AStragglerWhoseHoldReleaseTookEffectLaterIsNotReleasedAgain) {
  Sent sent;
  {
    AcquireAnswers a(3, [&](std::size_t i) { sent(i); });
    a.answered(0, took(1));
    a.answered(1, took(1));
    a.kept([] { return HoldNow::releasing; });
    a.hold_release_sent();
    a.answered(2, took(1));
    a.hold_released(2, true);
    a.hold_release_sent();  // a retried release does not forget where the first took effect
    a.hold_released(2, false);
  }
  EXPECT_TRUE(sent.nodes.empty()) << "released again after the hold's release took effect";
}

// The home Client shuts down and sends the hold's release without hearing its answers
// (ClientCore::release_held): a straggler answering after it is released at once, not when the
// AcquireAnswers ends with the Lease. One that answered before it was sent (it waited for a
// release's answer) is not released again: that release reached it after its acquire. Nor is
// a node that took nothing.
TEST(AcquireAnswers, AStragglerAnsweringAfterAnUnheardReleaseIsReleasedAtOnce) {
  Sent sent;
  {
    AcquireAnswers a(5, [&](std::size_t i) { sent(i); });
    a.answered(0, took(1));
    a.answered(1, took(1));
    a.answered(2, took(1));
    a.kept([] { return HoldNow::releasing; });
    a.answered(3, took(1));  // between the release's claim and its sending: waits
    a.hold_release_unheard();
    EXPECT_TRUE(sent.nodes.empty());
    a.answered(4, NodeAnswer::took_nothing());
    EXPECT_TRUE(sent.nodes.empty());
  }
  EXPECT_TRUE(sent.nodes.empty()) << "released again when the object ended";
  Sent late;
  {
    AcquireAnswers a(3, [&](std::size_t i) { late(i); });
    a.answered(0, took(1));
    a.answered(1, took(1));
    a.kept([] { return HoldNow::releasing; });
    a.hold_release_unheard();
    a.answered(2, took(1));  // after the unheard release: at once
    EXPECT_EQ(late.nodes, (std::vector<std::size_t>{2}));
  }
  EXPECT_EQ(late.nodes, (std::vector<std::size_t>{2})) << "released twice";
}

// The straggler's answer races the hold release's answer on another thread: released exactly
// once where that release did not take effect, never where it did.
TEST(AcquireAnswers, StragglerAndHoldReleaseAnswersRacing) {
  for (int round = 0; round < 200; ++round) {
    Sent sent;
    AcquireAnswers a(6, [&](std::size_t i) { sent(i); });
    a.answered(0, took(1));
    a.answered(1, took(1));
    a.answered(2, took(1));
    a.answered(3, took(1));
    a.kept([] { return HoldNow::releasing; });
    a.hold_release_sent();
    std::vector<std::thread> threads;
    threads.emplace_back([&a] { a.answered(4, took(1)); });
    threads.emplace_back([&a] { a.answered(5, took(1)); });
    threads.emplace_back([&a] { a.hold_released(4, true); });
    threads.emplace_back([&a] { a.hold_released(5, false); });
    for (auto& t : threads) t.join();
    ASSERT_EQ(sent.nodes, (std::vector<std::size_t>{5})) << "round " << round;
  }
}

}  // namespace
}  // namespace dlock::detail
