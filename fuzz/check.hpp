// check.hpp — the one assertion the fuzz targets use. A violated property must crash the
// target (libFuzzer then saves the input as a crash-* file), whatever NDEBUG says.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace dlock::fuzz {

[[noreturn]] inline void property_failed(const char* expr, std::string_view detail, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: property violated: %s\n  %.*s\n", file, line, expr,
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

}  // namespace dlock::fuzz

// FUZZ_CHECK(cond, detail): `detail` is anything convertible to std::string_view, evaluated
// only on failure.
#define FUZZ_CHECK(cond, detail) \
  do {                           \
    if (!(cond)) ::dlock::fuzz::property_failed(#cond, (detail), __FILE__, __LINE__); \
  } while (0)
