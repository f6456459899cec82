// Jitter must differ across processes forked from one parent: with a per-thread generator
// seeded once and copied by fork(), a pre-fork server's workers drew their parent's sequence and
// retried in lockstep, which is what jitter exists to prevent.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "util/jitter_rng.hpp"

namespace dlock::detail {
namespace {

// Draws one value in a forked child (after the parent used its generator) and returns it along
// with the parent's own next draw.
std::pair<std::uint64_t, std::uint64_t> draw_in_child_and_parent() {
  int fds[2];
  if (::pipe(fds) != 0) return {0, 0};
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::uint64_t v = jitter_rng()();
    const bool ok = ::write(fds[1], &v, sizeof v) == static_cast<ssize_t>(sizeof v);
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  const std::uint64_t mine = jitter_rng()();
  std::uint64_t theirs = 0;
  const bool got = pid > 0 && ::read(fds[0], &theirs, sizeof theirs) == static_cast<ssize_t>(sizeof theirs);
  ::close(fds[0]);
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  EXPECT_TRUE(got && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return {theirs, mine};
}

TEST(JitterRng, ForkedProcessesDrawTheirOwn) {
  (void)jitter_rng()();  // in use on this thread before the fork
  const auto [child, parent] = draw_in_child_and_parent();
  EXPECT_NE(child, parent) << "the child drew the parent's next value";
  // A second fork: the generation moves on in every child, not only the first.
  const auto [child2, parent2] = draw_in_child_and_parent();
  EXPECT_NE(child2, parent2);
  EXPECT_NE(child2, child);
}

TEST(JitterRng, BetweenStaysInItsRange) {
  std::set<double> seen;
  for (int i = 0; i < 1000; ++i) {
    const double v = jitter_between(0.8, 1.2);
    ASSERT_GE(v, 0.8);
    ASSERT_LT(v, 1.2);
    seen.insert(v);
  }
  EXPECT_GT(seen.size(), 990u);
}

}  // namespace
}  // namespace dlock::detail
