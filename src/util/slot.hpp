// Redis Cluster key slots: CRC16 (XMODEM: poly 0x1021, init 0) of the key's hash tag, mod 16384.
//
// Every lock kind builds its keys as prefix + "{" + name + "}" + suffix, so all keys of one lock
// hash to the slot of its name; MultiLock uses key_slot() to tell whether its locks can be taken
// by one script (same slot) or need the ordered fallback.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace dlock::detail {

inline constexpr std::uint16_t cluster_slots = 16384;

namespace slot_detail {
constexpr std::array<std::uint16_t, 256> make_crc16_table() {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    std::uint16_t crc = static_cast<std::uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) ? ((crc << 1) ^ 0x1021) : (crc << 1));
    }
    t[i] = crc;
  }
  return t;
}
inline constexpr auto crc16_table = make_crc16_table();
}  // namespace slot_detail

constexpr std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<std::uint16_t>((crc << 8) ^ slot_detail::crc16_table[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

// The part of `key` that is hashed: the content of the first "{...}" when it is non-empty,
// otherwise the whole key (the rule Redis Cluster documents).
constexpr std::string_view hash_tag(std::string_view key) noexcept {
  auto open = key.find('{');
  if (open == std::string_view::npos) return key;
  auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

constexpr std::uint16_t key_slot(std::string_view key) noexcept {
  return static_cast<std::uint16_t>(crc16(hash_tag(key)) % cluster_slots);
}

}  // namespace dlock::detail
