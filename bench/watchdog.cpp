#include "watchdog.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlock/dlock.hpp>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "clock.hpp"
#include "commandstats.hpp"
#include "options.hpp"
#include "process_stats.hpp"
#include "raw_redis.hpp"
#include "shared_region.hpp"

namespace bench {

namespace {

WatchdogResult run_here(const WatchdogConfig& cfg) {
  RawRedis admin(cfg.url);
  admin.delete_matching("dlock:{bench:w:*");
  WatchdogResult r;

  auto client = std::make_unique<dlock::Client>(cfg.url, client_options());
  if (auto ok = client->ping(); !ok) throw std::runtime_error("dlock client cannot reach the server: " + ok.error().what());
  {
    // Warm up the allocator and the Client's one-time state with one lock taken and released.
    dlock::Mutex warm(*client, "bench:w:warmup");
    auto l = warm.acquire();
    if (!l) throw std::runtime_error("watchdog warm-up: " + l.error().what());
  }

  const auto n = static_cast<std::size_t>(cfg.locks);
  const std::int64_t rss_before = rss_bytes();
  std::vector<std::unique_ptr<dlock::Mutex>> mutexes;
  mutexes.reserve(n);
  std::vector<dlock::Lease> leases(n);
  for (std::size_t i = 0; i < n; ++i) mutexes.push_back(std::make_unique<dlock::Mutex>(*client, "bench:w:" + std::to_string(i)));
  r.mutex_bytes_per_lock = static_cast<double>(rss_bytes() - rss_before) / static_cast<double>(n);

  // Take them all asynchronously (one try each: the keys are free), at most `window` in flight.
  const std::int64_t t_acq = now_ns();
  std::mutex mu;
  std::condition_variable cv;
  std::size_t done = 0, failed = 0, in_flight = 0;
  std::string first_error;
  constexpr std::size_t window = 1000;
  for (std::size_t i = 0; i < n; ++i) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return in_flight < window; });
      ++in_flight;
    }
    mutexes[i]->async_acquire(dlock::WaitOptions{dlock::milliseconds(0), {}}, [&, i](dlock::Result<dlock::Lease> res) {
      std::lock_guard lock(mu);
      if (res) {
        leases[i] = std::move(*res);
      } else {
        ++failed;
        if (first_error.empty()) first_error = res.error().what();
      }
      ++done;
      --in_flight;
      cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done == n; });
  }
  r.acquire_seconds = seconds_between(t_acq, now_ns());
  if (failed != 0) throw std::runtime_error("watchdog: " + std::to_string(failed) + " acquisitions failed: " + first_error);
  const std::int64_t rss_after = rss_bytes();
  r.bytes_per_lock = static_cast<double>(rss_after - rss_before) / static_cast<double>(n);

  // The hold window. A little longer than asked, so that a renewal round due exactly at its end
  // is inside it (the locks were taken before the window opened, each renewal is due 10 s
  // after its lock's previous one).
  const CommandCounts before = read_commandstats(admin);
  const double cpu0 = cpu_seconds();
  const std::int64_t t0 = now_ns();
  std::this_thread::sleep_for(std::chrono::duration<double>(cfg.hold_seconds + 0.25));
  const double cpu1 = cpu_seconds();
  const std::int64_t t1 = now_ns();
  const CommandCounts after = read_commandstats(admin);

  r.window_seconds = seconds_between(t0, t1);
  const CommandCounts d = delta(before, after);
  std::uint64_t renewals = 0;
  for (const auto& [name, calls] : d) {
    if (name == "evalsha" || name == "eval") renewals += calls;
  }
  r.renewals_per_second = static_cast<double>(renewals) / r.window_seconds;
  r.renewals_per_lock = static_cast<double>(renewals) / static_cast<double>(n);
  r.cpu_percent_of_core = 100.0 * (cpu1 - cpu0) / r.window_seconds;
  for (const auto& l : leases) r.lost += l.lost() ? 1 : 0;

  // Release everything from 8 threads (blocking releases, pipelined by the Client).
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> releasers;
  for (int t = 0; t < 8; ++t) {
    releasers.emplace_back([&] {
      for (std::size_t i = next++; i < n; i = next++) (void)leases[i].release();
    });
  }
  for (auto& t : releasers) t.join();
  leases.clear();
  mutexes.clear();
  client.reset();
  admin.delete_matching("dlock:{bench:w:*");
  return r;
}

struct ChildReport {
  WatchdogResult result;
  int done = 0;
  char error[256] = {};
};

}  // namespace

WatchdogResult watchdog_run(const WatchdogConfig& cfg) {
  SharedRegion<ChildReport> report;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int rc = 0;
    try {
      report->result = run_here(cfg);
      report->done = 1;
    } catch (const std::exception& e) {
      std::snprintf(report->error, sizeof report->error, "%s", e.what());
      rc = 1;
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  // Bounded: the hold, plus generous time to take and release the locks.
  const std::int64_t deadline = now_ns() + static_cast<std::int64_t>((cfg.hold_seconds + 120) * 1e9);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (now_ns() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      throw std::runtime_error("watchdog scenario did not finish in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (report->done == 0) {
    throw std::runtime_error(std::string("watchdog scenario failed: ") +
                             (report->error[0] ? report->error : "the child process died"));
  }
  return report->result;
}

}  // namespace bench
