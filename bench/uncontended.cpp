#include "uncontended.hpp"

#include <dlock/dlock.hpp>

#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "rate_window.hpp"

namespace bench {

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

  UncontendedResult out;
  out.pairs_per_second = r.per_second;
  out.commands = delta(before, after);
  out.commands_per_pair =
      r.operations == 0 ? 0 : static_cast<double>(client_issued(out.commands, dlock_script_commands())) /
                                  static_cast<double>(r.operations);
  out.errors = window.errors();
  return out;
}

}  // namespace bench
