#include "help.hpp"

#include "exit_codes.hpp"

namespace dlock::cli {

namespace {

constexpr std::string_view kGlobal =
    "Global options (before or after the command):\n"
    "  --redis URL     the deployment (default: $DLOCK_REDIS_URL, else redis://127.0.0.1:6379):\n"
    "                    redis://[[user]:password@]host[:port][/db]   one server\n"
    "                    unix:///path.sock[?db=N]                      one server, unix socket\n"
    "                    rediss://host:port?ca=F&cert=F&key=F&sni=H    TLS (also capath=DIR,\n"
    "                                                  insecure_skip_verify=true: DANGER)\n"
    "                    redis-cluster://host:port,host:port           Redis Cluster seeds (any\n"
    "                                                  one is enough; rediss-cluster:// for TLS)\n"
    "                    redis-sentinel://host:port,host:port/NAME[/db]\n"
    "                                                  the primary the sentinels monitor as NAME\n"
    "                                                  (rediss-sentinel:// for TLS; the password\n"
    "                                                  is the primary's)\n"
    "                  Every command works on each form; list and leaks scan every Cluster\n"
    "                  primary. The password can come from $DLOCK_REDIS_PASSWORD (and the ACL\n"
    "                  user from $DLOCK_REDIS_USER) so it never has to appear in argv.\n"
    "  --redlock URL,URL,...\n"
    "                  a Redlock over independent masters (an odd number, e.g. 3 or 5; each a\n"
    "                  redis:// or rediss:// URL): the lock is held when a majority holds it.\n"
    "                  For run, acquire, extend, release and status (mutex locks only). An\n"
    "                  empty list (an unset variable) is a usage error, not \"no Redlock\".\n"
    "  --prefix P      key prefix; --prefix '' for none (default: $DLOCK_PREFIX unless\n"
    "                  empty, as for every DLOCK_* variable; else dlock:)\n"
    "  --json          one JSON object as output (run: the last line of stderr)\n"
    "  -v, --verbose   say more (run: the waiting status line even when stderr is no terminal)\n"
    "  -h, --help      this help; 'dlock COMMAND --help' for one command\n"
    "  --version       print the version\n"
    "\n"
    "Durations: 250ms, 30s, 5m, 1h, 1m30s, 1.5s; a bare number is seconds (1.5 too).\n";

constexpr std::string_view kRun =
    "Usage: dlock run NAME [--kind KIND] [--read] [--permits N] [--take K]\n"
    "                      [--wait DUR | --no-wait] [--ttl DUR] [--grace DUR]\n"
    "                      [--conflict-exit-code N] [--lost-exit-code N] [--replicas K]\n"
    "                      [--] CMD [ARGS...]\n"
    "\n"
    "Runs CMD while holding the lock NAME, on exactly one host at a time (a distributed flock).\n"
    "The lock is renewed by a watchdog while CMD runs and released when it exits. A NAME that\n"
    "begins with '-' goes after a first '--': dlock run [opts] -- -NAME -- CMD [ARGS...]\n"
    "\n"
    "  --kind KIND    the kind of lock (default mutex); the same Redis layouts as the library's:\n"
    "                   mutex      exclusive\n"
    "                   reentrant  exclusive, the ReentrantMutex layout (a hash of owner -> count)\n"
    "                   fair       exclusive, first come first served across hosts (FairLock)\n"
    "                   rw         SharedMutex: a write hold (exclusive), or with --read a read hold\n"
    "                   semaphore  permits of a Semaphore, many holders at once\n"
    "  --read         a shared (read) hold of a rw lock: readers run together, never with a writer\n"
    "                 (implies --kind rw)\n"
    "  --permits N    the semaphore's SIZE: at most N permits are held at once, by all hosts. If\n"
    "                 the size stored in Redis differs, it is set to N first (waiters wake; held\n"
    "                 permits are never revoked), so give every caller the same N. Without it the\n"
    "                 semaphore must exist already. (implies --kind semaphore)\n"
    "  --take K       how many permits this run takes, all or none (default 1; implies --kind\n"
    "                 semaphore); more than the size is a usage error (exit 64)\n"
    "  --wait DUR     wait at most DUR for the lock (default: forever); --wait 0 == --no-wait\n"
    "  --no-wait      fail at once (exit 75) when the lock is held\n"
    "  --ttl DUR      lease time-to-live, renewed while CMD runs (default 30s)\n"
    "  --grace DUR    time between SIGTERM and SIGKILL when the lock is being lost (default 5s;\n"
    "                 must be shorter than the TTL: grace + 2 x margin + drift <= ttl, where the\n"
    "                 safety margin is ttl/10 clamped to 50ms..1s, and drift = ttl/100 + 2ms the\n"
    "                 clock-drift allowance; a --ttl under 6.4s needs a shorter --grace)\n"
    "  --conflict-exit-code N   exit N instead of 75 when the lock is not acquired\n"
    "  --lost-exit-code N       exit N instead of 70 when the lock is lost (or CMD not started)\n"
    "  --replicas K   replication acknowledgement: each acquisition waits (WAIT, 200ms at most) for\n"
    "                 K replicas of the primary to have it, and is undone and reported when fewer\n"
    "                 do (default 0: off). Narrows, does not close, the window in which a failover\n"
    "                 loses a granted lock; fencing tokens are the real protection. Not with --redlock.\n"
    "\n"
    "With --redlock URL,URL,... the lock is a Redlock (mutex only): taken on a majority of the\n"
    "masters, renewed on all of them, lost when no majority can be renewed.\n"
    "\n"
    "CMD gets DLOCK_NAME, DLOCK_KIND, DLOCK_FENCING_TOKEN and DLOCK_OWNER in its environment (for\n"
    "a reader or semaphore permits the token is not exclusive: see the library's headers). It runs in its\n"
    "own process group; SIGINT, SIGTERM and SIGHUP are forwarded to that group. Signalled while\n"
    "still waiting, dlock abandons the wait, holds nothing, and exits 128+N; signalled while its\n"
    "final release is unanswered, it exits 128+N at once (the key expires at its TTL). CMD is over\n"
    "when its whole process group is: what it starts in the background keeps the lock held until it\n"
    "exits (as with flock). If dlock dies (even kill -9), the group is killed: CMD never runs\n"
    "unprotected. A process that leaves the group (setsid, setpgid) is not covered. At a terminal,\n"
    "CMD gets the terminal and job control works as for any command (Ctrl-Z, fg, bg, &); when\n"
    "Ctrl-C ends CMD, dlock releases the lock and then ends by SIGINT too, so a loop around it stops.\n"
    "A stop (Ctrl-Z, SIGTSTP, SIGTTIN) stops dlock, and so its renewals, only once every process of\n"
    "the group is stopped: one that ignores the signal gets SIGSTOP; if one still runs after half a\n"
    "second, nothing is stopped and dlock says so. On continue, a CMD whose lease ran out is killed.\n"
    "Do not SIGSTOP dlock alone: stop the job.\n"
    "\n"
    "CMD is stopped before the lease can end: when no renewal succeeded and the lease has less than\n"
    "grace + margin left, the group gets SIGTERM, and SIGKILL when margin is left. When the lock is\n"
    "taken away outright (key deleted or replaced, 'dlock unlock --force'), SIGTERM at once and\n"
    "SIGKILL after the grace. Either way dlock exits 70. A holder learns of a removal at its next\n"
    "renewal (every ttl/3 at most). CMD is not started at all when the lease has no more than\n"
    "grace + margin left by then (the acquisition's reply came late, or dlock was paused): dlock\n"
    "gives the lock back and exits 70.\n"
    "\n"
    "While waiting, stderr shows who holds the lock (host, pid, for how long, remaining TTL) when\n"
    "it is a terminal or with -v. Exit: CMD's status, else the codes below.\n";

constexpr std::string_view kAcquire =
    "Usage: dlock acquire NAME --ttl DUR [--wait DUR | --no-wait] [--kind mutex] [--replicas K]\n"
    "\n"
    "Mutex locks only: extend and release speak the mutex protocol; the other kinds are held by a\n"
    "running process ('dlock run --kind ...').\n"
    "Takes the lock NAME with a fixed TTL (no renewal: dlock exits and the lock stays held until\n"
    "released or expired) and prints, for shell scripts:\n"
    "  DLOCK_OWNER=<owner token>\n"
    "  DLOCK_FENCING_TOKEN=<fencing token>\n"
    "  export DLOCK_OWNER DLOCK_FENCING_TOKEN\n"
    "(eval-able; --json: an object). Release it with 'dlock release NAME' (DLOCK_OWNER from the\n"
    "environment) or let it expire.\n"
    "When it fails nothing is printed on stdout, so 'eval \"$(dlock acquire ...)\"' alone goes on\n"
    "without the lock (eval of nothing succeeds, even under set -e). Check the status first:\n"
    "  lease=$(dlock acquire NAME --ttl 5m) || exit\n"
    "  eval \"$lease\"\n"
    "  --replicas K   wait for K replicas to acknowledge the acquisition (see 'dlock run --help')\n"
    "With --redlock URL,URL,... the lock is taken on a majority of the masters (a Redlock); extend\n"
    "and release then act on every master and succeed when a majority did.\n";

constexpr std::string_view kExtend =
    "Usage: dlock extend NAME [OWNER] --ttl DUR\n"
    "\n"
    "Sets the TTL of the lock NAME to DUR from now, if OWNER still holds it. OWNER defaults to\n"
    "$DLOCK_OWNER (so it need not show in process lists). Exit 0, or 77 when not the owner.\n"
    "With --redlock: on every master at once; exit 0 when a majority extended it.\n";

constexpr std::string_view kRelease =
    "Usage: dlock release NAME [OWNER]\n"
    "\n"
    "Releases the lock NAME if OWNER (default: $DLOCK_OWNER) holds it, and wakes its waiters.\n"
    "Exit 0 (also when this owner released it already in the last 30s), or 77 when not the owner.\n"
    "With --redlock: on every master at once; exit 0 when a majority released it.\n";

constexpr std::string_view kStatus =
    "Usage: dlock status NAME\n"
    "\n"
    "Shows what lives under NAME, whatever its kind: the kind (mutex, reentrant, fair, rw,\n"
    "semaphore; a key of another type is shown by its Redis type and never touched), every holder\n"
    "(host, pid, since when from its owner token, remaining TTL; a reentrant owner's hold count, a\n"
    "rw holder's read or write, a semaphore acquisition's permits and the semaphore's size), the\n"
    "fencing counter, and the waiters dlock can see: a fair lock's queue in order (each place's\n"
    "expiry), a rw lock's waiting writers, a held mutex's roll (the waiting Clients in the order\n"
    "releases name them, each place's expiry; '*' stands for MultiLock waiters), and the processes\n"
    "subscribed to the lock's channel (waiting Clients, not threads, plus a holder that listens\n"
    "for revocation). A fair lock with nobody queued looks like a mutex (the same key). Exit 0\n"
    "whether held or free.\n"
    "On a Cluster the lock is read on the primary that serves its slot. With --redlock: the holder\n"
    "on each master, and whether one owner holds a majority (that is, whether the Redlock is held);\n"
    "when fewer than a majority of the masters answer, the state is unknown (exit 69).\n";

constexpr std::string_view kList =
    "Usage: dlock list [PATTERN]\n"
    "\n"
    "Lists the locks under the prefix whose names match the glob PATTERN (default *) that are held\n"
    "or waited for, of every kind: name, kind (a semaphore as semaphore/SIZE), first holder (R/W:\n"
    "read/write hold, xN: hold count or permits, +N: more holders), held for, TTL, waiters: a fair\n"
    "lock's queue places; for the other kinds the waiting writers of a rw lock plus the Clients\n"
    "subscribed to the lock's channel, among them a holder that listens for revocation (dlock\n"
    "run's does: its lock shows 1 with nobody waiting).\n"
    "Uses SCAN (never KEYS), so it is safe on a busy server; on a Cluster, on every primary.\n"
    "Keys whose {name} is no valid lock name are skipped (a note says how many; see leaks).\n";

constexpr std::string_view kLeaks =
    "Usage: dlock leaks\n"
    "\n"
    "Reports abnormal locks of every kind under the prefix: holds or keys with no expiry (they\n"
    "would never be freed), mutex values that are not dlock owner tokens, and fencing counters\n"
    "(P{N}:fence) that hold no counter, under which every acquisition fails, and keys whose {name}\n"
    "is no valid lock name (control characters, over 512 bytes; shown escaped). Reports only, never\n"
    "deletes. On a Cluster every primary is scanned.\n"
    "Exit 1 when any are found, 0 otherwise (for monitoring).\n";

constexpr std::string_view kUnlock =
    "Usage: dlock unlock --force NAME\n"
    "\n"
    "Removes every hold of the lock NAME whoever holds it, whatever its kind (a mutex or fair\n"
    "holder, a reentrant owner's whole hold, a rw writer and all readers, all permits of a\n"
    "semaphore; its size stays), and in the same atomic script publishes a revocation: waiters wake\n"
    "at once, a fair lock's first waiter too, and a holder listening for revocation (a 'dlock run'\n"
    "of a mutex, fair or reentrant lock) stops its command at once and exits 70; other holders\n"
    "learn it at their next renewal. Prints who held it. A key of another type is left alone\n"
    "(exit 65). Exit 0 when something was removed, 1 when it was not held.\n";

constexpr std::string_view kDoctor =
    "Usage: dlock doctor [--replicas K]\n"
    "\n"
    "Checks the server for what dlock relies on: version (7.0+ required), maxmemory-policy\n"
    "(noeviction needed: eviction silently frees locks), persistence, the user's ACL rights on\n"
    "the prefix's keys and channels (ACL DRYRUN of every command the lock scripts call: 'acl'\n"
    "fails for what a mutex needs, 'acl-kinds' warns for what the other kinds need), keyspace\n"
    "notifications, and the replication role; says what to change. Checks the ACL forbids are\n"
    "reported as 'cannot check' ('?') and counted in the summary line (\"unchecked\" in --json);\n"
    "'all is well' means every check was made and passed.\n"
    "A primary with replicas gets a warning that replication acknowledgement is off, unless\n"
    "--replicas K says the clients wait for K replicas (then it fails if fewer are connected).\n"
    "On a Cluster every primary is checked (cluster_state, version, eviction, persistence,\n"
    "replication), each reported with its node; on Sentinel it says which primary the sentinels\n"
    "named, and checks that one. A redis-cluster:// URL naming a server not in cluster mode, or a\n"
    "redis:// URL naming a Cluster node, fails the 'cluster-mode' check, which names the URL to use.\n"
    "Exit 0 when nothing failed (warnings and checks that could not be made allowed), 78\n"
    "otherwise.\n";

std::string with_footer(std::string_view body) {
  return std::string(body) + "\n" + std::string(kGlobal) + "\n" + std::string(exit_code_help());
}

}  // namespace

std::string main_help() {
  return "Usage: dlock [--redis URL | --redlock URL,URL,...] [--prefix P] [--json] [-v] COMMAND [ARGS...]\n"
         "\n"
         "Distributed locks on Redis, from the shell.\n"
         "\n"
         "Commands:\n"
         "  run NAME [opts] -- CMD...    run CMD while holding the lock NAME (--kind mutex|reentrant|\n"
         "                               fair|rw|semaphore, --read, --permits N: see 'dlock run --help')\n"
         "  acquire NAME --ttl DUR       take the lock and exit holding it; print the owner token\n"
         "  extend NAME [OWNER] --ttl DUR   extend a lock taken with acquire\n"
         "  release NAME [OWNER]         release a lock taken with acquire\n"
         "  status NAME                  who holds NAME, for how long, its waiters\n"
         "  list [PATTERN]               all held locks under the prefix, of every kind\n"
         "  leaks                        locks that never expire or hold foreign values (exit 1)\n"
         "  unlock --force NAME          remove a lock whoever holds it, waking its waiters\n"
         "  doctor [--replicas K]        check the server's (every Cluster primary's) configuration\n"
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
