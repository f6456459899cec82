#include "contended.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlock/dlock.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "clock.hpp"
#include "raw_redis.hpp"
#include "shared_region.hpp"
#include "stats.hpp"

namespace bench {

namespace {

constexpr int max_workers = 16;
constexpr std::uint32_t max_samples = 1u << 17;  // per worker; far above what 1 ms holds allow

// Mutex keeps the name it had before scenario 5; the other kinds each have their own.
std::string lock_name(LockKind kind) {
  return kind == LockKind::mutex ? "bench:contended" : "bench:contended:" + kind_info(kind).slug;
}

struct Sample {
  float handoff_us;
  std::int32_t from_worker;
};

struct alignas(64) WorkerSlot {
  std::atomic<std::uint64_t> acquisitions{0};
  std::atomic<std::int64_t> held_ns{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint32_t> samples{0};
  std::atomic<std::uint32_t> releases{0};
};

struct Shared {
  std::atomic<int> ready{0};
  std::atomic<int> go{0};
  std::atomic<int> measuring{0};
  std::atomic<int> stop{0};
  std::atomic<int> failed{0};
  // Written by the holder just before it issues release(); read by the next holder. The lock
  // itself orders these accesses: only the holder writes, and the next holder reads after its
  // acquisition, which the server ordered after the release.
  std::atomic<int> last_holder{-1};
  std::atomic<std::int64_t> last_release_ns{0};
  WorkerSlot slots[max_workers];
  Sample samples[max_workers][max_samples];
  float release_us[max_workers][max_samples];
  char error[256];
};

static_assert(std::atomic<std::int64_t>::is_always_lock_free, "shared across processes");

int process_of(int worker, int processes) { return worker % processes; }

void worker_loop(Shared& sh, BenchLock& m, int me, int hold_us) {
  tighten_timer_slack();
  WorkerSlot& slot = sh.slots[me];
  sh.ready.fetch_add(1);
  while (sh.go.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  while (sh.stop.load() == 0) {
    auto lease = m.acquire(dlock::WaitOptions{});
    const std::int64_t acquired = now_ns();
    if (!lease) {
      slot.errors.fetch_add(1);
      if (sh.error[0] == '\0') std::snprintf(sh.error, sizeof sh.error, "%s", lease.error().what().c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    const int prev = sh.last_holder.load();
    const std::int64_t released_at = sh.last_release_ns.load();
    const bool measuring = sh.measuring.load() != 0;
    if (measuring) {
      slot.acquisitions.fetch_add(1, std::memory_order_relaxed);
      if (prev >= 0 && prev != me) {
        const std::uint32_t i = slot.samples.load(std::memory_order_relaxed);
        if (i < max_samples) {
          sh.samples[me][i] = Sample{static_cast<float>(acquired - released_at) / 1e3f, prev};
          slot.samples.store(i + 1, std::memory_order_relaxed);
        }
      }
    }
    sleep_until_ns(acquired + static_cast<std::int64_t>(hold_us) * 1000);
    const std::int64_t release_issued = now_ns();
    if (measuring) slot.held_ns.fetch_add(release_issued - acquired, std::memory_order_relaxed);
    sh.last_holder.store(me);
    sh.last_release_ns.store(release_issued);
    auto rel = lease->release();
    const std::int64_t release_done = now_ns();
    if (!rel) {
      slot.errors.fetch_add(1);
      if (sh.error[0] == '\0') std::snprintf(sh.error, sizeof sh.error, "%s", rel.error().what().c_str());
    } else if (measuring) {
      const std::uint32_t i = slot.releases.load(std::memory_order_relaxed);
      if (i < max_samples) {
        sh.release_us[me][i] = static_cast<float>(release_done - release_issued) / 1e3f;
        slot.releases.store(i + 1, std::memory_order_relaxed);
      }
    }
  }
}

// The body of one forked worker process. Never returns.
[[noreturn]] void child_main(Shared& sh, const ContendedConfig& cfg, int proc) {
  int rc = 0;
  try {
    // Created after fork(): a Client's event-loop thread is ours only if we start it.
    const KindClients clients(cfg.kind, cfg.url, cfg.redlock_urls);
    const auto lock = make_lock(cfg.kind, clients, lock_name(cfg.kind));
    BenchLock& m = *lock;
    std::vector<std::thread> threads;
    for (int w = 0; w < cfg.workers; ++w) {
      if (process_of(w, cfg.processes) == proc) threads.emplace_back([&, w] { worker_loop(sh, m, w, cfg.hold_us); });
    }
    for (auto& t : threads) t.join();
  } catch (const std::exception& e) {
    std::snprintf(sh.error, sizeof sh.error, "%s", e.what());
    sh.failed.store(1);
    rc = 1;
  }
  std::fflush(nullptr);
  ::_exit(rc);
}

void reap(std::vector<pid_t>& pids, double timeout_s) {
  const std::int64_t until = now_ns() + static_cast<std::int64_t>(timeout_s * 1e9);
  for (pid_t& p : pids) {
    while (p > 0) {
      int status = 0;
      const pid_t r = ::waitpid(p, &status, WNOHANG);
      if (r == p || r < 0) {
        p = 0;
        break;
      }
      if (now_ns() > until) {
        ::kill(p, SIGKILL);
        ::waitpid(p, &status, 0);
        p = 0;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace

ContendedResult contended_run(const ContendedConfig& cfg) {
  if (cfg.workers > max_workers) throw std::runtime_error("at most 16 contended workers");
  if (cfg.processes < 2 || cfg.processes > cfg.workers) throw std::runtime_error("need 2..workers processes");
  if (!kind_info(cfg.kind).contended) throw std::runtime_error(kind_info(cfg.kind).label + " has no contended run");
  const std::vector<std::string> servers =
      cfg.kind == LockKind::redlock ? split_urls(cfg.redlock_urls) : std::vector<std::string>{cfg.url};
  for (const auto& u : servers) {
    RawRedis admin(u);
    admin.delete_matching("dlock:{" + lock_name(cfg.kind) + "*");
  }
  StatsReader stats(servers);

  SharedRegion<Shared> sh;
  std::fflush(nullptr);  // no buffered output may be written twice by the children
  std::vector<pid_t> pids;
  for (int p = 0; p < cfg.processes; ++p) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      sh->stop.store(1);
      sh->go.store(1);
      reap(pids, 5);
      throw std::runtime_error("fork failed");
    }
    if (pid == 0) child_main(*sh, cfg, p);
    pids.push_back(pid);
  }
  auto abort_run = [&](const std::string& why) {
    sh->stop.store(1);
    sh->go.store(1);
    reap(pids, 5);
    throw std::runtime_error(why);
  };
  const std::int64_t ready_by = now_ns() + 10'000'000'000LL;
  while (sh->ready.load() < cfg.workers) {
    if (sh->failed.load() != 0) abort_run(std::string("a worker process failed: ") + sh->error);
    if (now_ns() > ready_by) abort_run("worker processes did not start within 10 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  sh->go.store(1);
  std::this_thread::sleep_for(std::chrono::duration<double>(cfg.warmup));
  const CommandCounts before = stats.read();
  const std::int64_t t0 = now_ns();
  sh->measuring.store(1);
  std::this_thread::sleep_for(std::chrono::duration<double>(cfg.duration));
  sh->measuring.store(0);
  const std::int64_t t1 = now_ns();
  const CommandCounts after = stats.read();
  sh->stop.store(1);
  reap(pids, 15);
  if (sh->failed.load() != 0) throw std::runtime_error(std::string("a worker process failed: ") + sh->error);

  ContendedResult r;
  const double window = seconds_between(t0, t1);
  std::uint64_t min_acq = UINT64_MAX, max_acq = 0;
  std::int64_t held = 0;
  std::vector<double> cross, releases;
  for (int w = 0; w < cfg.workers; ++w) {
    const WorkerSlot& s = sh->slots[w];
    const std::uint64_t a = s.acquisitions.load();
    r.acquisitions += a;
    r.per_worker.push_back(static_cast<double>(a));
    min_acq = std::min(min_acq, a);
    max_acq = std::max(max_acq, a);
    held += s.held_ns.load();
    r.errors += s.errors.load();
    for (std::uint32_t i = 0; i < s.samples.load(); ++i) {
      const Sample& x = sh->samples[w][i];
      r.handoff_us.push_back(x.handoff_us);
      if (process_of(x.from_worker, cfg.processes) != process_of(w, cfg.processes)) cross.push_back(x.handoff_us);
    }
    for (std::uint32_t i = 0; i < s.releases.load(); ++i) releases.push_back(sh->release_us[w][i]);
  }
  r.acquisitions_per_second = static_cast<double>(r.acquisitions) / window;
  r.utilisation = static_cast<double>(held) / static_cast<double>(t1 - t0);
  r.fairness = max_acq == 0 ? 0 : static_cast<double>(min_acq) / static_cast<double>(max_acq);
  const LatencySummary h = summarize_latency(r.handoff_us);
  r.handoff_p50_us = h.p50;
  r.handoff_p99_us = h.p99;
  r.handoff_max_us = h.max;
  r.cross_process_p50_us = summarize_latency(std::move(cross)).p50;
  r.release_p50_us = summarize_latency(std::move(releases)).p50;
  r.commands = delta(before, after);
  r.commands_per_acquisition =
      r.acquisitions == 0 ? 0
                          : static_cast<double>(client_issued(r.commands, dlock_script_commands())) /
                                static_cast<double>(r.acquisitions);
  if (r.errors != 0) std::fprintf(stderr, "dlock-bench: contended: %llu errors, first: %s\n", r.errors, sh->error);
  return r;
}

}  // namespace bench
