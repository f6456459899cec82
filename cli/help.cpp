#include "help.hpp"

#include "exit_codes.hpp"

namespace dlock::cli {

namespace {

constexpr std::string_view kGlobal =
    "Global options (before or after the command):\n"
    "  --redis URL     the server: redis://[[user]:password@]host[:port][/db] or unix:///path.sock\n"
    "                  (default: $DLOCK_REDIS_URL, else redis://127.0.0.1:6379). The password can\n"
    "                  come from $DLOCK_REDIS_PASSWORD (and the ACL user from $DLOCK_REDIS_USER)\n"
    "                  so it never has to appear in argv.\n"
    "  --prefix P      key prefix (default: $DLOCK_PREFIX, else dlock:)\n"
    "  --json          one JSON object as output (run: the last line of stderr)\n"
    "  -v, --verbose   say more (run: the waiting status line even when stderr is no terminal)\n"
    "  -h, --help      this help; 'dlock COMMAND --help' for one command\n"
    "  --version       print the version\n"
    "\n"
    "Durations: 250ms, 30s, 5m, 1h, 1m30s; a bare number is seconds.\n";

constexpr std::string_view kRun =
    "Usage: dlock run NAME [--wait DUR | --no-wait] [--ttl DUR] [--grace DUR]\n"
    "                      [--conflict-exit-code N] [--lost-exit-code N] [--] CMD [ARGS...]\n"
    "\n"
    "Runs CMD while holding the lock NAME, on exactly one host at a time (a distributed flock).\n"
    "The lock is renewed by a watchdog while CMD runs and released when it exits.\n"
    "\n"
    "  --wait DUR     wait at most DUR for the lock (default: forever); --wait 0 == --no-wait\n"
    "  --no-wait      fail at once (exit 75) when the lock is held\n"
    "  --ttl DUR      lease time-to-live, renewed while CMD runs (default 30s)\n"
    "  --grace DUR    time between SIGTERM and SIGKILL when the lock is being lost (default 5s;\n"
    "                 must be shorter than the TTL: grace + 2 x margin + ttl/100 <= ttl, where the\n"
    "                 safety margin is ttl/10 clamped to 50ms..1s, and ttl/100 the clock-drift\n"
    "                 allowance)\n"
    "  --conflict-exit-code N   exit N instead of 75 when the lock is not acquired\n"
    "  --lost-exit-code N       exit N instead of 70 when the lock is lost\n"
    "\n"
    "CMD gets DLOCK_NAME, DLOCK_FENCING_TOKEN and DLOCK_OWNER in its environment. It runs in its\n"
    "own process group; SIGINT, SIGTERM and SIGHUP are forwarded to that group. Signalled while\n"
    "still waiting, dlock abandons the wait, holds nothing, and exits 128+N. CMD dies with dlock\n"
    "(PR_SET_PDEATHSIG): it never runs unprotected.\n"
    "\n"
    "CMD is stopped before the lease can end: when no renewal succeeded and the lease has less than\n"
    "grace + margin left, the group gets SIGTERM, and SIGKILL when margin is left. When the lock is\n"
    "taken away outright (key deleted or replaced, 'dlock unlock --force'), SIGTERM at once and\n"
    "SIGKILL after the grace. Either way dlock exits 70. A holder learns of a removal at its next\n"
    "renewal (every ttl/3 at most).\n"
    "\n"
    "While waiting, stderr shows who holds the lock (host, pid, for how long, remaining TTL) when\n"
    "it is a terminal or with -v. Exit: CMD's status, else the codes below.\n";

constexpr std::string_view kAcquire =
    "Usage: dlock acquire NAME --ttl DUR [--wait DUR | --no-wait]\n"
    "\n"
    "Takes the lock NAME with a fixed TTL (no renewal: dlock exits and the lock stays held until\n"
    "released or expired) and prints, for shell scripts:\n"
    "  DLOCK_OWNER=<owner token>\n"
    "  DLOCK_FENCING_TOKEN=<fencing token>\n"
    "(eval-able; --json: an object). Release it with 'dlock release NAME' (DLOCK_OWNER from the\n"
    "environment) or let it expire.\n";

constexpr std::string_view kExtend =
    "Usage: dlock extend NAME [OWNER] --ttl DUR\n"
    "\n"
    "Sets the TTL of the lock NAME to DUR from now, if OWNER still holds it. OWNER defaults to\n"
    "$DLOCK_OWNER (so it need not show in process lists). Exit 0, or 77 when not the owner.\n";

constexpr std::string_view kRelease =
    "Usage: dlock release NAME [OWNER]\n"
    "\n"
    "Releases the lock NAME if OWNER (default: $DLOCK_OWNER) holds it, and wakes its waiters.\n"
    "Exit 0 (also when this owner released it already in the last 30s), or 77 when not the owner.\n";

constexpr std::string_view kStatus =
    "Usage: dlock status NAME\n"
    "\n"
    "Shows whether NAME is free or held; the holder (host, pid, since when, from its owner token),\n"
    "the remaining TTL, the fencing counter (the current holder's token while a dlock client holds\n"
    "it), the kind of lock, and the waiters dlock knows about: the number of subscribers of the\n"
    "lock's channel. That counts waiting processes (Clients), not threads. Exit 0 whether held or\n"
    "free.\n";

constexpr std::string_view kList =
    "Usage: dlock list [PATTERN]\n"
    "\n"
    "Lists the held locks under the prefix whose names match the glob PATTERN (default *): name,\n"
    "kind, holder, TTL. Uses SCAN (never KEYS), so it is safe on a busy server.\n";

constexpr std::string_view kLeaks =
    "Usage: dlock leaks\n"
    "\n"
    "Reports abnormal locks under the prefix: keys with no expiry (PTTL -1, they would never be\n"
    "freed) and lock values that are not dlock owner tokens. Reports only, never deletes.\n"
    "Exit 1 when any are found, 0 otherwise (for monitoring).\n";

constexpr std::string_view kUnlock =
    "Usage: dlock unlock --force NAME\n"
    "\n"
    "Removes the lock NAME whoever holds it, and publishes a revocation in the same atomic script:\n"
    "waiters wake at once, the holder learns it at its next renewal (a 'dlock run' holder then\n"
    "stops its command and exits 70). Prints who held it.\n"
    "Exit 0 when a lock was removed, 1 when it was not held.\n";

constexpr std::string_view kDoctor =
    "Usage: dlock doctor\n"
    "\n"
    "Checks the server for what dlock relies on: version (6.2+ recommended), maxmemory-policy\n"
    "(noeviction needed: eviction silently frees locks), persistence, the user's ACL rights on\n"
    "the prefix's keys and channels, keyspace notifications, and the replication role; says what\n"
    "to change. Checks the ACL forbids are reported as 'cannot check'.\n"
    "Exit 0 when nothing failed (warnings allowed), 78 otherwise.\n";

std::string with_footer(std::string_view body) {
  return std::string(body) + "\n" + std::string(kGlobal) + "\n" + std::string(exit_code_help());
}

}  // namespace

std::string main_help() {
  return "Usage: dlock [--redis URL] [--prefix P] [--json] [-v] COMMAND [ARGS...]\n"
         "\n"
         "Distributed locks on Redis, from the shell.\n"
         "\n"
         "Commands:\n"
         "  run NAME [opts] -- CMD...    run CMD while holding the lock NAME\n"
         "  acquire NAME --ttl DUR       take the lock and exit holding it; print the owner token\n"
         "  extend NAME [OWNER] --ttl DUR   extend a lock taken with acquire\n"
         "  release NAME [OWNER]         release a lock taken with acquire\n"
         "  status NAME                  who holds NAME, for how long, its waiters\n"
         "  list [PATTERN]               all held locks under the prefix\n"
         "  leaks                        locks that never expire or hold foreign values (exit 1)\n"
         "  unlock --force NAME          remove a lock whoever holds it, waking its waiters\n"
         "  doctor                       check the server's configuration for dlock\n"
         "  help [COMMAND]               this help, or a command's\n"
         "\n" +
         std::string(kGlobal) + "\n" + std::string(exit_code_help());
}

std::string command_help(std::string_view command) {
  if (command == "run") return with_footer(kRun);
  if (command == "acquire") return with_footer(kAcquire);
  if (command == "extend") return with_footer(kExtend);
  if (command == "release") return with_footer(kRelease);
  if (command == "status") return with_footer(kStatus);
  if (command == "list") return with_footer(kList);
  if (command == "leaks") return with_footer(kLeaks);
  if (command == "unlock") return with_footer(kUnlock);
  if (command == "doctor") return with_footer(kDoctor);
  return main_help();
}

}  // namespace dlock::cli
