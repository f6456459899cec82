// Validation of lock names and key prefixes, shared by every lock kind.
//
// A lock's keys are prefix + "{" + name + "}" + suffix: the name is the hash tag, so all of a
// lock's keys share one Cluster slot. That only holds when neither the name nor the prefix has
// braces of its own.
#pragma once

#include <string>
#include <string_view>

#include "dlock/result.hpp"

namespace dlock::detail {

inline constexpr std::size_t max_name_length = 512;

inline Result<void> validate_lock_name(std::string_view name) {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
  if (name.size() > max_name_length) {
    return Error(errc::invalid_argument,
                 "lock name is " + std::to_string(name.size()) + " bytes; at most 512 are allowed");
  }
  for (unsigned char c : name) {
    if (c == '{' || c == '}') {
      return Error(errc::invalid_argument, "lock name '" + std::string(name) + "' contains a brace");
    }
    if (c < 0x20 || c == 0x7f) {
      return Error(errc::invalid_argument, "lock name contains a control character");
    }
  }
  return {};
}

inline Result<void> validate_prefix(std::string_view prefix) {
  if (prefix.find_first_of("{}") != std::string_view::npos) {
    return Error(errc::invalid_argument, "key prefix '" + std::string(prefix) + "' contains a brace");
  }
  for (unsigned char c : prefix) {
    if (c < 0x20 || c == 0x7f || c == ' ') return Error(errc::invalid_argument, "key prefix contains a space or control character");
  }
  return {};
}

}  // namespace dlock::detail
