// owner_token.hpp — reading the owner token a lock key holds:
//   "<32 hex digits>@<host>:<pid>:<unix ms when taken>"  (dlock)
//   "<32 hex digits>@<host>:<pid>"                       (compatible: no acquisition time)
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::cli {

struct OwnerInfo {
  std::string host;
  long long pid = 0;
  std::optional<long long> since_unix_ms;  // when it was taken, on the holder's wall clock
};

// nullopt when `token` is not a dlock (or compatible) owner token.
std::optional<OwnerInfo> parse_owner_token(std::string_view token);

// Milliseconds since `since_unix_ms` on this machine's wall clock (0 if in the future).
long long held_for_ms(long long since_unix_ms);

// "host:pid" or, when the value is not a token, "(not a dlock owner token)".
std::string describe_holder(const std::optional<OwnerInfo>& info);

// A duration for people: "1m3s", "250ms", "2h5m" (seconds dropped above an hour).
std::string human_duration(long long ms);

// An ISO-8601 UTC time for a unix time in ms: "2024-05-01T10:00:00Z".
std::string iso_time(long long unix_ms);

}  // namespace dlock::cli
