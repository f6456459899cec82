// The spinning floor (bench/floor.hpp) against a real redis-server: it must do the same pairs
// as the blocking floor, every one succeeding, over a connection it took over from hiredis.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <string>

#include "floor.hpp"
#include "raw_redis.hpp"
#include "support/redis_server.hpp"

namespace bench {
namespace {

long long calls_of(RawRedis& c, const std::string& command) {
  const std::string info = c.info("commandstats");
  const std::string key = "cmdstat_" + command + ":calls=";
  const auto at = info.find(key);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + key.size()));
}

TEST(BenchFloor, SpinningFloorDoesWholePairsWithoutErrors) {
  dlock::test::RedisServer server;
  RawRedis admin(server.url());
  const long long set_before = calls_of(admin, "set");
  const long long evalsha_before = calls_of(admin, "evalsha");

  const FloorPairs p = spinning_floor_pairs(server.url(), 0.05, 0.3);

  EXPECT_EQ(p.errors, 0u);
  // Even a slow machine does hundreds of round trips in 0.3 s.
  EXPECT_GT(p.pairs_per_second, 100);
  // Every pair is one SET and one EVALSHA, and every release found its own token: nothing left.
  const long long sets = calls_of(admin, "set") - set_before;
  const long long evalshas = calls_of(admin, "evalsha") - evalsha_before;
  EXPECT_GE(sets, static_cast<long long>(p.pairs_per_second * 0.3));
  EXPECT_LE(evalshas, sets);
  EXPECT_GE(evalshas, sets - 1);  // the loop may stop between the two commands of its last pair
  auto exists = admin.command({"EXISTS", "bench:floor:spin"});
  EXPECT_EQ(exists->integer, 0);
}

TEST(BenchFloor, BlockingAndSpinningFloorsMeasureTheSameWork) {
  // Same server, back to back: both loops complete pairs and neither reports an error. Their
  // speeds are not compared (that depends on the VM's mode), only that both measure.
  dlock::test::RedisServer server;
  const FloorPairs blocking = floor_pairs(server.url(), 1, 0.05, 0.2);
  const FloorPairs spinning = spinning_floor_pairs(server.url(), 0.05, 0.2);
  EXPECT_EQ(blocking.errors, 0u);
  EXPECT_EQ(spinning.errors, 0u);
  EXPECT_GT(blocking.pairs_per_second, 0);
  EXPECT_GT(spinning.pairs_per_second, 0);
}

// The pipe round trip (no Redis): it measures, and it leaves no child behind (a zombie, or an
// echo still running, would outlive the measurement in every round of a full run).
TEST(BenchFloor, PipeRoundTripMeasuresAndReapsItsChild) {
  const RoundTrip rt = handover_round_trip(0.02, 0.2);
  EXPECT_GT(rt.p50_us, 0);
  EXPECT_GT(rt.per_second, 100);
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace bench
