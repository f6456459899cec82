#include "uncontended.hpp"

#include <dlock/dlock.hpp>

#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "raw_redis.hpp"
#include "rate_window.hpp"

namespace bench {

UncontendedResult uncontended_pairs(const std::string& url, int threads, AcquireStyle style, double warmup,
                                    double duration) {
  RawRedis admin(url);
  dlock::Client client(url);
  if (auto ok = client.ping(); !ok) throw std::runtime_error("dlock client cannot reach the server: " + ok.error().what());
  std::vector<std::unique_ptr<dlock::Mutex>> mutexes;
  for (int t = 0; t < threads; ++t) {
    mutexes.push_back(std::make_unique<dlock::Mutex>(client, "bench:u:" + std::to_string(t)));
  }
  const dlock::WaitOptions wait =
      style == AcquireStyle::waiting ? dlock::WaitOptions{} : dlock::WaitOptions{dlock::milliseconds(0), {}};

  RateWindow window(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      dlock::Mutex& m = *mutexes[static_cast<std::size_t>(t)];
      while (!window.stopped()) {
        auto lease = m.acquire(wait);
        if (!lease) {
          window.error(t);
          std::fprintf(stderr, "dlock-bench: uncontended acquire failed: %s\n", lease.error().what().c_str());
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          continue;
        }
        if (auto rel = lease->release(); !rel) {
          window.error(t);
          continue;
        }
        window.done(t);
      }
    });
  }
  CommandCounts before, after;
  auto r = window.measure(
      warmup, duration, [&] { before = read_commandstats(admin); }, [&] { after = read_commandstats(admin); });
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
