// Integration tests of dlock::SharedMutex (read-write lock) against real redis-server processes.
//
// Exclusion is measured behind dlock's back with gauges in Redis (INCR on entry, DECR on exit),
// so threads and forked processes are counted alike.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/shared_mutex.hpp"
#include "scripts/script.hpp"
#include "support/fault_proxy.hpp"
#include "support/fairness_rounds.hpp"
#include "support/lock_helpers.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace dlock::detail::scripts {
extern const Script rw_release;
}  // namespace dlock::detail::scripts

namespace {

using dlock::test::LossProbe;
using dlock::test::command_calls;
using dlock::test::key_of;
using dlock::test::no_wait;
using dlock::test::watchdog;

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::eventually;
using dlock::test::ms_since;
using dlock::test::RawConnection;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using SharedMutexTest = dlock::test::ServerFixture;

dlock::WaitOptions wait_for(milliseconds timeout, milliseconds recheck = 100ms) {
  return dlock::WaitOptions{timeout, recheck};
}

long long to_count(const std::string& s) { return s == "(nil)" ? 0 : std::stoll(s); }

// Gauges: a reader entering increments "readers_in" (and records its maximum in "readers_max")
// and reports how many writers are in; a writer entering increments "writers_in" and reports
// how many readers are in. Atomic on the server, so threads and processes count alike.
const char* kReaderEnter =
    "local r = redis.call('INCR', KEYS[1]) "
    "if r > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], r) end "
    "return tonumber(redis.call('GET', KEYS[3]) or '0')";
const char* kWriterEnter =
    "local w = redis.call('INCR', KEYS[1]) "
    "return {w, tonumber(redis.call('GET', KEYS[2]) or '0')}";

// Enters as a reader; false when a writer was in.
bool reader_enter(dlock::Client& c) {
  auto r = c.command({"EVAL", kReaderEnter, "3", "readers_in", "readers_max", "writers_in"});
  return r.ok() && r->is_integer() && r->integer() == 0;
}
bool reader_leave(dlock::Client& c) { return c.command({"DECR", "readers_in"}).ok(); }
// Enters as a writer; false when another writer or any reader was in.
bool writer_enter(dlock::Client& c) {
  auto r = c.command({"EVAL", kWriterEnter, "2", "writers_in", "readers_in"});
  return r.ok() && r->is_array() && r->size() == 2 && (*r)[0].integer() == 1 && (*r)[1].integer() == 0;
}
bool writer_leave(dlock::Client& c) { return c.command({"DECR", "writers_in"}).ok(); }

// A non-atomic read-modify-write of "counter": loses updates unless writers exclude each other.
bool bump_counter(dlock::Client& c) {
  auto got = c.command({"GET", "counter"});
  if (!got.ok()) return false;
  const long long v = got->is_nil() ? 0 : std::stoll(got->str());
  std::this_thread::yield();
  return c.command({"SET", "counter", std::to_string(v + 1)}).ok();
}

// Sets `stop` and joins the threads when the test body leaves, also through a failed ASSERT.
struct JoinAll {
  std::atomic<bool>& stop;
  std::vector<std::thread>& threads;
  ~JoinAll() {
    stop.store(true);
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

// ----------------------------------------------------------------------------- readers

// Four threads take the read lock through one SharedMutex object and all hold it at once; a
// writer is kept out until the last one leaves.
TEST_F(SharedMutexTest, ReadersHoldTogether) {
  constexpr int kReaders = 4;
  dlock::SharedMutex m(*client, "readers");
  std::atomic<int> in{0};
  std::atomic<int> saw_all{0};
  std::atomic<bool> leave{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  JoinAll join_all{leave, threads};
  for (int i = 0; i < kReaders; ++i) {
    threads.emplace_back([&] {
      try {
        std::shared_lock<dlock::SharedMutex> lk(m);
        if (!m.owns_shared() || m.owns_lock()) failures.fetch_add(1);
        in.fetch_add(1);
        // Every reader waits until all of them are in: only possible if they hold together.
        if (eventually([&] { return in.load() == kReaders; }, 5000ms)) saw_all.fetch_add(1);
        while (!leave.load()) std::this_thread::sleep_for(5ms);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "reader: " << e.what();
        failures.fetch_add(1);
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return saw_all.load() == kReaders; }, 6000ms)) << "readers did not hold together";
  EXPECT_EQ(raw->cmd_int({"ZCARD", m.key() + ":readers"}), kReaders);

  dlock::Client other(server->url());
  dlock::SharedMutex writer(other, "readers");
  EXPECT_FALSE(writer.try_lock());
  EXPECT_FALSE(writer.try_lock_for(200ms));
  // Another reader still gets in (the writer that gave up withdrew its intent).
  EXPECT_TRUE(writer.try_lock_shared());
  writer.unlock_shared();

  leave.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(raw->cmd_int({"EXISTS", m.key() + ":readers"}), 0);
  EXPECT_EQ(raw->cmd_int({"EXISTS", m.key()}), 0) << "the lock key outlived the last reader";
  EXPECT_TRUE(writer.try_lock());
  EXPECT_EQ(raw->cmd_int({"HEXISTS", m.key(), "writer"}), 1);
  writer.unlock();
  EXPECT_EQ(raw->cmd_int({"EXISTS", m.key()}), 0);
}

// A writer waiting behind two readers (rechecking only every 10 s) stays out while one is left
// and is woken the moment the last one leaves.
TEST_F(SharedMutexTest, WriterWokenWhenLastReaderLeaves) {
  dlock::SharedMutex m(*client, "last-reader");
  auto r1 = m.acquire_shared(no_wait());
  auto r2 = m.acquire_shared(no_wait());
  ASSERT_TRUE(r1.ok() && r2.ok());
  dlock::Client wc(server->url());
  dlock::SharedMutex writer(wc, "last-reader");
  auto fut = std::async(std::launch::async, [&] {
    auto r = writer.acquire(dlock::WaitOptions{8000ms, 10000ms});
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"ZCARD", m.key() + ":wintent"}) == 1; }, 3000ms));
  ASSERT_TRUE(r1->release().ok());
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(fut.wait_for(0ms), std::future_status::timeout) << "the writer got in while a reader held it";
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(r2->release().ok());
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  auto [got, t1] = fut.get();
  ASSERT_TRUE(got.ok()) << got.error().what();
  EXPECT_LT(t1 - t0, 700ms) << "the writer was not woken when the last reader left";
  EXPECT_EQ(raw->cmd_int({"EXISTS", m.key() + ":wintent"}), 0) << "the writer's intent outlived its wait";
}

// Readers of one process waiting behind a writer (rechecking only every 10 s) are all woken
// by its release and enter together, none queued behind another.
TEST_F(SharedMutexTest, WaitingReadersEnterTogetherWhenWriterLeaves) {
  constexpr int kReaders = 3;
  dlock::Client wc(server->url());
  dlock::SharedMutex writer(wc, "writer-leaves");
  auto w = writer.acquire(no_wait());
  ASSERT_TRUE(w.ok()) << w.error().what();
  dlock::SharedMutex m(*client, "writer-leaves");
  std::vector<std::future<std::pair<dlock::Result<dlock::Lease>, SteadyClock::time_point>>> futs;
  for (int i = 0; i < kReaders; ++i) {
    futs.push_back(std::async(std::launch::async, [&] {
      auto r = m.acquire_shared(dlock::WaitOptions{8000ms, 10000ms});
      return std::make_pair(std::move(r), SteadyClock::now());
    }));
  }
  std::this_thread::sleep_for(300ms);
  for (auto& f : futs) ASSERT_EQ(f.wait_for(0ms), std::future_status::timeout) << "a reader got in under the writer";
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(w->release().ok());
  std::vector<dlock::Lease> leases;
  for (auto& f : futs) {
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    auto [got, t1] = f.get();
    ASSERT_TRUE(got.ok()) << got.error().what();
    EXPECT_LT(t1 - t0, 700ms) << "a reader was not woken by the writer's release";
    leases.push_back(std::move(*got));
  }
  EXPECT_EQ(raw->cmd_int({"ZCARD", m.key() + ":readers"}), kReaders);
}

// Readers and writers in threads (each with its own Client) and in two processes: a writer is
// always alone, readers do share, and no update of the writers is lost.
TEST_F(SharedMutexTest, WriterAloneAcrossThreadsAndProcesses) {
  constexpr int kThreads = 4;
  constexpr int kChildren = 2;
  constexpr int kIters = 16;  // every 4th iteration writes
  const std::string url = server->url();
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int i = 0; i < kChildren; ++i) {
    children.push_back(std::make_unique<ChildProcess>([url]() -> int {
      dlock::Client c(url);
      if (!c.ping().ok()) return 2;
      dlock::SharedMutex m(c, "rw-load");
      for (int k = 0; k < kIters; ++k) {
        if (k % 4 == 1) {
          std::unique_lock<dlock::SharedMutex> lk(m);
          if (!writer_enter(c)) return 3;
          if (!bump_counter(c)) return 4;
          if (!writer_leave(c)) return 5;
        } else {
          std::shared_lock<dlock::SharedMutex> lk(m);
          if (!reader_enter(c)) return 6;
          std::this_thread::sleep_for(3ms);
          if (!reader_leave(c)) return 7;
        }
      }
      return 0;
    }));
  }
  std::atomic<int> violations{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        dlock::Client c(url);
        dlock::SharedMutex m(c, "rw-load");
        for (int k = 0; k < kIters; ++k) {
          if (k % 4 == t % 4) {
            std::unique_lock<dlock::SharedMutex> lk(m);
            if (!writer_enter(c)) violations.fetch_add(1);
            if (!bump_counter(c)) violations.fetch_add(1);
            writer_leave(c);
          } else {
            std::shared_lock<dlock::SharedMutex> lk(m);
            if (!reader_enter(c)) violations.fetch_add(1);
            std::this_thread::sleep_for(3ms);
            reader_leave(c);
          }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker: " << e.what();
        violations.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& ch : children) {
    auto code = ch->wait_for(40s);
    ASSERT_TRUE(code.has_value()) << "child " << ch->pid() << " did not finish";
    EXPECT_EQ(*code, 0) << "child " << ch->pid() << " saw a violation (3: writer not alone, 6: reader with a writer)";
  }
  EXPECT_EQ(violations.load(), 0);
  const int writes = kThreads * (kIters / 4) + kChildren * (kIters / 4);
  EXPECT_EQ(to_count(raw->cmd({"GET", "counter"})), writes) << "a writer's update was lost";
  EXPECT_EQ(to_count(raw->cmd({"GET", "readers_in"})), 0);
  EXPECT_EQ(to_count(raw->cmd({"GET", "writers_in"})), 0);
  EXPECT_GE(to_count(raw->cmd({"GET", "readers_max"})), 2) << "readers never overlapped";
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("rw-load")}), 0);
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("rw-load") + ":wintent"}), 0);
}

// A stream of overlapping readers never leaves the lock free, yet a waiting writer gets in
// within a bound: its intent stops new readers. Without it, the writer would starve.
TEST_F(SharedMutexTest, NoWriterStarvation) {
  constexpr int kReaders = 6;
  const std::string url = server->url();
  std::atomic<bool> stop{false};
  std::atomic<long long> reads{0};
  std::atomic<int> violations{0};
  std::vector<std::thread> readers;
  JoinAll join_all{stop, readers};
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      try {
        std::this_thread::sleep_for(milliseconds(10 * i));  // staggered: always some reader in
        dlock::Client c(url);
        dlock::SharedMutex m(c, "starve");
        while (!stop.load()) {
          auto lease = m.acquire_shared(wait_for(10000ms));
          if (!lease.ok()) {
            if (!stop.load()) violations.fetch_add(1);
            continue;
          }
          if (!reader_enter(c)) violations.fetch_add(1);
          std::this_thread::sleep_for(60ms);
          reader_leave(c);
          reads.fetch_add(1);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "reader: " << e.what();
        violations.fetch_add(1);
      }
    });
  }
  dlock::Client wc(url);
  dlock::SharedMutex writer(wc, "starve");
  ASSERT_TRUE(eventually([&] { return reads.load() >= kReaders; }, 5000ms));
  // The readers leave no gap: a writer that does not wait (and so registers no intent) fails.
  int free_moments = 0;
  for (int i = 0; i < 10; ++i) {
    if (writer.try_lock()) {
      ++free_moments;
      writer.unlock();
    }
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_LE(free_moments, 2) << "the readers left the lock free; the test proves nothing";

  const long long reads_before = reads.load();
  const auto t0 = SteadyClock::now();
  auto lease = writer.acquire(wait_for(5000ms));
  const auto waited = ms_since(t0);
  ASSERT_TRUE(lease.ok()) << "the writer starved: " << lease.error().what();
  EXPECT_LT(waited, 1500ms) << "the writer waited too long behind the readers";
  EXPECT_TRUE(writer_enter(wc)) << "a reader was in while the writer held the lock";
  EXPECT_EQ(raw->cmd_int({"ZCOUNT", writer.key() + ":readers", "-inf", "+inf"}), 0);
  std::this_thread::sleep_for(100ms);  // readers stay out while the writer holds it
  EXPECT_EQ(to_count(raw->cmd({"GET", "readers_in"})), 0);
  writer_leave(wc);
  EXPECT_TRUE(lease->release().ok());
  // And the readers go on after the writer.
  EXPECT_TRUE(eventually([&] { return reads.load() >= reads_before + kReaders; }, 3000ms));
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(violations.load(), 0);
}

// ------------------------------------------------------------------------ crashes, expiry

// A reader process killed while holding: its own entry expires at its TTL and a writer gets in;
// nobody has to wait for anything longer.
TEST_F(SharedMutexTest, CrashedReaderHoldExpires) {
  const std::string url = server->url();
  ChildProcess child([url]() -> int {
    dlock::Client c(url);
    if (!c.ping().ok()) return 2;
    dlock::SharedMutex m(c, "crash-reader", watchdog(900ms));
    auto lease = m.acquire_shared(no_wait());
    if (!lease.ok()) return 3;
    if (!c.command({"SET", "child-ready", "1"}).ok()) return 4;
    std::this_thread::sleep_for(60s);  // killed long before
    return 0;
  });
  ASSERT_TRUE(eventually([&] { return raw->cmd({"GET", "child-ready"}) == "1"; }, 5000ms));
  const std::string readers = key_of("crash-reader") + ":readers";
  ASSERT_EQ(raw->cmd_int({"ZCARD", readers}), 1);

  // A live reader of this process holds too, renewed by the watchdog: it must not pin the lock
  // for the dead one, nor be disturbed by its expiry.
  // Its TTL is long, so the readers' zset outlives the dead entry: only purging the expired
  // entry lets the writer in early.
  dlock::SharedMutex live(*client, "crash-reader", watchdog(5000ms));
  auto live_lease = live.acquire_shared(no_wait());
  ASSERT_TRUE(live_lease.ok()) << live_lease.error().what();
  dlock::Client wc(server->url());
  dlock::SharedMutex writer(wc, "crash-reader");
  EXPECT_FALSE(writer.try_lock());
  // The child renews: well past its TTL, its hold is still there.
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(raw->cmd_int({"ZCARD", readers}), 2);

  child.signal(SIGKILL);
  EXPECT_EQ(child.wait(), 128 + SIGKILL);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(live_lease->release().ok());
  auto lease = writer.acquire(wait_for(5000ms));
  ASSERT_TRUE(lease.ok()) << "the dead reader pinned the lock: " << lease.error().what();
  const auto waited = ms_since(t0);
  // Renewed every 300 ms with a 900 ms TTL: it expires 600-900 ms after the kill.
  EXPECT_GE(waited, 400ms) << "the writer got in while the dead reader's hold was still valid";
  EXPECT_LT(waited, 2500ms);
  EXPECT_EQ(raw->cmd_int({"ZCARD", readers}), 0);
  EXPECT_TRUE(lease->release().ok());
}

// A writer process killed while it waits: its intent expires and readers get in again.
TEST_F(SharedMutexTest, CrashedWaitingWritersIntentExpires) {
  dlock::SharedMutex reader(*client, "crash-writer", watchdog(3000ms));
  auto held = reader.acquire_shared(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  const std::string url = server->url();
  ChildProcess child([url]() -> int {
    dlock::Client c(url);
    if (!c.ping().ok()) return 2;
    dlock::SharedMutex m(c, "crash-writer", watchdog(900ms));
    auto lease = m.acquire(dlock::WaitOptions{60000ms, 100ms});
    return lease.ok() ? 3 : 4;
  });
  const std::string wintent = key_of("crash-writer") + ":wintent";
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"ZCARD", wintent}) == 1; }, 5000ms)) << "no intent registered";
  dlock::Client rc(server->url());
  dlock::SharedMutex other(rc, "crash-writer");
  EXPECT_FALSE(other.try_lock_shared()) << "a new reader got past a waiting writer";

  child.signal(SIGKILL);
  child.wait();
  const auto t0 = SteadyClock::now();
  auto r = other.acquire_shared(wait_for(5000ms));
  ASSERT_TRUE(r.ok()) << "the dead writer's intent never expired: " << r.error().what();
  EXPECT_LT(ms_since(t0), 2000ms);
  EXPECT_EQ(raw->cmd_int({"EXISTS", wintent}), 0);
}

// A reader that passes only ended intents removes them. Redis expires the set only once its time
// is past, so in the millisecond where the last intent ends, the set outlived the intents the
// reader had just passed (CrashedWaitingWritersIntentExpires failed on that boundary under load).
// Here the set's TTL is made to outlast its intents to pin the same state.
TEST_F(SharedMutexTest, ReaderPassingOnlyEndedIntentsRemovesThem) {
  dlock::SharedMutex m(*client, "ended-intents");
  const std::string wintent = m.key() + ":wintent";
  const long long now = raw->server_ms();
  raw->cmd({"ZADD", wintent, std::to_string(now - 50), "dead-writer-1", std::to_string(now - 10), "dead-writer-2"});
  raw->cmd({"PEXPIRE", wintent, "60000"});
  auto lease = m.acquire_shared(no_wait());
  ASSERT_TRUE(lease.ok()) << "ended intents kept a reader out: " << lease.error().what();
  EXPECT_EQ(raw->cmd_int({"EXISTS", wintent}), 0) << "the ended intents outlived the reader that passed them";
  EXPECT_TRUE(lease->release().ok());

  // A live intent among ended ones still keeps readers out, and stays.
  raw->cmd({"ZADD", wintent, std::to_string(raw->server_ms() - 10), "dead-writer", std::to_string(raw->server_ms() + 60000), "live-writer"});
  dlock::SharedMutex other(*client, "ended-intents");
  EXPECT_FALSE(other.try_lock_shared()) << "a reader got past a live intent";
  EXPECT_EQ(raw->cmd_int({"ZCARD", wintent}), 2);
}

// The watchdog renews each reader: a 300 ms reader lease held for 1.2 s keeps writers out, and
// its expiry score keeps moving forward.
TEST_F(SharedMutexTest, WatchdogRenewsReaders) {
  LossProbe probe;
  auto opts = watchdog(300ms);
  probe.attach(opts);
  dlock::SharedMutex m(*client, "renew-reader", opts);
  auto lease = m.acquire_shared(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  dlock::Client wc(server->url());
  dlock::SharedMutex writer(wc, "renew-reader");
  const std::string first = raw->cmd({"ZSCORE", m.key() + ":readers", lease->owner()});
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < 1200ms) {
    EXPECT_FALSE(writer.try_lock()) << "after " << ms_since(t0).count() << " ms";
    std::this_thread::sleep_for(100ms);
  }
  const std::string later = raw->cmd({"ZSCORE", m.key() + ":readers", lease->owner()});
  ASSERT_NE(later, "(nil)");
  EXPECT_GT(std::stoll(later), std::stoll(first) + 800);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  EXPECT_TRUE(lease->release().ok());
  EXPECT_TRUE(writer.try_lock());
  writer.unlock();
}

// A writer that gives up withdraws its intent at once: readers are not kept out by it.
TEST_F(SharedMutexTest, TimedOutWriterWithdrawsIntent) {
  dlock::SharedMutex reader(*client, "withdraw");
  auto held = reader.acquire_shared(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client wc(server->url());
  dlock::SharedMutex writer(wc, "withdraw");
  auto w = writer.acquire(wait_for(300ms));
  EXPECT_EQ(w.code(), make_error_code(dlock::errc::timeout)) << w.error().what();
  EXPECT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", writer.key() + ":wintent"}) == 0; }, 1000ms));
  EXPECT_TRUE(reader.try_lock_shared());
  reader.unlock_shared();
}

// A writer whose try got no answer (the outcome is unknown) gives up with an error, and the
// release that cleans up after that try (sent once the connection is back) also removes the
// writer's intent. Readers the intent kept out are told: they waited for their recheck (10 s
// here), because the cleanup removed the intent without a word and the withdrawal, sent while
// the connection was down, failed at once.
TEST_F(SharedMutexTest, CleanupAfterAnUnansweredWriterTryWakesTheReadersItsIntentKeptOut) {
  dlock::SharedMutex first(*client, "unknown-intent");
  auto held = first.acquire_shared(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::test::FaultProxy proxy("127.0.0.1", server->port());
  dlock::ClientOptions o;
  o.command_timeout = 300ms;
  dlock::Client wc(proxy.url(), o);
  dlock::SharedMutex writer(wc, "unknown-intent");
  // Shared with the callbacks: a failed ASSERT leaves the test while they may still run.
  auto wrote = std::make_shared<std::promise<dlock::Result<dlock::Lease>>>();
  writer.async_acquire(wait_for(20000ms, 200ms),
                       [wrote](dlock::Result<dlock::Lease> r) { wrote->set_value(std::move(r)); });
  const std::string intents = writer.key() + ":wintent";
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"ZCARD", intents}) == 1; }, 5000ms));

  dlock::Client rc(server->url());
  dlock::SharedMutex reader(rc, "unknown-intent");
  auto read = std::make_shared<std::promise<dlock::Result<dlock::Lease>>>();
  reader.async_acquire_shared(wait_for(30000ms, 10000ms),
                              [read](dlock::Result<dlock::Lease> r) { read->set_value(std::move(r)); });
  // Both waiters listen: the writer (through the proxy) and the reader.
  ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(*raw, writer.key() + ":ch") == 2; }, 5000ms));

  proxy.hold_replies();  // the writer's next try runs, its answer never comes
  auto w_future = wrote->get_future();
  ASSERT_EQ(w_future.wait_for(5000ms), std::future_status::ready) << "the writer never gave up";
  auto w = w_future.get();
  ASSERT_FALSE(w.ok()) << "the writer took a lock held by a reader";
  proxy.pass();
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"ZCARD", intents}) == 0; }, 5000ms))
      << "the cleanup never removed the intent";
  const auto gone = SteadyClock::now();

  auto r_future = read->get_future();
  ASSERT_EQ(r_future.wait_for(3000ms), std::future_status::ready)
      << "the reader was not told the intent that kept it out is gone";
  auto r = r_future.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_LT(ms_since(gone), 3000ms);
  EXPECT_TRUE(r->release().ok());
  EXPECT_TRUE(held->release().ok());
}

// A writer whose wait ends while its last try is still out (held here in a paused proxy)
// withdraws its intent only after that try's answer. With two connections per node the
// withdrawal took the other connection, could reach the server first, and the try then left a
// fresh intent that kept every reader out for a lease TTL. Which connection the try takes
// depends on how many commands went before it (round robin), so the rounds shift that by a
// PING: whichever order the proxy forwards its connections in, some round puts the withdrawal
// on the connection forwarded first.
TEST_F(SharedMutexTest, WithdrawalOnAnotherConnectionDoesNotOvertakeTheLastTry) {
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string name = "overtake-" + std::to_string(round);
    dlock::SharedMutex first(*client, name);
    auto held = first.acquire_shared(no_wait());
    ASSERT_TRUE(held.ok()) << held.error().what();

    dlock::test::FaultProxy proxy("127.0.0.1", server->port());
    dlock::ClientOptions o;
    o.connections_per_node = 2;
    dlock::Client wc(proxy.url(), o);
    ASSERT_TRUE(wc.ping().ok());
    dlock::SharedMutex writer(wc, name);
    auto wrote = std::make_shared<std::promise<dlock::Result<dlock::Lease>>>();
    const auto started = SteadyClock::now();
    writer.async_acquire(wait_for(1500ms, 200ms),
                         [wrote](dlock::Result<dlock::Lease> r) { wrote->set_value(std::move(r)); });
    const std::string intents = writer.key() + ":wintent";
    ASSERT_TRUE(eventually([&] { return raw->cmd_int({"ZCARD", intents}) == 1; }, 1000ms));
    if (round % 2 == 1) {
      ASSERT_TRUE(wc.ping().ok());
    }
    proxy.pause();  // the next try (a recheck within 240 ms) is held, and the wait runs out
    std::this_thread::sleep_until(started + 1800ms);
    proxy.pass();
    auto w_future = wrote->get_future();
    ASSERT_EQ(w_future.wait_for(5000ms), std::future_status::ready) << "the writer never gave up";
    auto w = w_future.get();
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.code(), make_error_code(dlock::errc::timeout)) << w.error().what();
    EXPECT_EQ(raw->cmd_int({"ZCARD", intents}), 0) << "the withdrawn writer's intent is back";
    EXPECT_TRUE(first.try_lock_shared()) << "a reader is kept out by a writer that stopped waiting";
    first.unlock_shared();
    EXPECT_TRUE(held->release().ok());
  }
}

// ---------------------------------------------------------------------------- downgrade

// The writer downgrades (std adapter): a reader that waited enters at once (woken by the
// downgrade notification, not by its 10 s recheck), a writer stays out, and the token is kept.
TEST_F(SharedMutexTest, DowngradeLetsWaitingReaderIn) {
  dlock::SharedMutex m(*client, "downgrade");
  m.lock();
  ASSERT_TRUE(m.owns_lock());
  const auto token = m.fencing_token();

  dlock::Client rc(server->url());
  dlock::SharedMutex reader(rc, "downgrade");
  auto fut = std::async(std::launch::async, [&] {
    auto r = reader.acquire_shared(dlock::WaitOptions{8000ms, 10000ms});
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(fut.wait_for(0ms), std::future_status::timeout) << "a reader got in while the writer held it";

  const auto t0 = SteadyClock::now();
  m.downgrade();
  EXPECT_FALSE(m.owns_lock());
  EXPECT_TRUE(m.owns_shared());
  EXPECT_EQ(m.fencing_token(), token);
  ASSERT_EQ(fut.wait_for(3s), std::future_status::ready) << "the waiting reader was not let in";
  auto [got, t1] = fut.get();
  ASSERT_TRUE(got.ok()) << got.error().what();
  EXPECT_LT(t1 - t0, 1000ms) << "the reader was not woken by the downgrade";
  EXPECT_EQ(got->token(), token) << "readers carry the epoch of the last writer";
  EXPECT_EQ(raw->cmd_int({"ZCARD", m.key() + ":readers"}), 2);
  EXPECT_EQ(raw->cmd_int({"HEXISTS", m.key(), "writer"}), 0);

  dlock::Client wc(server->url());
  dlock::SharedMutex writer(wc, "downgrade");
  EXPECT_FALSE(writer.try_lock());
  EXPECT_FALSE(writer.try_lock_for(200ms));

  m.unlock();  // mismatched: the thread holds it shared; nothing happens
  EXPECT_TRUE(m.owns_shared());
  EXPECT_EQ(m.last_error().code, make_error_code(dlock::errc::not_owner));
  m.unlock_shared();
  EXPECT_FALSE(m.owns_shared());
  EXPECT_FALSE(m.last_error()) << m.last_error().what();
  EXPECT_FALSE(writer.try_lock()) << "the other reader still holds it";
  EXPECT_TRUE(got->release().ok());
  EXPECT_TRUE(writer.try_lock());
  writer.unlock();
}

// Downgrade through the Lease API: the same Lease lives on as a read hold, renewed and released
// as one; a reader's lease downgrades to itself; a foreign lease is refused.
TEST_F(SharedMutexTest, DowngradeLease) {
  LossProbe probe;
  auto opts = watchdog(400ms);
  probe.attach(opts);
  dlock::SharedMutex m(*client, "downgrade-lease", opts);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const auto token = lease->token();
  ASSERT_TRUE(m.downgrade(*lease).ok());
  EXPECT_TRUE(m.downgrade(*lease).ok()) << "a repeated downgrade must be harmless";
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(lease->token(), token);
  EXPECT_NE(raw->cmd({"ZSCORE", m.key() + ":readers", lease->owner()}), "(nil)");

  // Renewed as a read hold well past its TTL.
  std::this_thread::sleep_for(1000ms);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  auto another = m.acquire_shared(no_wait());
  ASSERT_TRUE(another.ok()) << another.error().what();
  EXPECT_TRUE(m.downgrade(*another).ok());
  EXPECT_EQ(m.acquire(no_wait()).code(), make_error_code(dlock::errc::busy));

  dlock::SharedMutex other(*client, "other-lock");
  auto foreign = other.acquire(no_wait());
  ASSERT_TRUE(foreign.ok());
  EXPECT_EQ(m.downgrade(*foreign).code(), make_error_code(dlock::errc::invalid_argument));
  dlock::Lease empty;
  EXPECT_EQ(m.downgrade(empty).code(), make_error_code(dlock::errc::invalid_argument));

  EXPECT_TRUE(lease->release().ok());
  EXPECT_TRUE(another->release().ok());
  EXPECT_EQ(raw->cmd_int({"EXISTS", m.key()}), 0);
  EXPECT_THROW(m.downgrade(), std::system_error) << "the thread holds nothing to downgrade";
}

// The asynchronous forms: a writer queued behind a reader completes once the reader leaves.
TEST_F(SharedMutexTest, AsyncAcquire) {
  dlock::SharedMutex m(*client, "async");
  std::promise<dlock::Result<dlock::Lease>> read_done, write_done;
  m.async_acquire_shared(no_wait(), [&](dlock::Result<dlock::Lease> r) { read_done.set_value(std::move(r)); });
  auto rf = read_done.get_future();
  ASSERT_EQ(rf.wait_for(5s), std::future_status::ready);
  auto reader = rf.get();
  ASSERT_TRUE(reader.ok()) << reader.error().what();
  m.async_acquire(wait_for(5000ms), [&](dlock::Result<dlock::Lease> r) { write_done.set_value(std::move(r)); });
  auto wf = write_done.get_future();
  EXPECT_EQ(wf.wait_for(300ms), std::future_status::timeout) << "the writer got in under a reader";
  ASSERT_TRUE(reader->release().ok());
  ASSERT_EQ(wf.wait_for(5s), std::future_status::ready);
  auto writer = wf.get();
  ASSERT_TRUE(writer.ok()) << writer.error().what();
  EXPECT_GT(writer->token(), reader->token());
  EXPECT_EQ(raw->cmd_int({"HEXISTS", m.key(), "writer"}), 1);
}

// ------------------------------------------------------------------------------ fencing

// Writers' tokens strictly increase across threads and Clients; a reader carries the epoch of
// the last writer; a resource fencing with ">= highest seen" rejects a reader of an older epoch.
TEST_F(SharedMutexTest, WriterTokensStrictlyIncreaseAndReadersCarryTheEpoch) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 8;
  std::mutex mu;
  std::vector<std::uint64_t> tokens;  // appended while holding the write lock: acquisition order
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  const std::string url = server->url();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        dlock::Client c(url);
        dlock::SharedMutex m(c, "fence");
        for (int i = 0; i < kPerThread; ++i) {
          if ((i + t) % 2 == 0) {
            std::lock_guard<dlock::SharedMutex> g(m);
            std::lock_guard lk(mu);
            tokens.push_back(m.fencing_token().value);
          } else {
            auto lease = m.acquire(wait_for(10000ms));
            if (!lease.ok()) throw std::runtime_error(lease.error().what());
            {
              std::lock_guard lk(mu);
              tokens.push_back(lease->token().value);
            }
            if (!lease->release().ok()) failures.fetch_add(1);
          }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(kThreads * kPerThread));
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    EXPECT_GT(tokens[i], tokens[i - 1]) << "token " << i << " did not increase";
  }

  dlock::SharedMutex m(*client, "fence");
  auto reader = m.acquire_shared(no_wait());
  ASSERT_TRUE(reader.ok()) << reader.error().what();
  EXPECT_EQ(reader->token().value, tokens.back()) << "a reader's token is the last writer's epoch";
  auto reader2 = m.acquire_shared(no_wait());
  ASSERT_TRUE(reader2.ok());
  EXPECT_EQ(reader2->token(), reader->token());
  auto accepted = dlock::fenced_set(*client, "resource", "read-1", reader->token());
  ASSERT_TRUE(accepted.ok()) << accepted.error().what();
  EXPECT_TRUE(accepted->accepted);
  ASSERT_TRUE(reader->release().ok());
  ASSERT_TRUE(reader2->release().ok());

  auto w = m.acquire(no_wait());
  ASSERT_TRUE(w.ok()) << w.error().what();
  EXPECT_GT(w->token(), reader->token());
  auto by_writer = dlock::fenced_set(*client, "resource", "written", w->token());
  ASSERT_TRUE(by_writer.ok());
  EXPECT_TRUE(by_writer->accepted);
  auto stale = dlock::fenced_set(*client, "resource", "stale-read", reader->token());
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->accepted) << "a reader of an older epoch was accepted after a newer writer";
  EXPECT_TRUE(w->release().ok());
}

// -------------------------------------------------------------------------------- loss

// Loss is reported for both modes: a reader whose entry is removed, a writer whose key is
// deleted, and a reader whose lock key is deleted (a forced unlock ends every hold).
TEST_F(SharedMutexTest, LossIsReported) {
  LossProbe reader_probe, writer_probe, second_probe;
  auto ro = watchdog(600ms);
  reader_probe.attach(ro);
  dlock::SharedMutex r(*client, "loss", ro);
  auto reader = r.acquire_shared(no_wait());
  ASSERT_TRUE(reader.ok()) << reader.error().what();
  ASSERT_EQ(raw->cmd_int({"ZREM", r.key() + ":readers", reader->owner()}), 1);
  ASSERT_TRUE(eventually([&] { return reader_probe.calls.load() == 1; }, 2000ms)) << "reader loss not reported";
  EXPECT_EQ(reader_probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_TRUE(reader->lost());
  EXPECT_EQ(reader->release().code(), make_error_code(dlock::errc::lock_lost));

  auto wo = watchdog(600ms);
  writer_probe.attach(wo);
  dlock::SharedMutex w(*client, "loss", wo);
  w.lock();
  ASSERT_EQ(raw->cmd_int({"DEL", w.key()}), 1);
  ASSERT_TRUE(eventually([&] { return writer_probe.calls.load() == 1; }, 2000ms)) << "writer loss not reported";
  EXPECT_TRUE(w.lost());
  EXPECT_FALSE(w.owns_lock());
  w.unlock();
  EXPECT_EQ(w.last_error().code, make_error_code(dlock::errc::lock_lost));
  EXPECT_EQ(raw->cmd_int({"EXISTS", w.key()}), 0) << "a renewal re-created the lost lock";

  auto so = watchdog(600ms);
  second_probe.attach(so);
  dlock::SharedMutex s(*client, "loss", so);
  s.lock_shared();
  ASSERT_EQ(raw->cmd_int({"DEL", s.key()}), 1);
  ASSERT_TRUE(eventually([&] { return second_probe.calls.load() == 1; }, 2000ms))
      << "a reader of a deleted lock was not told";
  EXPECT_TRUE(s.lost());
  s.unlock_shared();
  EXPECT_EQ(s.last_error().code, make_error_code(dlock::errc::lock_lost));
}

// ---------------------------------------------------------------------------- wrong type

TEST_F(SharedMutexTest, WrongTypeOnKeysOfAnotherKind) {
  const auto wrong = make_error_code(dlock::errc::wrong_type);
  {
    // A Mutex holds the name: its key is a string.
    dlock::Mutex mutex(*client, "kinds");
    auto held = mutex.acquire(no_wait());
    ASSERT_TRUE(held.ok());
    dlock::SharedMutex m(*client, "kinds");
    EXPECT_EQ(m.acquire(no_wait()).code(), wrong);
    auto r = m.acquire_shared(no_wait());
    EXPECT_EQ(r.code(), wrong);
    EXPECT_NE(r.error().what().find("SharedMutex"), std::string::npos) << r.error().what();
    try {
      m.lock_shared();
      ADD_FAILURE() << "lock_shared() on a Mutex's key did not throw";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), wrong);
    }
  }
  {
    // A hash without the SharedMutex marker (another kind's hash).
    ASSERT_EQ(raw->cmd_int({"HSET", key_of("hash"), "owner", "1"}), 1);
    dlock::SharedMutex m(*client, "hash");
    EXPECT_EQ(m.acquire(no_wait()).code(), wrong);
    EXPECT_EQ(m.acquire_shared(no_wait()).code(), wrong);
    EXPECT_EQ(raw->cmd({"HGET", key_of("hash"), "owner"}), "1");
  }
  {
    // The readers' key holds a string.
    ASSERT_EQ(raw->cmd({"SET", key_of("readers-str") + ":readers", "x"}), "OK");
    dlock::SharedMutex m(*client, "readers-str");
    EXPECT_EQ(m.acquire_shared(no_wait()).code(), wrong);
    EXPECT_EQ(m.acquire(no_wait()).code(), wrong);
  }
  {
    // The other way round: a Mutex on a SharedMutex's key.
    dlock::SharedMutex m(*client, "rw-held");
    auto held = m.acquire_shared(no_wait());
    ASSERT_TRUE(held.ok());
    dlock::Mutex mutex(*client, "rw-held");
    EXPECT_EQ(mutex.acquire(no_wait()).code(), wrong);
  }
}

// A fencing counter that holds no number, or a key of another type, is refused before the
// scripts write anything: a reader's hold written first stayed behind a reply without a token,
// which the client could neither use nor release, and kept writers out for a lease TTL.
TEST_F(SharedMutexTest, AFenceThatIsNoCounterIsRefusedBeforeAnyHoldIsWritten) {
  const auto wrong = make_error_code(dlock::errc::wrong_type);
  ASSERT_EQ(raw->cmd({"SET", key_of("bad-fence") + ":fence", "abc"}), "OK");
  dlock::SharedMutex m(*client, "bad-fence");
  auto r = m.acquire_shared(no_wait());
  EXPECT_EQ(r.code(), wrong) << (r.ok() ? std::string("acquired") : r.error().what());
  if (!r.ok()) {
    EXPECT_NE(r.error().what().find("not a counter"), std::string::npos) << r.error().what();
  }
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("bad-fence")}), 0) << "a reader's hold was left behind";
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("bad-fence") + ":readers"}), 0) << "a reader was left behind";
  auto w = m.acquire(no_wait());
  EXPECT_EQ(w.code(), wrong) << (w.ok() ? std::string("acquired") : w.error().what());
  if (!w.ok()) {
    EXPECT_NE(w.error().what().find(":fence"), std::string::npos) << "names the key: " << w.error().what();
  }
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("bad-fence")}), 0) << "a writer's hold was left behind";

  // Strings Lua's tonumber() reads as numbers but the writers' INCR refuses: a reader must not
  // take a token from them that no writer can follow. Nor from a negative counter (tokens are
  // unsigned), nor one past the last token 2^53 - 1 (Lua's numbers round it), which INCR itself
  // would count on and writers refuse too (fence_counter_test.cpp).
  for (const char* lookalike : {"1e5", "0x10", "inf", "1.5", " 7", "+7", "007", "-3", "9007199254740992"}) {
    ASSERT_EQ(raw->cmd({"SET", key_of("bad-fence") + ":fence", lookalike}), "OK");
    auto looked = m.acquire_shared(no_wait());
    EXPECT_EQ(looked.code(), wrong) << "'" << lookalike << "': "
                                    << (looked.ok() ? std::string("acquired") : looked.error().what());
    EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("bad-fence") + ":readers"}), 0) << lookalike;
    EXPECT_EQ(m.acquire(no_wait()).code(), wrong) << lookalike;
    EXPECT_EQ(raw->cmd({"GET", key_of("bad-fence") + ":fence"}), lookalike) << "the counter was changed";
  }

  ASSERT_EQ(raw->cmd_int({"DEL", key_of("bad-fence") + ":fence"}), 1);
  ASSERT_EQ(raw->cmd_int({"LPUSH", key_of("bad-fence") + ":fence", "1"}), 1);
  auto listed = m.acquire_shared(no_wait());
  EXPECT_EQ(listed.code(), wrong) << (listed.ok() ? std::string("acquired") : listed.error().what());
  if (!listed.ok()) {
    EXPECT_NE(listed.error().what().find("list"), std::string::npos) << listed.error().what();
  }
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("bad-fence") + ":readers"}), 0);
  EXPECT_EQ(m.acquire(no_wait()).code(), wrong);

  // Counters are taken as they are, up to the last token, 2^53 - 1.
  for (const char* counter : {"42", "1764979200123456", "9007199254740991"}) {
    ASSERT_EQ(raw->cmd({"SET", key_of("bad-fence") + ":fence", counter}), "OK");
    auto read = m.acquire_shared(no_wait());
    ASSERT_TRUE(read.ok()) << counter << ": " << read.error().what();
    EXPECT_EQ(read->token().value, std::stoull(counter)) << counter;
    EXPECT_TRUE(read->release().ok());
  }
  // Zero is seeded from the server's clock, as a missing counter and as a writer's INCR does
  // (a reader of epoch 0 held no token: zero is none).
  ASSERT_EQ(raw->cmd({"SET", key_of("bad-fence") + ":fence", "0"}), "OK");
  {
    const auto now_us = static_cast<std::uint64_t>(raw->server_ms()) * 1000;
    auto read = m.acquire_shared(no_wait());
    ASSERT_TRUE(read.ok()) << read.error().what();
    EXPECT_GE(read->token().value, now_us);
    EXPECT_EQ(raw->cmd({"GET", key_of("bad-fence") + ":fence"}), std::to_string(read->token().value));
    EXPECT_TRUE(read->release().ok());
  }

  ASSERT_EQ(raw->cmd_int({"DEL", key_of("bad-fence") + ":fence"}), 1);
  auto fine = m.acquire_shared(no_wait());
  ASSERT_TRUE(fine.ok()) << fine.error().what();
  EXPECT_TRUE(fine->release().ok());
}

// The writers' wait queue is keyed by the lock key, the first key of rw_release, which the
// hold-back is keyed by (it was P{N}:w, which no release named: the hold-back never applied).
TEST_F(SharedMutexTest, ReleasingProcessLetsAWriterElsewhereGoFirst) {
  dlock::SharedMutex mine(*client, "courtesy");
  dlock::Client other_client(server->url());
  dlock::SharedMutex theirs(other_client, "courtesy");
  const dlock::WaitOptions wait{10000ms, 10000ms};
  const int won = dlock::test::rounds_the_other_client_went_first(
      *raw, key_of("courtesy") + ":ch", [&] { return mine.acquire(wait); }, [&] { return theirs.acquire(wait); });
  EXPECT_GE(won, 8) << "the other Client's writer went first in only " << won << " of 10 rounds";
}

// Issue #6 (Redis calls per EVALSHA cost throughput): one TYPE per acquire, on the lock key
// (P{N} has no command of its own that would fail on another type); the other keys' types are
// asked only when a command on them failed (WrongTypeOnKeysOfAnotherKind keeps the replies).
TEST_F(SharedMutexTest, UncontendedPairsRunOneTypeCheck) {
  dlock::SharedMutex m(*client, "calls");
  auto first = m.acquire(no_wait());  // seeds the fencing counter
  ASSERT_TRUE(first.ok() && first->release().ok());
  raw->cmd({"CONFIG", "RESETSTAT"});
  auto w = m.acquire(no_wait());
  ASSERT_TRUE(w.ok()) << w.error().what();
  ASSERT_TRUE(w->release().ok());
  EXPECT_EQ(command_calls(*raw, "type"), 1) << "writer";
  raw->cmd({"CONFIG", "RESETSTAT"});
  auto r = m.acquire_shared(no_wait());
  ASSERT_TRUE(r.ok()) << r.error().what();
  ASSERT_TRUE(r->release().ok());
  EXPECT_EQ(command_calls(*raw, "type"), 1) << "reader";
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("calls")}), 0);
}

// A release that publishes reports how many subscribers it reached (2 + n); the releasing
// Client holds its next writer try back on P{N}, KEYS[1], now its writers' queue key.
TEST_F(SharedMutexTest, ReleaseReportsTheSubscribersItNotified) {
  dlock::SharedMutex m(*client, "notified");
  const std::string key = key_of("notified");
  RawConnection listener(*server);
  ASSERT_EQ(listener.cmd_array({"SUBSCRIBE", key + ":ch"}).size(), 3u);
  const auto& script = dlock::detail::scripts::rw_release;
  auto release = [&](const std::string& owner) {
    return raw->cmd({"EVAL", script.source, "4", key, key + ":readers", key + ":released", key + ":wintent", owner,
                     key + ":ch", "30000"});
  };
  auto w = m.acquire(no_wait());
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(release(w->owner()), "3") << "a writer's release, one subscriber: 2 + 1";
  auto r1 = m.acquire_shared(no_wait());
  auto r2 = m.acquire_shared(no_wait());
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(release(r1->owner()), "1") << "a reader that is not the last notifies nobody";
  EXPECT_EQ(release(r2->owner()), "3") << "the last reader's release, one subscriber: 2 + 1";
  EXPECT_EQ(raw->cmd_int({"EXISTS", key}), 0);
}

}  // namespace
