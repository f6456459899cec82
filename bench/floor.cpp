#include "floor.hpp"

#include <cstdio>
#include <thread>
#include <vector>

#include "raw_redis.hpp"
#include "rate_window.hpp"
#include "stats.hpp"

namespace bench {

namespace {

// The textbook compare-and-delete release.
constexpr const char* compare_and_delete =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

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

RoundTrip floor_round_trip(const std::string& url, double warmup, double duration) {
  RawRedis c(url);
  RateWindow window(1);
  std::vector<double> samples_us;
  samples_us.reserve(1 << 20);
  std::thread th([&] {
    while (!window.stopped()) {
      const std::int64_t t0 = now_ns();
      auto r = c.format("PING");
      const std::int64_t t1 = now_ns();
      if (r->type != REDIS_REPLY_STATUS) {
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

}  // namespace bench
