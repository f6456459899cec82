// Late replies: an acquisition whose answer reaches the Client after the lease's validity ended.
//
// Found by FaultScenario.HolderProcessPausedLongerThanItsTtl under ASan: a waiter whose try was
// granted just before its process was paused returned, on resume, a lease whose validity had long
// ended, with a fencing token below a later holder's. These tests make that deterministic: a fault
// proxy (support/fault_proxy.hpp, hold_replies) lets the acquire reach a real redis-server and
// holds its answer until the lease's validity is over, for every lock kind. Expected, whatever
// the kind: no lease whose validity is over is returned; the late hold is given back
// (compare-and-delete: the key is not left with the late owner's token, another owner's hold
// stays); no renewal record is left behind; a lease returned later has a higher token than the
// late one (or, for readers, whose token is the writer epoch, not a lower one).
//
// Two lease shapes make the two cases:
//   lingering  validity 300 ms on the client's clock (TTL 10 s minus a 9.7 s drift allowance)
//              while the key lives 10 s on the server: the late owner's key is still there when
//              its answer arrives, so only the Client's release can remove it;
//   short      TTL 300 ms: the key expires on the server and another Client takes the lock
//              before the late answer arrives.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/multi_lock.hpp"
#include "locks/multi_lock_ordered.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/proxied_fixture.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::FaultProxy;
using dlock::test::RawConnection;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::scaled;
using std::chrono::milliseconds;

using Done = std::function<void(dlock::Result<dlock::Lease>)>;

// The client-side validity of every late lease below. Lower bounds (how long a reply is held)
// are real time, never scaled.
constexpr milliseconds kValidity{300};
// Held this long after the server ran the acquire: the validity (counted from the send, before
// that) is surely over.
constexpr milliseconds kHold = kValidity + 150ms;

dlock::LeaseOptions lingering() {
  dlock::LeaseOptions o;
  o.mode = dlock::LeaseMode::watchdog;
  o.ttl = 10000ms;
  o.drift_allowance = o.ttl - kValidity;
  o.renew_interval = 100ms;  // a lease that is returned stays valid
  o.at_risk_margin = 50ms;
  return o;
}

dlock::LeaseOptions short_lived() {
  dlock::LeaseOptions o;
  o.mode = dlock::LeaseMode::watchdog;
  o.ttl = kValidity;
  o.renew_interval = 100ms;
  return o;
}

dlock::WaitOptions waiting(milliseconds timeout) {
  dlock::WaitOptions w;
  w.timeout = timeout;
  return w;
}

long long counter(RawConnection& raw, const std::string& key) {
  const std::string v = raw.cmd({"GET", key});
  return v == "(nil)" ? 0 : std::stoll(v);
}

// One lock object of the kind under test, kept alive while its acquisitions run.
struct Locker {
  std::shared_ptr<void> object;
  std::function<void(dlock::WaitOptions, Done)> async_acquire;
};

// What a test needs to know of a kind: how to make and use a lock of it, and how its holds look
// in Redis (read behind dlock's back).
struct Kind {
  const char* label;
  std::function<Locker(dlock::Client&, const std::string& name, dlock::LeaseOptions)> make;
  // Every key of the lock holds a hold (the acquire ran on the server).
  std::function<bool(RawConnection&, const std::string& name)> taken;
  // No hold of anyone is left.
  std::function<bool(RawConnection&, const std::string& name)> clean;
  // The hold of `owner` is there.
  std::function<bool(RawConnection&, const std::string& name, const std::string& owner)> held_by;
  std::string (*fence_key)(const std::string& name);
  bool shared_token = false;  // readers: the token is the writer epoch, shared, not per hold
  // Client::active_leases() of one hold: the ordered MultiLock counts each slot group's part.
  std::size_t records = 1;
};

// Test names show the kind, not the object's bytes.
void PrintTo(const Kind& k, std::ostream* os) { *os << k.label; }

std::string fence_of(const std::string& name) { return key_of(name) + ":fence"; }
std::string multi_fence_of(const std::string& name) { return key_of(name + "-a") + ":fence"; }

bool exists(RawConnection& raw, const std::string& key) { return raw.cmd_int({"EXISTS", key}) == 1; }

// A kind whose constructor is (client, name, lease) and whose acquire is async_acquire(wait, done).
template <class Lock>
Locker exclusive(dlock::Client& c, const std::string& name, dlock::LeaseOptions lease) {
  auto lock = std::make_shared<Lock>(c, name, std::move(lease));
  return Locker{lock, [lock](dlock::WaitOptions w, Done done) { lock->async_acquire(w, std::move(done)); }};
}

Kind mutex_kind() {
  return Kind{
      "Mutex",
      [](dlock::Client& c, const std::string& n, dlock::LeaseOptions l) { return exclusive<dlock::Mutex>(c, n, l); },
      [](RawConnection& r, const std::string& n) { return exists(r, key_of(n)); },
      [](RawConnection& r, const std::string& n) { return !exists(r, key_of(n)); },
      [](RawConnection& r, const std::string& n, const std::string& o) { return r.cmd({"GET", key_of(n)}) == o; },
      fence_of};
}

Kind reentrant_kind() {
  return Kind{
      "ReentrantMutex",
      [](dlock::Client& c, const std::string& n, dlock::LeaseOptions l) {
        dlock::ReentrantMutex::Options o;
        o.lease = std::move(l);
        auto lock = std::make_shared<dlock::ReentrantMutex>(c, n, o);
        return Locker{lock, [lock](dlock::WaitOptions w, Done done) { lock->async_acquire(w, std::move(done)); }};
      },
      [](RawConnection& r, const std::string& n) { return exists(r, key_of(n)); },
      [](RawConnection& r, const std::string& n) { return !exists(r, key_of(n)); },
      [](RawConnection& r, const std::string& n, const std::string& o) {
        return r.cmd_int({"HEXISTS", key_of(n), o}) == 1;
      },
      fence_of};
}

Kind writer_kind() {
  return Kind{
      "SharedMutexWriter",
      [](dlock::Client& c, const std::string& n, dlock::LeaseOptions l) {
        return exclusive<dlock::SharedMutex>(c, n, l);
      },
      [](RawConnection& r, const std::string& n) { return r.cmd_int({"HEXISTS", key_of(n), "writer"}) == 1; },
      [](RawConnection& r, const std::string& n) { return r.cmd_int({"HEXISTS", key_of(n), "writer"}) == 0; },
      [](RawConnection& r, const std::string& n, const std::string& o) {
        return r.cmd({"HGET", key_of(n), "writer"}) == o;
      },
      fence_of};
}

Kind reader_kind() {
  return Kind{
      "SharedMutexReader",
      [](dlock::Client& c, const std::string& n, dlock::LeaseOptions l) {
        auto lock = std::make_shared<dlock::SharedMutex>(c, n, std::move(l));
        return Locker{lock,
                      [lock](dlock::WaitOptions w, Done done) { lock->async_acquire_shared(w, std::move(done)); }};
      },
      [](RawConnection& r, const std::string& n) { return r.cmd_int({"ZCARD", key_of(n) + ":readers"}) > 0; },
      [](RawConnection& r, const std::string& n) { return r.cmd_int({"ZCARD", key_of(n) + ":readers"}) == 0; },
      [](RawConnection& r, const std::string& n, const std::string& o) {
        return r.cmd({"ZSCORE", key_of(n) + ":readers", o}) != "(nil)";
      },
      fence_of, /*shared_token=*/true};
}

Kind semaphore_kind() {
  return Kind{
      "Semaphore",
      [](dlock::Client& c, const std::string& n, dlock::LeaseOptions l) {
        auto lock = std::make_shared<dlock::Semaphore>(c, n, 1, std::move(l));
        return Locker{lock, [lock](dlock::WaitOptions w, Done done) { lock->async_acquire(1, w, std::move(done)); }};
      },
      [](RawConnection& r, const std::string& n) { return r.cmd_int({"ZCARD", key_of(n) + ":permits"}) > 0; },
      [](RawConnection& r, const std::string& n) { return r.cmd_int({"ZCARD", key_of(n) + ":permits"}) == 0; },
      [](RawConnection& r, const std::string& n, const std::string& o) {
        return r.cmd({"ZSCORE", key_of(n) + ":permits", o + "#1"}) != "(nil)";
      },
      fence_of};
}

Kind fair_kind() {
  return Kind{
      "FairLock",
      [](dlock::Client& c, const std::string& n, dlock::LeaseOptions l) {
        return exclusive<dlock::FairLock>(c, n, l);
      },
      [](RawConnection& r, const std::string& n) { return exists(r, key_of(n)); },
      [](RawConnection& r, const std::string& n) { return !exists(r, key_of(n)); },
      [](RawConnection& r, const std::string& n, const std::string& o) { return r.cmd({"GET", key_of(n)}) == o; },
      fence_of};
}

Kind multi_kind(bool ordered) {
  return Kind{
      ordered ? "MultiLockOrdered" : "MultiLock",
      [ordered](dlock::Client& c, const std::string& n, dlock::LeaseOptions l) {
        auto lock = std::make_shared<dlock::MultiLock>(c, std::vector<std::string>{n + "-a", n + "-b"}, std::move(l));
        // Standalone: one script could take the set; the ordered path is the Cluster fallback.
        if (ordered) dlock::detail::MultiLockAccess::force_ordered(*lock);
        return Locker{lock, [lock](dlock::WaitOptions w, Done done) { lock->async_acquire(w, std::move(done)); }};
      },
      // The ordered path takes one slot group after the other, each after the previous answer:
      // with the answers held, only the first group is taken.
      [ordered](RawConnection& r, const std::string& n) {
        return exists(r, key_of(n + "-a")) && (ordered || exists(r, key_of(n + "-b")));
      },
      [](RawConnection& r, const std::string& n) { return !exists(r, key_of(n + "-a")) && !exists(r, key_of(n + "-b")); },
      [](RawConnection& r, const std::string& n, const std::string& o) {
        return r.cmd({"GET", key_of(n + "-a")}) == o && r.cmd({"GET", key_of(n + "-b")}) == o;
      },
      multi_fence_of, /*shared_token=*/false, /*records=*/ordered ? 2u : 1u};
}

// The outcome of an async acquisition, kept alive by the callback (which runs on the loop
// thread) whatever the test does meanwhile.
struct Outcome {
  std::shared_ptr<std::promise<dlock::Result<dlock::Lease>>> promise =
      std::make_shared<std::promise<dlock::Result<dlock::Lease>>>();
  std::future<dlock::Result<dlock::Lease>> future = promise->get_future();
  Done callback() {
    return [p = promise](dlock::Result<dlock::Lease> r) { p->set_value(std::move(r)); };
  }
  // Waits for it; nullopt when it did not come within `timeout`.
  std::optional<dlock::Result<dlock::Lease>> get(milliseconds timeout) {
    if (future.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    return future.get();
  }
};

// A server, a Client on it directly (`client`, another owner) and one through the fault proxy
// (`late`, whose answers the test holds back).
class LateReply : public dlock::test::ProxiedServerFixture {
 protected:
  std::optional<dlock::Client>& late = via_proxy;  // the Client whose answers come late

  // Starts an acquisition through the proxy with its answers held; returns once the server ran
  // it, with the fencing counter at that moment: the late hold's token.
  long long start_late(const Kind& k, const std::string& name, const Locker& lock, dlock::WaitOptions wait,
                       Outcome& out) {
    // The kind's scripts are loaded on the server first: otherwise the held answer would be
    // EVALSHA's NOSCRIPT, and the script would never run before the test lets it through.
    Locker warm = k.make(*client, name + "-warm", dlock::LeaseOptions{});
    Outcome warmed;
    warm.async_acquire(dlock::test::no_wait(), warmed.callback());
    auto w = warmed.get(scaled(5000ms));
    EXPECT_TRUE(w.has_value() && w->ok()) << (w ? w->error().what() : "no answer");
    if (w && w->ok()) {
      EXPECT_TRUE(w->value().release().ok());
    }

    proxy->hold_replies();
    lock.async_acquire(wait, out.callback());
    EXPECT_TRUE(eventually([&] { return k.taken(*raw, name); }, scaled(5000ms)))
        << "the acquire never ran on the server";
    return counter(*raw, k.fence_key(name));
  }
};

class LateReplyKinds : public LateReply, public ::testing::WithParamInterface<Kind> {};

// The late owner's key is still there when its answer arrives: a one-try acquisition reports
// busy (the documented outcome of a try that did not get the lock), and only after its hold was
// given back; nothing is left in the watchdog.
TEST_P(LateReplyKinds, OneTryGivesBackTheHoldAndReportsBusy) {
  const Kind& k = GetParam();
  const std::string name = "late-try";
  Locker lock = k.make(*late, name, lingering());
  Outcome out;
  start_late(k, name, lock, dlock::test::no_wait(), out);
  std::this_thread::sleep_for(kHold);
  ASSERT_TRUE(k.taken(*raw, name)) << "the key must outlive the client-side validity for this test";
  proxy->pass();

  auto r = out.get(scaled(5000ms));
  ASSERT_TRUE(r.has_value()) << "the acquisition never finished";
  ASSERT_FALSE(r->ok()) << k.label << ": returned a lease whose validity was over (remaining "
                        << r->value().remaining().count() << " ms, token " << r->value().token().value << ")";
  EXPECT_EQ(r->code(), dlock::errc::busy) << r->error().what();
  // Said as it was: no other owner held it.
  EXPECT_EQ(std::string(r->error().what()).find("held by another owner"), std::string::npos) << r->error().what();
  // Reported only once the release was answered: nothing of the late owner is left.
  EXPECT_TRUE(k.clean(*raw, name)) << k.label << ": the late hold was left on the server";
  EXPECT_TRUE(eventually([&] { return late->active_leases() == 0; }, scaled(2000ms)))
      << k.label << ": the refused lease is still in the watchdog (" << late->active_leases() << ")";
}

// The late owner's key expired and another Client took the lock before the late answer came:
// the late acquisition is refused, and its release leaves the new owner's hold alone.
TEST_P(LateReplyKinds, OneTryLeavesTheNextOwnerAlone) {
  const Kind& k = GetParam();
  const std::string name = "late-next";
  Locker lock = k.make(*late, name, short_lived());
  Outcome out;
  const long long late_token = start_late(k, name, lock, dlock::test::no_wait(), out);

  // Its key expires on the server (300 ms TTL), then the other Client takes it. The writer takes
  // it from a late reader: readers would share it.
  Locker next = k.shared_token ? writer_kind().make(*client, name, dlock::LeaseOptions{})
                               : k.make(*client, name, dlock::LeaseOptions{});
  Outcome next_out;
  next.async_acquire(waiting(scaled(5000ms)), next_out.callback());
  auto taken = next_out.get(scaled(10000ms));
  ASSERT_TRUE(taken.has_value() && taken->ok()) << (taken ? taken->error().what() : "no answer");
  dlock::Lease next_lease = std::move(taken->value());
  EXPECT_GT(next_lease.token().value, static_cast<unsigned long long>(late_token));

  proxy->pass();
  auto r = out.get(scaled(5000ms));
  ASSERT_TRUE(r.has_value()) << "the acquisition never finished";
  ASSERT_FALSE(r->ok()) << k.label << ": returned a late lease (token " << r->value().token().value
                        << ") while the next owner holds token " << next_lease.token().value;
  EXPECT_EQ(r->code(), dlock::errc::busy) << r->error().what();
  const Kind& next_kind = k.shared_token ? writer_kind() : k;
  EXPECT_TRUE(next_kind.held_by(*raw, name, next_lease.owner())) << k.label << ": the next owner's hold is gone";
  EXPECT_TRUE(next_lease.held());
  EXPECT_TRUE(eventually([&] { return late->active_leases() == 0; }, scaled(2000ms)))
      << k.label << ": the refused lease is still in the watchdog (" << late->active_leases() << ")";
  EXPECT_TRUE(next_lease.release().ok());
}

// A waiting acquisition whose first try is answered late goes on waiting, and ends with a fresh
// lease: valid, held in Redis, with a token above the late one.
TEST_P(LateReplyKinds, WaitingAcquisitionGetsAFreshLease) {
  const Kind& k = GetParam();
  const std::string name = "late-wait";
  Locker lock = k.make(*late, name, lingering());
  Outcome out;
  const long long late_token = start_late(k, name, lock, waiting(scaled(10000ms)), out);
  std::this_thread::sleep_for(kHold);
  proxy->pass();

  auto r = out.get(scaled(10000ms));
  ASSERT_TRUE(r.has_value()) << "the acquisition never finished";
  ASSERT_TRUE(r->ok()) << r->error().what();
  const dlock::Lease& lease = r->value();
  EXPECT_GT(lease.remaining().count(), 0) << k.label << ": a lease whose validity was over";
  if (k.shared_token) {
    EXPECT_GE(lease.token().value, static_cast<unsigned long long>(late_token));
  } else {
    EXPECT_GT(lease.token().value, static_cast<unsigned long long>(late_token))
        << k.label << ": the late acquisition's token was returned";
  }
  EXPECT_TRUE(k.held_by(*raw, name, lease.owner()));
  EXPECT_TRUE(eventually([&] { return late->active_leases() == k.records; }, scaled(2000ms)))
      << late->active_leases() << " records in the watchdog";
  EXPECT_TRUE(r->value().release().ok());
  EXPECT_TRUE(k.clean(*raw, name));
}

// A SharedMutex writer keeps one owner token for its tries (its intent is refreshed, not
// duplicated), but not past a try whose hold it had to give back: that release is remembered
// under the owner (and may be sent again after a blip), so a later hold of the same owner would
// count as released (a release after it expired said "already released", not lock_lost) or be
// deleted by the resent release. The fresh lease used the late hold's owner.
TEST_F(LateReply, WriterWaitingPastARefusedHoldTakesAFreshOwner) {
  const Kind k = writer_kind();
  const std::string name = "late-owner";
  Locker lock = k.make(*late, name, lingering());
  Outcome out;
  start_late(k, name, lock, waiting(scaled(10000ms)), out);
  const std::string late_owner = raw->cmd({"HGET", key_of(name), "writer"});
  ASSERT_NE(late_owner, "(nil)");
  std::this_thread::sleep_for(kHold);
  proxy->pass();
  auto r = out.get(scaled(10000ms));
  ASSERT_TRUE(r.has_value()) << "the acquisition never finished";
  ASSERT_TRUE(r->ok()) << r->error().what();
  EXPECT_NE(r->value().owner(), late_owner) << "the refused hold's owner was taken again";
  EXPECT_TRUE(k.held_by(*raw, name, r->value().owner()));
  EXPECT_EQ(raw->cmd_int({"ZCARD", key_of(name) + ":wintent"}), 0) << "an intent was left behind";
  EXPECT_TRUE(r->value().release().ok());
  EXPECT_TRUE(k.clean(*raw, name));
}

// A slow answer that still comes within the lease's validity: the lease is returned, and its
// first renewal is due one renew_interval after the acquire was *sent*. It was once counted from
// the answer, so an acquisition slower than ttl - renew_interval (a WAIT for a replica, a loaded
// machine) expired before its first renewal: ReplicationAckTest.WaitDoesNotStallTheSharedPipeline
// failed that way on a busy CI machine.
TEST_P(LateReplyKinds, SlowAnswerWithinValidityIsRenewedInTime) {
  const Kind& k = GetParam();
  const std::string name = "slow-answer";
  dlock::LeaseOptions lease;
  lease.mode = dlock::LeaseMode::watchdog;
  lease.ttl = 3000ms;            // valid until send + 2,968 ms (drift 32 ms)
  lease.renew_interval = 2000ms;  // first renewal due at send + 2 s
  Locker lock = k.make(*late, name, lease);
  Outcome out;
  start_late(k, name, lock, dlock::test::no_wait(), out);
  // Answered 1.3 s after the send (and after the server ran it, which was later): counted from
  // the answer, the first renewal would be due after the lease's end.
  std::this_thread::sleep_for(1300ms);
  const auto answered = std::chrono::steady_clock::now();
  proxy->pass();
  auto r = out.get(scaled(5000ms));
  ASSERT_TRUE(r.has_value()) << "the acquisition never finished";
  ASSERT_TRUE(r->ok()) << k.label << ": " << r->error().what();
  const dlock::Lease& got = r->value();
  // Past the end of the first validity (and past a first renewal counted from the answer).
  std::this_thread::sleep_until(answered + 2300ms);
  EXPECT_TRUE(got.held()) << k.label << ": lost before its first renewal";
  EXPECT_TRUE(k.held_by(*raw, name, got.owner())) << k.label << ": the key expired on the server";
  EXPECT_TRUE(r->value().release().ok());
}

// Every answer is late: the link's round trip (2 × 200 ms) is longer than the lease's validity
// (TTL 300 ms). Each try takes the lock and has to give it back; before, the wait went on doing
// that until its deadline ("timed out waiting"), or for ever without one. It now ends after a
// few such tries with an error that says what is wrong, long before the deadline, and leaves
// nothing behind.
TEST_P(LateReplyKinds, EveryAnswerLateEndsTheWaitWithTheReason) {
  const Kind& k = GetParam();
  const std::string name = "late-always";
  Locker lock = k.make(*late, name, short_lived());
  // The kind's scripts are loaded first (through the fast link), so each try is one round trip.
  Outcome warmed;
  lock.async_acquire(dlock::test::no_wait(), warmed.callback());
  auto w = warmed.get(scaled(5000ms));
  ASSERT_TRUE(w.has_value() && w->ok()) << (w ? w->error().what() : "no answer");
  ASSERT_TRUE(w->value().release().ok());

  proxy->delay(200ms);
  const milliseconds timeout = scaled(30000ms);
  const auto started = std::chrono::steady_clock::now();
  Outcome out;
  lock.async_acquire(waiting(timeout), out.callback());
  auto r = out.get(timeout + scaled(5000ms));
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started);
  proxy->pass();
  ASSERT_TRUE(r.has_value()) << "the acquisition never finished";
  ASSERT_FALSE(r->ok()) << k.label << ": returned a lease through a link slower than its validity";
  EXPECT_EQ(r->code(), dlock::errc::invalid_argument) << r->error().what();
  EXPECT_NE(r->error().what().find("too short"), std::string::npos) << r->error().what();
  EXPECT_LT(took, timeout / 2) << k.label << ": the wait ran on towards its deadline";
  EXPECT_TRUE(eventually([&] { return k.clean(*raw, name); }, scaled(2000ms))) << k.label << ": a hold was left";
  EXPECT_TRUE(eventually([&] { return late->active_leases() == 0; }, scaled(2000ms)))
      << k.label << ": " << late->active_leases() << " records left in the watchdog";
}

// A watchdog lease whose renewals reach the server but whose answers do not come back: its
// validity (300 ms on the client's clock) runs out and it is lost, while the server renewed the
// key to its 10 s TTL. Before, that key was left to sit out those 10 s, held by nobody; it is now
// released by its owner token when the loss is reported (but a ReentrantMutex's, see below).
TEST_P(LateReplyKinds, ALeaseLostWithItsRenewalsUnansweredFreesItsKey) {
  const Kind& k = GetParam();
  const std::string name = "lost-renewed";
  auto lost = std::make_shared<std::atomic<int>>(0);
  dlock::LeaseOptions options = lingering();
  options.events.on_lost = [lost](dlock::LossReason why) {
    lost->store(why == dlock::LossReason::expired ? 1 : 2);
  };
  Locker lock = k.make(*late, name, options);
  Outcome out;
  lock.async_acquire(dlock::test::no_wait(), out.callback());
  auto r = out.get(scaled(5000ms));
  ASSERT_TRUE(r.has_value() && r->ok()) << (r ? r->error().what() : "no answer");
  std::this_thread::sleep_for(250ms);  // renewed (every 100 ms): its renew script is loaded
  ASSERT_EQ(lost->load(), 0) << k.label << ": lost before the replies were held";

  proxy->hold_replies();
  ASSERT_TRUE(eventually([&] { return lost->load() != 0; }, scaled(5000ms))) << k.label << ": never lost";
  EXPECT_EQ(lost->load(), 1) << k.label << ": lost, but not as expired";
  if (std::string(k.label) == "ReentrantMutex") {
    // The exception: its owner is the thread, the same for the thread's next take, which the
    // whole-hold release could delete (renewal_scheduler.cpp, lose). Left to its TTL.
    std::this_thread::sleep_for(300ms);
    EXPECT_FALSE(k.clean(*raw, name)) << "a ReentrantMutex hold was released behind its thread";
  } else {
    EXPECT_TRUE(eventually([&] { return k.clean(*raw, name); }, scaled(3000ms)))
        << k.label << ": the lost lease's key was left to its TTL";
  }
  proxy->pass();
  EXPECT_FALSE(r->value().held());
  EXPECT_EQ(r->value().release().code(), dlock::errc::lock_lost);
  EXPECT_EQ(late->active_leases(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Kinds, LateReplyKinds,
                         ::testing::Values(mutex_kind(), reentrant_kind(), writer_kind(), reader_kind(),
                                           semaphore_kind(), fair_kind(), multi_kind(false), multi_kind(true)),
                         [](const ::testing::TestParamInfo<Kind>& p) { return std::string(p.param.label); });

// A one-try acquisition answered while its Client shuts down: it is in no wait queue, so the
// shutdown does not end it, and its lease would come back after the shutdown's first step had
// released what was held. That lease was released by nobody (its release() saw the shutdown
// and sent nothing) and the key sat out its TTL. It is now given back, and the caller told.
TEST_F(LateReply, AOneTryAnsweredDuringShutdownIsGivenBack) {
  const Kind k = mutex_kind();
  const std::string name = "late-shutdown";
  Locker lock = k.make(*late, name, dlock::LeaseOptions{});
  Outcome out;
  start_late(k, name, lock, dlock::test::no_wait(), out);
  std::thread closer([&] { late.reset(); });  // waits for the answer still out (settle_in_flight)
  std::this_thread::sleep_for(300ms);
  proxy->pass();
  closer.join();
  auto r = out.get(scaled(5000ms));
  ASSERT_TRUE(r.has_value()) << "the acquisition never finished";
  EXPECT_FALSE(r->ok()) << "a lease was returned by a Client that had shut down";
  if (!r->ok()) {
    EXPECT_EQ(r->code(), dlock::errc::shutdown) << r->error().what();
  }
  EXPECT_TRUE(eventually([&] { return k.clean(*raw, name); }, scaled(2000ms))) << "the key was left to its TTL";
}

// FairLock's handover: a release gives the lock to the head of the queue and tells it
// 'granted <token> <id>'. A grant that reaches the waiter after the validity counted from its last
// try is confirmed with a renewal of the granted key before it is taken (fair_wait.cpp,
// take_grant): the lease then counts from that renewal. (Refusing it, as before, handed the lock
// on and sent the waiter to the back of the queue.) Waits for `hold` with the waiter's replies
// and messages held back, and returns the lease and the token the handover counted.
struct GrantOutcome {
  std::optional<dlock::Result<dlock::Lease>> result;
  long long granted_token = 0;
  std::string granted_owner;
};

GrantOutcome late_grant(dlock::Client& holder_client, dlock::Client& late, RawConnection& raw, FaultProxy& proxy,
                        const std::string& name, const dlock::LeaseOptions& lease, milliseconds hold) {
  GrantOutcome g;
  dlock::FairLock holder_lock(holder_client, name);
  auto held = holder_lock.acquire(dlock::test::no_wait());
  EXPECT_TRUE(held.ok()) << held.error().what();
  if (!held) return g;
  // The waiter makes no tries of its own while the grant is held back: it re-tries every
  // waiter_ttl / 3 or recheck interval, both far away.
  dlock::FairLockOptions fair;
  fair.waiter_ttl = 30000ms;
  dlock::FairLock waiter_lock(late, name, lease, fair);
  dlock::WaitOptions wait = waiting(scaled(10000ms));
  wait.recheck_interval = 10000ms;
  Outcome out;
  waiter_lock.async_acquire(wait, out.callback());
  EXPECT_TRUE(eventually([&] { return raw.cmd_int({"LLEN", waiter_lock.queue_key()}) == 1; }, scaled(5000ms)));
  std::this_thread::sleep_for(scaled(100ms));  // the queuing try's answer is back

  proxy.hold_replies();
  EXPECT_TRUE(held->release().ok());
  // Handed over: the key holds the waiter's token, the fence counted it.
  g.granted_owner = raw.cmd({"GET", waiter_lock.key()});
  EXPECT_NE(g.granted_owner, "(nil)");
  EXPECT_NE(g.granted_owner, held->owner());
  g.granted_token = counter(raw, waiter_lock.key() + ":fence");
  std::this_thread::sleep_for(hold);
  proxy.pass();
  g.result = out.get(scaled(10000ms));
  return g;
}

// The granted key is still the waiter's (its server TTL is 10 s; the client counts 300 ms): the
// renewal confirms it, and the lease is the handover's.
TEST_F(LateReply, FairLockGrantTakenUpLateIsConfirmedByARenewal) {
  GrantOutcome g = late_grant(*client, *late, *raw, *proxy, "late-grant", lingering(), kHold);
  ASSERT_TRUE(g.result.has_value()) << "the wait never finished";
  ASSERT_TRUE(g.result->ok()) << g.result->error().what();
  const dlock::Lease& lease = g.result->value();
  EXPECT_EQ(lease.token().value, static_cast<unsigned long long>(g.granted_token));
  EXPECT_EQ(lease.owner(), g.granted_owner);
  EXPECT_GT(lease.remaining().count(), 0);
  EXPECT_GT(raw->cmd_int({"PTTL", key_of("late-grant")}), 9000) << "not renewed";
  EXPECT_TRUE(eventually([&] { return late->active_leases() == 1; }, scaled(2000ms)))
      << late->active_leases() << " records in the watchdog";
  EXPECT_TRUE(g.result->value().release().ok());
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("late-grant")}), 0);
}

// The granted key expired on the server before the renewal came (its TTL is the 300 ms the
// client counts): no acquisition; the wait goes on, and its next try takes the free lock with a
// new token.
TEST_F(LateReply, FairLockGrantWhoseKeyExpiredIsNotTaken) {
  GrantOutcome g = late_grant(*client, *late, *raw, *proxy, "expired-grant", short_lived(), kHold);
  ASSERT_TRUE(g.result.has_value()) << "the wait never finished";
  ASSERT_TRUE(g.result->ok()) << g.result->error().what();
  const dlock::Lease& lease = g.result->value();
  EXPECT_GT(lease.token().value, static_cast<unsigned long long>(g.granted_token))
      << "the expired grant's lease was returned (remaining " << lease.remaining().count() << " ms)";
  EXPECT_GT(lease.remaining().count(), 0);
  EXPECT_EQ(raw->cmd({"GET", key_of("expired-grant")}), lease.owner());
  EXPECT_TRUE(eventually([&] { return late->active_leases() == 1; }, scaled(2000ms)))
      << late->active_leases() << " records in the watchdog";
  EXPECT_TRUE(g.result->value().release().ok());
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("expired-grant")}), 0);
}

}  // namespace
