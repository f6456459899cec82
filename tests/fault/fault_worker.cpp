// dlock-fault-worker: one process of the fault suite's workload (tests/fault/).
//
// Its threads contend for a few locks of one kind through ONE shared dlock::Client (as an
// application would), hold each acquisition for a while, write to a fenced resource during
// the hold, release, and append every step to a history file (support/history.hpp) at the
// moment it happens. The test that started it injects faults meanwhile and checks the merged
// history afterwards.
//
//   dlock-fault-worker --url URL --history FILE --proc NAME --resource DIR
//                      [--kind mutex|fair|rw|sem] [--locks a,b] [--threads N] [--seconds S]
//                      [--ttl MS] [--hold-ms MS] [--wait-ms MS] [--command-timeout MS]
//
// The fenced resource is a file per lock in DIR holding "<highest token> <writes so far>",
// updated under flock(2) with the fencing rule (accept a token >= the highest, store the
// maximum). It lives outside Redis on purpose: the faults hit Redis and the network to it,
// never the resource, the way a database behind a lock is independent of the lock service.
// Its write counter gives the resource's own total order of writes, which the checker uses.
//
// The worker writes during its hold WITHOUT first checking Lease::held(): a paused holder
// that resumes then really attempts a stale write, and the history shows whether the fencing
// rejected it. Exit code 0, or 2 on a usage error.

#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/history.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::Event;
using dlock::test::EventKind;
using dlock::test::now_ns;
using std::chrono::milliseconds;

struct Config {
  std::string url, history, proc, resource;
  std::string kind = "mutex";
  std::vector<std::string> locks{"m0", "m1"};
  int threads = 3;
  int seconds = 10;
  milliseconds ttl{1500};
  milliseconds hold{60};
  milliseconds wait{2000};
  milliseconds command_timeout{1000};
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t c = s.find(',', pos);
    if (c == std::string::npos) c = s.size();
    if (c > pos) out.push_back(s.substr(pos, c - pos));
    pos = c + 1;
  }
  return out;
}

bool parse(int argc, char** argv, Config& c) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--url") c.url = v;
    else if (k == "--history") c.history = v;
    else if (k == "--proc") c.proc = v;
    else if (k == "--resource") c.resource = v;
    else if (k == "--kind") c.kind = v;
    else if (k == "--locks") c.locks = split(v);
    else if (k == "--threads") c.threads = std::atoi(v.c_str());
    else if (k == "--seconds") c.seconds = std::atoi(v.c_str());
    else if (k == "--ttl") c.ttl = milliseconds(std::atoi(v.c_str()));
    else if (k == "--hold-ms") c.hold = milliseconds(std::atoi(v.c_str()));
    else if (k == "--wait-ms") c.wait = milliseconds(std::atoi(v.c_str()));
    else if (k == "--command-timeout") c.command_timeout = milliseconds(std::atoi(v.c_str()));
    else return false;
  }
  return (argc % 2) == 1 && !c.url.empty() && !c.history.empty() && !c.proc.empty() &&
         !c.resource.empty() && !c.locks.empty() && c.threads > 0;
}

// The fenced resource of one lock: see the file comment.
struct FencedWriteResult {
  bool accepted = false;
  std::uint64_t seq = 0;
};

FencedWriteResult fenced_file_write(const std::string& path, std::uint64_t token) {
  FencedWriteResult r;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return r;
  if (::flock(fd, LOCK_EX) == 0) {
    char buf[64] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    unsigned long long highest = 0, seq = 0;
    if (n > 0) std::sscanf(buf, "%llu %llu", &highest, &seq);
    r.seq = ++seq;
    r.accepted = token >= highest;
    if (r.accepted) highest = token;
    int len = std::snprintf(buf, sizeof buf, "%llu %llu\n", highest, seq);
    [[maybe_unused]] ssize_t w = ::pwrite(fd, buf, static_cast<std::size_t>(len), 0);
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return r;
}

std::string errc_name(std::error_code ec) {
  if (ec.category() != dlock::error_category()) return "system_" + std::to_string(ec.value());
  return std::string(dlock::errc_name(static_cast<dlock::errc>(ec.value())));
}

// One lock object of the configured kind, reduced to "acquire with a deadline" (the function
// owns it). A thread makes one per attempt: LeaseOptions belong to the lock object, and its
// on_lost must name the hold it reports. With one long-lived object per lock, on_lost had to
// look up "the thread's current hold", and a loss the watchdog reported just after release()
// had returned lock_lost for it was written down against the thread's next hold (the fencing
// rule then flagged that hold, whose "end" came before its acquisition).
using AcquireFn = std::function<dlock::Result<dlock::Lease>(dlock::WaitOptions)>;

AcquireFn make_lock(const Config& c, dlock::Client& client, const std::string& name, dlock::LeaseOptions lease) {
  if (c.kind == "fair") {
    auto l = std::make_shared<dlock::FairLock>(client, name, lease);
    return [l](dlock::WaitOptions w) { return l->acquire(w); };
  }
  if (c.kind == "rw") {
    auto l = std::make_shared<dlock::SharedMutex>(client, name, lease);
    return [l](dlock::WaitOptions w) { return l->acquire(w); };
  }
  if (c.kind == "sem") {
    auto l = std::make_shared<dlock::Semaphore>(client, name, 1, lease);
    return [l](dlock::WaitOptions w) { return l->acquire(1, w); };
  }
  auto l = std::make_shared<dlock::Mutex>(client, name, lease);
  return [l](dlock::WaitOptions w) { return l->acquire(w); };
}

void worker_thread(const Config& c, int index, dlock::Client& client,
                   dlock::test::HistoryWriter& out, std::atomic<std::uint64_t>& attempts,
                   std::chrono::steady_clock::time_point end) {
  std::mt19937 rng(static_cast<unsigned>(::getpid() * 131 + index));
  std::uint64_t seq = 0;
  while (std::chrono::steady_clock::now() < end) {
    const std::string& name = c.locks[rng() % c.locks.size()];
    const std::string hold = c.proc + "." + std::to_string(index) + "." + std::to_string(++seq);
    dlock::LeaseOptions options;
    options.ttl = c.ttl;
    options.events.on_lost = [hold, &out](dlock::LossReason why) {
      Event e;
      e.kind = EventKind::loss, e.t = now_ns(), e.hold = hold;
      e.outcome = why == dlock::LossReason::taken ? "taken" : "expired";
      out.append(e);
    };
    const AcquireFn acquire = make_lock(c, client, name, std::move(options));

    Event b;
    b.kind = EventKind::attempt_begin, b.proc = c.proc, b.lock = name;
    b.attempt = attempts.fetch_add(1) + 1, b.wait_ms = c.wait.count(), b.t = now_ns();
    out.append(b);
    dlock::WaitOptions w;
    w.timeout = c.wait;
    auto got = acquire(w);
    Event a;
    a.kind = EventKind::attempt_end, a.proc = c.proc, a.attempt = b.attempt, a.t = now_ns();
    a.outcome = got.ok() ? "acquired" : errc_name(got.code());
    // errc::timeout means either "the wait reached its deadline" or "one command got no reply
    // in time" (then the outcome of that command is unknown). The history must tell them apart.
    if (got.code() == dlock::errc::timeout && got.error().what().find("no reply") != std::string::npos) {
      a.outcome = "command_timeout";
    }
    out.append(a);
    if (!got.ok()) {
      if (got.code() != dlock::errc::timeout && got.code() != dlock::errc::busy) {
        std::this_thread::sleep_for(50ms);  // an error: do not spin while the fault lasts
      }
      continue;
    }
    dlock::Lease lease = std::move(got.value());
    Event acq;
    acq.kind = EventKind::acquire, acq.t = a.t, acq.proc = c.proc, acq.lock = name;
    acq.hold = hold, acq.owner = lease.owner(), acq.token = lease.token().value;
    acq.attempt = b.attempt;
    out.append(acq);

    // Hold it for a while (random, around --hold-ms), writing to the resource three times.
    const auto hold_for = c.hold / 2 + milliseconds(rng() % (c.hold.count() + 1));
    for (int k = 0; k < 3; ++k) {
      std::this_thread::sleep_for(hold_for / 3);
      auto wr = fenced_file_write(c.resource + "/" + name + ".res", lease.token().value);
      Event we;
      we.kind = EventKind::write, we.t = now_ns(), we.proc = c.proc, we.lock = name;
      we.hold = hold, we.token = lease.token().value, we.seq = wr.seq, we.accepted = wr.accepted;
      out.append(we);
    }
    Event rel;
    rel.kind = EventKind::release, rel.hold = hold, rel.t = now_ns();
    auto r = lease.release();
    rel.outcome = r.ok() ? "ok" : errc_name(r.code());
    out.append(rel);
    if (r.code() == dlock::errc::lock_lost) {
      Event l;
      l.kind = EventKind::loss, l.t = now_ns(), l.hold = hold, l.outcome = "release";
      out.append(l);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The fault suite attaches gdb to a hung worker to print its stacks (scenario.cpp); gdb is not
  // this process's parent, which Yama's ptrace_scope=1 would otherwise refuse.
  (void)::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  Config c;
  if (!parse(argc, argv, c)) {
    std::fprintf(stderr, "usage: dlock-fault-worker --url URL --history FILE --proc NAME --resource DIR [options]\n");
    return 2;
  }
  dlock::test::HistoryWriter out(c.history);
  dlock::ClientOptions opts;
  opts.command_timeout = c.command_timeout;
  opts.connect_timeout = c.command_timeout;
  opts.shutdown_timeout = c.command_timeout;
  opts.reconnect.max = 500ms;  // reconnect soon after a fault heals
  std::atomic<std::uint64_t> attempts{0};
  {
    dlock::Client client(c.url, opts);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(c.seconds);
    std::vector<std::thread> threads;
    for (int i = 0; i < c.threads; ++i) {
      threads.emplace_back([&, i] { worker_thread(c, i, client, out, attempts, end); });
    }
    for (auto& t : threads) t.join();
  }
  return 0;
}
