// ReentrantMutex take ids name each take's release latch (P{N}:rel:<id>), so they must differ
// across processes, also processes forked after the id source was used: with a seeded generator
// copied by fork(), parent and children drew the same ids, and one process's release found
// another's latch and skipped its decrement (the lock stayed held until its TTL ended).
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "locks/reentrant_hold.hpp"

namespace dlock::detail {
namespace {

TEST(TakeId, SixteenHexDigits) {
  const std::string id = new_take_id();
  ASSERT_EQ(id.size(), 16u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(new_take_id());
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(TakeId, ForkedProcessesDrawTheirOwn) {
  (void)new_take_id();  // the source is in use before the fork, on this thread
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string id = new_take_id();
    const bool ok = ::write(fds[1], id.data(), id.size()) == static_cast<ssize_t>(id.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  const std::string mine = new_take_id();
  char buf[16];
  std::size_t got = 0;
  while (got < sizeof buf) {
    const ssize_t n = ::read(fds[0], buf + got, sizeof buf - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(got, sizeof buf);
  EXPECT_NE(std::string(buf, sizeof buf), mine) << "the child drew the parent's next id";
}

}  // namespace
}  // namespace dlock::detail
