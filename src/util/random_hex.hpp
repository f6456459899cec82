// random_hex(n): n (at most 32) bytes from the kernel's CSPRNG, as 2n lowercase hex digits. For identifiers
// that must differ across threads, processes and hosts (owner tokens, client ids, take ids):
// never a seeded generator, which a forked process would copy from its parent.
#pragma once

#include <sys/random.h>

#include <array>
#include <cstddef>
#include <string>

namespace dlock::detail {

// Fills `n` bytes at `out` from the kernel's CSPRNG (also the seed of the jitter generators).
inline void random_bytes(void* out, std::size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::getrandom(p + got, n - got, 0);
    if (r > 0) got += static_cast<std::size_t>(r);
  }
}

inline std::string random_hex(std::size_t n) {
  std::array<unsigned char, 32> bytes{};  // on the stack: an owner token is drawn per acquisition
  if (n > bytes.size()) n = bytes.size();
  random_bytes(bytes.data(), n);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char b = bytes[i];
    out.push_back(hex[b >> 4]);
    out.push_back(hex[b & 15]);
  }
  return out;
}

}  // namespace dlock::detail
