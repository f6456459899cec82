// exit_codes.hpp — the dlock CLI's exit codes (sysexits), the same for every command, and the
// one mapping from dlock::errc to them.
#pragma once

#include <string_view>
#include <system_error>

namespace dlock::cli {

namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int found = 1;            // leaks: abnormal locks found; unlock --force: was not held
inline constexpr int usage = 64;           // EX_USAGE: bad command line (option, duration, name)
inline constexpr int wrong_type = 65;      // EX_DATAERR: the key holds another kind of value
inline constexpr int unreachable = 69;     // EX_UNAVAILABLE: the Redis server cannot be reached
inline constexpr int lost = 70;            // run: the lock was lost (or too short-lived to start the command)
inline constexpr int not_acquired = 75;    // EX_TEMPFAIL: busy (--no-wait) or --wait ran out
inline constexpr int server_error = 76;    // EX_PROTOCOL: unexpected server error (script, OOM, READONLY)
inline constexpr int not_owner = 77;       // EX_NOPERM: release/extend of a lock that is not yours
inline constexpr int refused = 78;         // EX_CONFIG: AUTH/ACL refused, or unsafe server configuration
inline constexpr int cannot_execute = 126; // run: the command could not be executed
inline constexpr int not_found = 127;      // run: the command was not found
}  // namespace exit_code

// What the failed operation was doing: a timeout while acquiring is "not acquired" (the wait
// ran out), anywhere else it is a server that does not answer.
enum class Phase { acquiring, other };

// The exit code for a dlock error (any std::error_code of dlock's category; others map to 76).
int exit_code_for(const std::error_code& code, Phase phase = Phase::other);

// The short, stable name of a dlock error code for JSON output ("busy", "lock_lost", ...).
std::string_view errc_name(const std::error_code& code);

// The exit-code table as printed by --help.
std::string_view exit_code_help();

}  // namespace dlock::cli
