// dlock-bench-pairs: N acquire+release pairs of one lock on one thread, and nothing else: the
// program `scripts/bench BUILD --instructions` runs under callgrind (twice, with two values of N)
// to count the client's own instructions per pair. Unlike pairs/s on this shared VM, that count
// repeats to within 0.5% on an idle machine (load lowers it by up to 9%: compare counts taken at
// the same load), so a change to the client's per-call work shows in it at once
// (docs/BENCHMARKS.md, Method, 6).
//
// The Client runs with callers_run_loop off and busy_poll 0: the caller hands each command to the
// Client's own thread and sleeps until the reply, and neither thread spins, so the count is the
// work of the pair itself, not of polling whose length depends on how the threads were scheduled.
//
// --kind picks the lock (a Mutex unless told): each kind's own per-call work shows the same way.
//
//   dlock-bench-pairs --redis URL --pairs N [--name NAME] [--kind KIND]
#include <dlock/dlock.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "dlock-bench-pairs: %s\nusage: dlock-bench-pairs --redis URL --pairs N [--name NAME] "
               "[--kind mutex|reentrant|fair|write|read|semaphore|multi]\n",
               why);
  return 64;
}

// `pairs` acquire+release pairs through `acquire()`, which returns a Result<Lease>.
template <class Acquire>
int run_pairs(long pairs, Acquire acquire) {
  for (long i = 0; i < pairs; ++i) {
    auto lease = acquire();
    if (!lease) {
      std::fprintf(stderr, "dlock-bench-pairs: acquire failed: %s\n", lease.error().what().c_str());
      return 2;
    }
    if (auto released = lease->release(); !released) {
      std::fprintf(stderr, "dlock-bench-pairs: release failed: %s\n", released.error().what().c_str());
      return 2;
    }
  }
  return 0;
}

int run_kind(dlock::Client& client, std::string_view kind, const std::string& name, long pairs) {
  if (kind == "mutex") {
    dlock::Mutex lock(client, name);
    return run_pairs(pairs, [&] { return lock.acquire(); });
  }
  if (kind == "reentrant") {
    dlock::ReentrantMutex lock(client, name);
    return run_pairs(pairs, [&] { return lock.acquire(); });
  }
  if (kind == "fair") {
    dlock::FairLock lock(client, name);
    return run_pairs(pairs, [&] { return lock.acquire(); });
  }
  if (kind == "write" || kind == "read") {
    dlock::SharedMutex lock(client, name);
    if (kind == "read") return run_pairs(pairs, [&] { return lock.acquire_shared(); });
    return run_pairs(pairs, [&] { return lock.acquire(); });
  }
  if (kind == "semaphore") {
    dlock::Semaphore lock(client, name, 4);
    return run_pairs(pairs, [&] { return lock.acquire(1); });
  }
  if (kind == "multi") {
    dlock::MultiLock lock(client, {name + ":a", name + ":b"});
    return run_pairs(pairs, [&] { return lock.acquire(); });
  }
  return usage(("unknown kind " + std::string(kind)).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string url;
  std::string name = "bench:pairs";
  std::string kind = "mutex";
  long pairs = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) return usage(("missing value for " + std::string(a)).c_str());
    if (a == "--redis") url = argv[++i];
    else if (a == "--name") name = argv[++i];
    else if (a == "--kind") kind = argv[++i];
    else if (a == "--pairs") {
      char* end = nullptr;
      pairs = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || pairs < 0) return usage("--pairs takes a whole number >= 0");
    } else {
      return usage(("unknown option " + std::string(a)).c_str());
    }
  }
  if (url.empty() || pairs < 0) return usage("--redis and --pairs are required");
  try {
    dlock::ClientOptions options;
    options.callers_run_loop = false;
    options.busy_poll = std::chrono::microseconds(0);
    dlock::Client client(url, options);
    if (int rc = run_kind(client, kind, name, pairs); rc != 0) return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock-bench-pairs: %s\n", e.what());
    return 1;
  }
  std::printf("%ld pairs\n", pairs);
  return 0;
}
