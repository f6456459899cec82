// Which Cluster slot an encoded command must go to.
//
// ClientCore routes already-encoded commands (the lock kinds hand it RESP payloads), so the key is
// read back from the payload: the RESP array's first few bulk strings. Scripts and functions name
// their first key after numkeys; the sharded pub/sub commands hash their channel; a small list of
// commands has no key and may go to any node; every other command's first argument is its key
// (true of every keyed command dlock itself sends, and of the common ones callers send through
// Client::command).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dlock::detail {

// nullopt: the command has no key (or the payload is not a RESP array of bulk strings).
std::optional<std::uint16_t> command_slot(std::string_view payload);

}  // namespace dlock::detail
