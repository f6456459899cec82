// What inspect() and force_unlock() share: the lock's key names, running one script and
// waiting for it, and reading the kind names the admin scripts reply with.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/client.hpp"
#include "scripts/script.hpp"

namespace dlock::detail {

// Runs `script` on `client`'s server and blocks for the reply. A transport failure or an error
// reply becomes an Error (WRONGTYPE: errc::wrong_type); `what` prefixes its message.
Result<Reply> run_admin_script(Client& client, const Script& script, const std::vector<std::string>& keys,
                               const std::vector<std::string>& args, const std::string& what);

// The error code of an error reply to an admin script. Like classify_error_reply, and an
// unauthenticated client's "Protocol error: unauthenticated multibulk length" (the server
// refuses long commands before AUTH) is errc::auth, as NOAUTH is.
std::error_code admin_error_code(const Reply& error_reply);

// The lock key P{N} of `name` under the Client's prefix, after validating the name.
Result<std::string> admin_lock_key(const Client& client, std::string_view name);

// "mutex" -> LockKind::mutex ...; anything unknown is LockKind::foreign.
LockKind lock_kind_from(std::string_view text) noexcept;
// "exclusive", "read", "write", "permits".
LockHolder::Mode holder_mode_from(std::string_view text) noexcept;

}  // namespace dlock::detail
