// Countdown (util/countdown.hpp): the count-down shared by the shutdown's releases, a MultiLock's
// parts and the waits' cleanups.
#include "util/countdown.hpp"

#include <gtest/gtest.h>

#include <memory>

namespace dlock::detail {
namespace {

TEST(Countdown, RunsOnceWhenTheLastAnswerArrives) {
  int ran = 0;
  auto c = Countdown::make(3, [&] { ++ran; });
  c->done();
  c->done();
  EXPECT_EQ(ran, 0);
  c->done();
  EXPECT_EQ(ran, 1);
  c->done();  // a stray answer after the end runs nothing again
  EXPECT_EQ(ran, 1);
}

TEST(Countdown, AnAnswerBackAtOnceDoesNotEndACountStillBeingAddedTo) {
  // The caller's own 1 holds the count open while it sends: each send add()s and its answer
  // comes back before the next send.
  int ran = 0;
  Countdown c(1, [&] { ++ran; });
  for (int i = 0; i < 3; ++i) {
    c.add();
    c.done();
    EXPECT_EQ(ran, 0);
  }
  c.done();
  EXPECT_EQ(ran, 1);
}

TEST(Countdown, ThenMayDropTheLastReferenceToTheCount) {
  // A report that frees its operation drops the count's last owner from inside `then`. `then`
  // was moved out before it ran, so it does not run from freed memory (ASan would see it).
  bool ran = false;
  std::shared_ptr<Countdown> owner;
  owner = Countdown::make(1, [&owner, &ran] {
    owner.reset();
    ran = true;
  });
  Countdown* raw = owner.get();
  raw->done();
  EXPECT_TRUE(ran);
  EXPECT_EQ(owner, nullptr);
}

}  // namespace
}  // namespace dlock::detail
