// Where the dlock CLI binary of this build tree is, for the tests that run it.
#pragma once

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace dlock::test {

// <test exe dir>/../cli/dlock when it exists and is executable, else $DLOCK_CLI, else "".
inline std::string cli_binary() {
  char buf[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    const std::filesystem::path exe(std::string(buf, static_cast<std::size_t>(n)));
    const std::filesystem::path candidate = exe.parent_path() / ".." / "cli" / "dlock";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.lexically_normal().string();
  }
  const char* env = std::getenv("DLOCK_CLI");
  if (env != nullptr && ::access(env, X_OK) == 0) return env;
  return {};
}

}  // namespace dlock::test
