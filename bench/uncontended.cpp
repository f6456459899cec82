#include "uncontended.hpp"

#include <dlock/dlock.hpp>

#include <atomic>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "rate_window.hpp"

namespace bench {

namespace {

// A window's pairs per second, and the client-issued commands per pair from its commandstats.
UncontendedResult result_of(const RateWindow::Result& r, const RateWindow& window, const CommandCounts& before,
                            const CommandCounts& after) {
  UncontendedResult out;
  out.pairs_per_second = r.per_second;
  out.commands = delta(before, after);
  out.commands_per_pair =
      r.operations == 0 ? 0 : static_cast<double>(client_issued(out.commands, dlock_script_commands())) /
                                  static_cast<double>(r.operations);
  out.errors = window.errors();
  return out;
}

}  // namespace

UncontendedResult uncontended_pairs(const std::string& url, int threads, AcquireStyle style, double warmup,
                                    double duration, LockKind kind, const std::string& redlock_urls) {
  const KindClients clients(kind, url, redlock_urls);
  StatsReader stats(clients.stat_urls());
  // Mutex keeps the key names it had before scenario 5; each other kind has its own names
  // (kinds may not share a name: wrong_type).
  const std::string base = kind == LockKind::mutex ? "bench:u:" : "bench:u:" + kind_info(kind).slug + ":";
  std::vector<std::unique_ptr<BenchLock>> locks;
  for (int t = 0; t < threads; ++t) locks.push_back(make_lock(kind, clients, base + std::to_string(t)));
  const dlock::WaitOptions wait =
      style == AcquireStyle::waiting ? dlock::WaitOptions{} : dlock::WaitOptions{dlock::milliseconds(0), {}};

  RateWindow window(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      BenchLock& m = *locks[static_cast<std::size_t>(t)];
      while (!window.stopped()) {
        auto lease = m.acquire(wait);
        if (!lease) {
          window.error(t);
          std::fprintf(stderr, "dlock-bench: uncontended acquire failed: %s\n", lease.error().what().c_str());
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          continue;
        }
        if (auto rel = lease->release(); !rel) {
          // Printed like a failed acquire: a failing release also changes the rate and the
          // commands per pair, so the reader must see why.
          window.error(t);
          std::fprintf(stderr, "dlock-bench: uncontended release failed: %s\n", rel.error().what().c_str());
          continue;
        }
        window.done(t);
      }
    });
  }
  CommandCounts before, after;
  auto r = window.measure(
      warmup, duration, [&] { before = stats.read(); }, [&] { after = stats.read(); });
  for (auto& th : pool) th.join();

  return result_of(r, window, before, after);
}

UncontendedResult uncontended_async_pairs(const std::string& url, int loops, double warmup, double duration) {
  const KindClients clients(LockKind::mutex, url, "");
  dlock::Client& client = *clients.clients().front();
  StatsReader stats(clients.stat_urls());
  RateWindow window(loops);
  // One chain per key. Its Lease waits in the chain between acquire and release (no allocation
  // per pair); the chain ends when the window has stopped, and the last one to end says so.
  struct Chain {
    std::unique_ptr<dlock::Mutex> mutex;
    dlock::Lease lease;
    int index = 0;
  };
  struct Shared {
    RateWindow* window = nullptr;
    std::atomic<int> running{0};
    std::promise<void> all_ended;
    std::function<void(Chain&)> step;
  } shared;
  shared.window = &window;
  std::vector<Chain> chains(static_cast<std::size_t>(loops));
  shared.step = [&shared](Chain& c) {
    if (shared.window->stopped()) {
      if (shared.running.fetch_sub(1) == 1) shared.all_ended.set_value();
      return;
    }
    c.mutex->async_acquire(dlock::WaitOptions{}, [&shared, &c](dlock::Result<dlock::Lease> r) {
      if (!r) {
        shared.window->error(c.index);
        std::fprintf(stderr, "dlock-bench: async acquire failed: %s\n", r.error().what().c_str());
        return shared.step(c);
      }
      c.lease = std::move(*r);
      c.lease.async_release([&shared, &c](dlock::Result<void> rel) {
        if (!rel) {
          shared.window->error(c.index);
          std::fprintf(stderr, "dlock-bench: async release failed: %s\n", rel.error().what().c_str());
        } else {
          shared.window->done(c.index);
        }
        c.lease = dlock::Lease();  // released: returns at once
        shared.step(c);
      });
    });
  };
  for (int i = 0; i < loops; ++i) {
    auto& c = chains[static_cast<std::size_t>(i)];
    c.mutex = std::make_unique<dlock::Mutex>(client, "bench:ua:" + std::to_string(i));
    c.index = i;
  }
  shared.running.store(loops);
  auto ended = shared.all_ended.get_future();
  for (auto& c : chains) shared.step(c);
  CommandCounts before, after;
  auto r = window.measure(
      warmup, duration, [&] { before = stats.read(); }, [&] { after = stats.read(); });
  ended.wait();
  // Handlers run one at a time: once this round trip is answered, the callback that ended the
  // last chain has returned, and the chains can go.
  (void)client.command({"PING"});

  return result_of(r, window, before, after);
}

}  // namespace bench
