// dlock-bench's switches for dlock's own knobs (--busy-poll-us, --callers-run-loop): they reach
// the ClientOptions every Client of the run is made with, defaults stay defaults, and a bad value
// is refused with exit status 64 before anything runs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "options.hpp"

namespace bench {
namespace {

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dlock-bench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

TEST(BenchOptions, ClientKnobsDefaultToTheLibrarysDefaults) {
  const Options o = parse({"--redis", "redis://127.0.0.1:1"});
  EXPECT_FALSE(o.busy_poll_us.has_value());
  EXPECT_FALSE(o.callers_run_loop.has_value());
  EXPECT_EQ(client_options().busy_poll, dlock::ClientOptions{}.busy_poll);
  EXPECT_EQ(client_options().callers_run_loop, dlock::ClientOptions{}.callers_run_loop);
}

TEST(BenchOptions, ClientKnobsReachTheClientOptions) {
  const Options o = parse({"--redis", "redis://127.0.0.1:1", "--busy-poll-us", "0", "--callers-run-loop", "off"});
  EXPECT_EQ(o.busy_poll_us, 0);
  EXPECT_EQ(o.callers_run_loop, false);
  EXPECT_EQ(client_options().busy_poll.count(), 0);
  EXPECT_FALSE(client_options().callers_run_loop);
}

TEST(BenchOptions, BadClientKnobsAreRefused) {
  EXPECT_EXIT(parse({"--redis", "redis://127.0.0.1:1", "--callers-run-loop", "maybe"}), testing::ExitedWithCode(64),
              "needs on or off");
  EXPECT_EXIT(parse({"--redis", "redis://127.0.0.1:1", "--busy-poll-us", "20000"}), testing::ExitedWithCode(64),
              "at most 10000");
  EXPECT_EXIT(parse({"--redis", "redis://127.0.0.1:1", "--busy-poll-us", "-1"}), testing::ExitedWithCode(64),
              "integer >= 0");
}

}  // namespace
}  // namespace bench
