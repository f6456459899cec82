// Encoding script calls: EVALSHA first, and the one EVAL fallback after NOSCRIPT (the server
// lost its script cache: SCRIPT FLUSH, a restart, a failover to a replica that never saw it).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "scripts/script.hpp"

namespace dlock::detail {

std::string encode_evalsha(const Script& s, std::span<const std::string_view> keys,
                           std::span<const std::string_view> args);
std::string encode_evalsha(const Script& s, const std::vector<std::string>& keys,
                           const std::vector<std::string>& args);
// The same call as EVAL with the source, derived from an EVALSHA encoding.
std::string evalsha_to_eval(const Script& s, const std::string& evalsha_payload);

}  // namespace dlock::detail
