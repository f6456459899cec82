// Fairness across processes (issue #6): the race every lock kind's
// ReleasingProcessLets...GoFirst test runs, in rounds.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "dlock/lease.hpp"
#include "dlock/result.hpp"
#include "support/raw_connection.hpp"
#include "support/wait.hpp"

namespace dlock::test {

// A release wakes the head waiter of every process at once, and the releasing process's event
// loop, awake already, would win that race every time. The release script reports the
// subscribers it notified (2 + n) and the releasing Client holds its own next try back for about
// two round trips. Each round: a holder and a waiter on `mine` (one Client), a waiter on
// `theirs` (another Client); the holder releases. Returns how many of 10 rounds the other
// Client's waiter got the lock first, or -1 after a failure (reported).
//
// `places`, for a kind with a waiters' roll (Mutex: P{N}:waiters), counts its places: the other
// Client's waiter then starts first and has its place before this Client's waiter takes one, so
// the release names the other Client and the race is between that named try and the releasing
// Client's own (held back) tries. Without it the two waiters start together.
inline int rounds_the_other_client_went_first(RawConnection& raw, const std::string& channel,
                                              const std::function<dlock::Result<dlock::Lease>()>& mine,
                                              const std::function<dlock::Result<dlock::Lease>()>& theirs,
                                              const std::function<long long()>& places = {}) {
  constexpr int rounds = 10;
  int theirs_first = 0;
  for (int round = 0; round < rounds; ++round) {
    auto held = mine();
    if (!held.ok()) {
      ADD_FAILURE() << "round " << round << ": " << held.error().what();
      return -1;
    }
    std::atomic<int> order{0};
    auto wait_then_release = [&order](const std::function<dlock::Result<dlock::Lease>()>& acquire) {
      auto r = acquire();
      const int place = ++order;
      if (r.ok()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        EXPECT_TRUE(r->release().ok());
      }
      return r.ok() ? place : -1;
    };
    std::future<int> local;
    auto remote = std::async(std::launch::async, wait_then_release, std::cref(theirs));
    if (places) {
      const bool placed = eventually([&] { return places() == 1; }, std::chrono::milliseconds(3000));
      local = std::async(std::launch::async, wait_then_release, std::cref(mine));
      if (!placed || !eventually([&] { return places() == 2; }, std::chrono::milliseconds(3000))) {
        ADD_FAILURE() << "round " << round << ": the waiters took " << places() << " places, not 2";
      }
    } else {
      local = std::async(std::launch::async, wait_then_release, std::cref(mine));
    }
    const bool subscribed = eventually(
        [&] {
          auto r = raw.cmd_array({"PUBSUB", "NUMSUB", channel});
          return r.size() == 2 && std::stoll(r[1]) >= 2;
        },
        std::chrono::milliseconds(3000));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // their first tries have found the lock busy
    EXPECT_TRUE(held->release().ok());
    const int local_place = local.get();
    const int remote_place = remote.get();
    if (!subscribed || local_place < 0 || remote_place < 0) {
      ADD_FAILURE() << "round " << round << ": subscribed " << subscribed << ", places " << local_place << ", "
                    << remote_place;
      return -1;
    }
    if (remote_place < local_place) ++theirs_first;
  }
  return theirs_first;
}

}  // namespace dlock::test
