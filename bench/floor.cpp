#include "floor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <dlock/options.hpp>

#include "clock.hpp"
#include "raw_redis.hpp"
#include "rate_window.hpp"
#include "stats.hpp"

namespace bench {

namespace {

// The textbook compare-and-delete release.
constexpr const char* compare_and_delete =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

// A connection taken over from RawRedis (which connected and authenticated it) and driven by
// hand: RESP from redisFormatCommand, bytes through a non-blocking socket, replies parsed by a
// hiredis reader. It waits for a reply the way dlock's blocking callers do: polling for up to
// `spin` (dlock's default ClientOptions::busy_poll), then sleeping in poll(). A reply inside
// that budget (any round trip of either mode) never costs a wake-up. Unbounded, the spin can
// take the CPU the server needs on an oversubscribed machine: it measured 28 pairs/s in one
// round while a build shared the 2 vCPUs.
class SpinningConnection {
 public:
  SpinningConnection(const std::string& url, std::chrono::nanoseconds spin)
      : raw_(url), reader_(redisReaderCreate()), spin_ns_(spin.count()) {
    if (reader_ == nullptr) throw std::runtime_error("redisReaderCreate: out of memory");
    const int fd = raw_.fd();
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      throw std::runtime_error(std::string("fcntl O_NONBLOCK: ") + std::strerror(errno));
    }
  }
  ~SpinningConnection() { redisReaderFree(reader_); }
  SpinningConnection(const SpinningConnection&) = delete;
  SpinningConnection& operator=(const SpinningConnection&) = delete;

  template <class... A>
  ReplyPtr command(const char* fmt, A... args) {
    char* cmd = nullptr;
    const int len = redisFormatCommand(&cmd, fmt, args...);
    if (len < 0) throw std::runtime_error("redisFormatCommand failed");
    struct Free {
      char* p;
      ~Free() { redisFreeCommand(p); }
    } owned{cmd};
    write_all(cmd, static_cast<std::size_t>(len));
    return read_reply();
  }

 private:
  void write_all(const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(raw_.fd(), p, n);
      if (w > 0) {
        p += w;
        n -= static_cast<std::size_t>(w);
      } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        throw std::runtime_error(std::string("spinning floor: write: ") + std::strerror(errno));
      }
    }
  }

  ReplyPtr read_reply() {
    char buf[4096];
    std::int64_t spin_since = 0;  // first empty read of this wait (0: none yet)
    for (;;) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
        throw std::runtime_error(std::string("spinning floor: protocol error: ") + reader_->errstr);
      }
      if (reply != nullptr) return ReplyPtr(static_cast<redisReply*>(reply));
      const ssize_t r = ::read(raw_.fd(), buf, sizeof buf);
      if (r > 0) {
        if (redisReaderFeed(reader_, buf, static_cast<std::size_t>(r)) != REDIS_OK) {
          throw std::runtime_error("spinning floor: redisReaderFeed failed");
        }
      } else if (r == 0) {
        throw std::runtime_error("spinning floor: the server closed the connection");
      } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        const std::int64_t now = now_ns();
        if (spin_since == 0) spin_since = now;
        if (now - spin_since < spin_ns_) {
          // Nothing yet. Yield rather than spin flat out: when the server shares this vCPU (2
          // vCPUs, often), a flat spin would hold the CPU the reply has to be computed on until
          // the scheduler preempts it (A/B: 0.58-0.65x the blocking floor without the yield,
          // 0.94-1.02x with it). dlock's busy poll yields between polls the same way.
          ::sched_yield();
        } else {
          pollfd p{raw_.fd(), POLLIN, 0};
          if (::poll(&p, 1, -1) < 0 && errno != EINTR) {
            throw std::runtime_error(std::string("spinning floor: poll: ") + std::strerror(errno));
          }
        }
      } else {
        throw std::runtime_error(std::string("spinning floor: read: ") + std::strerror(errno));
      }
    }
  }

  RawRedis raw_;
  redisReader* reader_;
  std::int64_t spin_ns_;
};

}  // namespace

FloorPairs floor_pairs(const std::string& url, int connections, double warmup, double duration) {
  std::string sha;
  {
    RawRedis admin(url);
    sha = admin.load_script(compare_and_delete);
  }
  RateWindow window(connections);
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<RawRedis>> conns;
  for (int t = 0; t < connections; ++t) conns.push_back(std::make_unique<RawRedis>(url));
  for (int t = 0; t < connections; ++t) {
    threads.emplace_back([&, t] {
      RawRedis& c = *conns[static_cast<std::size_t>(t)];
      const std::string key = "bench:floor:" + std::to_string(t);
      // A token as long as dlock's (32 hex digits, '@', host:pid:ms), different every time.
      char token[80];
      unsigned long long i = 0;
      while (!window.stopped()) {
        ++i;
        std::snprintf(token, sizeof token, "%032llx@bench-floor-host:%d:%llu", i, t, i);
        auto set = c.format("SET %s %s NX PX 30000", key.c_str(), token);
        auto del = c.format("EVALSHA %s 1 %s %s", sha.c_str(), key.c_str(), token);
        if (set->type != REDIS_REPLY_STATUS || del->type != REDIS_REPLY_INTEGER || del->integer != 1) {
          window.error(t);
          continue;
        }
        window.done(t);
      }
    });
  }
  auto r = window.measure(warmup, duration);
  for (auto& th : threads) th.join();
  return FloorPairs{r.per_second, window.errors()};
}

FloorPairs spinning_floor_pairs(const std::string& url, double warmup, double duration) {
  std::string sha;
  {
    RawRedis admin(url);
    sha = admin.load_script(compare_and_delete);
  }
  SpinningConnection c(url, dlock::ClientOptions{}.busy_poll);
  RateWindow window(1);
  std::thread th([&] {
    const std::string key = "bench:floor:spin";
    char token[80];
    unsigned long long i = 0;
    while (!window.stopped()) {
      ++i;
      std::snprintf(token, sizeof token, "%032llx@bench-floor-host:spin:%llu", i, i);
      auto set = c.command("SET %s %s NX PX 30000", key.c_str(), token);
      auto del = c.command("EVALSHA %s 1 %s %s", sha.c_str(), key.c_str(), token);
      if (set->type != REDIS_REPLY_STATUS || del->type != REDIS_REPLY_INTEGER || del->integer != 1) {
        window.error(0);
        continue;
      }
      window.done(0);
    }
  });
  auto r = window.measure(warmup, duration);
  th.join();
  return FloorPairs{r.per_second, window.errors()};
}

namespace {

// Round trips made back to back on one thread over a timed window: their rate, and the median and
// mean of those completed inside the window. `once` makes one and returns false on a failure,
// which is counted and does not end the loop.
RoundTrip time_round_trips(double warmup, double duration, const std::function<bool()>& once) {
  RateWindow window(1);
  std::vector<double> samples_us;
  samples_us.reserve(1 << 20);
  std::thread th([&] {
    while (!window.stopped()) {
      const std::int64_t t0 = now_ns();
      const bool ok = once();
      const std::int64_t t1 = now_ns();
      if (!ok) {
        window.error(0);
        continue;
      }
      if (window.measuring() && samples_us.size() < samples_us.capacity()) {
        samples_us.push_back(static_cast<double>(t1 - t0) / 1e3);
      }
      window.done(0);
    }
  });
  auto r = window.measure(warmup, duration);
  th.join();
  RoundTrip rt;
  rt.per_second = r.per_second;
  double sum = 0;
  for (double s : samples_us) sum += s;
  rt.mean_us = samples_us.empty() ? 0 : sum / static_cast<double>(samples_us.size());
  rt.p50_us = summarize_latency(std::move(samples_us)).p50;
  return rt;
}

}  // namespace

RoundTrip floor_round_trip(const std::string& url, double warmup, double duration) {
  RawRedis c(url);
  return time_round_trips(warmup, duration, [&c] { return c.format("PING")->type == REDIS_REPLY_STATUS; });
}

RoundTrip handover_round_trip(double warmup, double duration) {
  int to_child[2], to_parent[2];
  if (::pipe(to_child) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe(to_parent) != 0) {
    ::close(to_child[0]);
    ::close(to_child[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
    throw std::runtime_error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    // The echo: only read(), write() and _exit() (async-signal-safe after a fork). A parent
    // that dies closes its ends, and read() returns 0.
    ::close(to_child[1]);
    ::close(to_parent[0]);
    char c = 0;
    while (::read(to_child[0], &c, 1) == 1 && c != 'q') {
      if (::write(to_parent[1], &c, 1) != 1) break;
    }
    ::_exit(0);
  }
  ::close(to_child[0]);
  ::close(to_parent[1]);
  char c = 'p';
  const RoundTrip rt = time_round_trips(warmup, duration, [&] {
    return ::write(to_child[1], &c, 1) == 1 && ::read(to_parent[0], &c, 1) == 1;
  });
  const char quit = 'q';
  (void)!::write(to_child[1], &quit, 1);
  ::close(to_child[1]);
  ::close(to_parent[0]);
  ::waitpid(pid, nullptr, 0);
  return rt;
}

}  // namespace bench
