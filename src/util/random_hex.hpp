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

// Appends random_hex(n) to `out`.
inline void append_random_hex(std::string& out, std::size_t n) {
  std::array<unsigned char, 32> bytes{};  // on the stack: an owner token is drawn per acquisition
  if (n > bytes.size()) n = bytes.size();
  random_bytes(bytes.data(), n);
  static constexpr char hex[] = "0123456789abcdef";
  const std::size_t at = out.size();
  out.resize(at + 2 * n);
  char* p = out.data() + at;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char b = bytes[i];
    *p++ = hex[b >> 4];
    *p++ = hex[b & 15];
  }
}

inline std::string random_hex(std::size_t n) {
  std::string out;
  append_random_hex(out, n);
  return out;
}

}  // namespace dlock::detail
