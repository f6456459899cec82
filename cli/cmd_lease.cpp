// The lease commands for shell scripts:
//   dlock acquire NAME --ttl DUR [--wait DUR | --no-wait]   take it, print the owner token, exit holding it
//   dlock extend NAME [OWNER] --ttl DUR                      compare-and-pexpire
//   dlock release NAME [OWNER]                               compare-and-delete, marker, "released"
// OWNER defaults to $DLOCK_OWNER so it need not show in process lists.
// With --redlock URL,URL,... the lock is a Redlock: acquire takes it on a majority of the masters;
// extend and release run their script on every master at once and succeed when a majority did
// (the Redlock layout is the Mutex layout on each node).
#include <signal.h>

#include <cstdio>
#include <cstdlib>

#include "commands.hpp"
#include "dlock/duration.hpp"
#include "lock_wait.hpp"
#include "lua_scripts.hpp"
#include "node_fanout.hpp"

namespace dlock::cli {

namespace {

using std::chrono::milliseconds;

// How long the release marker (P{N}:rel) lives, as the library's Mutex sets it.
constexpr long long kReleaseMarkerMs = 30000;

// A value for `eval "$(dlock acquire ...)"`: single-quoted unless it is plainly safe.
std::string shell_quote(const std::string& v) {
  const bool safe = !v.empty() && v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                       "0123456789@:._-/+,") == std::string::npos;
  if (safe) return v;
  std::string out = "'";
  for (char c : v) {
    if (c == '\'') out += "'\\''";
    else out.push_back(c);
  }
  return out + "'";
}

std::string owner_argument(const ParsedArgs& a, std::size_t index) {
  if (a.positionals.size() > index + 1) throw UsageError("too many arguments");
  if (a.positionals.size() > index) return a.positionals[index];
  const char* env = std::getenv("DLOCK_OWNER");
  if (env != nullptr && *env != '\0') return env;
  throw UsageError("no OWNER given, and DLOCK_OWNER is not set");
}

std::string name_argument(const ParsedArgs& a) {
  if (a.positionals.empty()) throw UsageError("a lock NAME is needed");
  check_lock_name(a.positionals[0]);
  return a.positionals[0];
}

// A {-1, type} reply from the CLI's scripts: the key holds another type.
std::optional<std::string> other_type(const dlock::Reply& r) {
  if (r.is_array() && r.size() == 2 && r[0].is_integer() && r[0].integer() == -1) return r[1].str();
  return std::nullopt;
}

int wrong_type(Context& ctx, const std::string& key, const std::string& type) {
  return ctx.fail(exit_code::wrong_type, "wrong_type",
                  "key '" + key + "' holds a " + type + ", not a dlock mutex");
}

// One of the lease scripts (extend, release) on the lock's key: on the --redis deployment, or on
// every --redlock master at once.
struct ScriptOutcome {
  std::optional<dlock::Reply> reply;  // --redis: the reply
  std::vector<dlock::Result<dlock::Reply>> nodes;  // --redlock: each master's
};

dlock::Result<ScriptOutcome> run_lease_script(Context& ctx, std::vector<std::string> eval) {
  ScriptOutcome out;
  if (!ctx.redlock()) {
    auto r = ctx.client().command(std::move(eval));
    if (!r) return r.error();
    out.reply = std::move(*r);
    return out;
  }
  out.nodes = command_on_all(ctx.redlock_nodes(), eval);
  return out;
}

// --redlock: the verdict over the masters. `done(reply)` says whether a node's reply counts
// (extended, released). Succeeds (exit 0) with a majority; otherwise not_owner when the masters
// that answered say so, or the first transport error when too few answered to tell.
std::optional<int> redlock_verdict(Context& ctx, const std::string& name, const std::string& key,
                                   const ScriptOutcome& o, bool (*done)(const dlock::Reply&)) {
  const auto& nodes = ctx.redlock_nodes();
  const std::size_t quorum = nodes.size() / 2 + 1;
  std::size_t granted = 0, refused = 0;
  std::optional<dlock::Error> first_error;
  std::string failures;
  for (std::size_t i = 0; i < o.nodes.size(); ++i) {
    const auto& r = o.nodes[i];
    const std::string node = nodes[i]->address().display();
    if (!r) {
      if (!first_error) first_error = r.error();
      failures += "; " + node + ": " + r.error().what();
    } else if (auto type = other_type(r.value())) {
      ++refused;
      failures += "; " + node + ": key holds a " + *type;
    } else if (done(r.value())) {
      ++granted;
    } else {
      ++refused;
      failures += "; " + node + ": not this owner";
    }
  }
  if (granted >= quorum) {
    if (ctx.verbose() && granted < nodes.size()) ctx.note("a majority agreed, but" + failures.substr(1));
    return std::nullopt;
  }
  const std::string counts = std::to_string(granted) + " of " + std::to_string(nodes.size()) +
                             " masters (a majority is " + std::to_string(quorum) + ")" + failures;
  if (first_error && refused < quorum) {
    return ctx.fail(dlock::Error(first_error->code, "lock '" + name + "' (" + key + "): only " + counts));
  }
  return ctx.fail(exit_code::not_owner, "not_owner",
                  "lock '" + name + "' is not held by this owner on a majority: " + counts);
}

bool extended_reply(const dlock::Reply& r) { return r.is_integer() && r.integer() == 1; }
bool released_reply(const dlock::Reply& r) { return r.is_integer() && (r.integer() == 1 || r.integer() == 2); }

}  // namespace

int cmd_acquire(Context& ctx, const Args& args) {
  static const std::vector<OptionSpec> specs = [] {
    std::vector<OptionSpec> v = {{"--ttl", 0, true}, {"--wait", 0, true}, {"--no-wait", 0, false},
                                 {"--replicas", 0, true}};
    v.insert(v.end(), lock_spec_options().begin(), lock_spec_options().end());
    return v;
  }();
  ParsedArgs a = ctx.parse(args, specs);
  const std::string name = name_argument(a);
  // acquire leaves a lock behind for extend/release, which speak the Mutex protocol (the
  // owner token in P{N}). The other kinds' holds are released and renewed by their own
  // scripts, which belong to a running holder: use 'dlock run --kind ...' for them.
  const LockSpec spec = parse_lock_spec(a);
  if (spec.kind != Kind::mutex) {
    throw UsageError(std::string("acquire takes mutex locks only (extend and release speak the mutex protocol); ") +
                     "hold a " + kind_text(spec.kind) + " lock with 'dlock run --kind " + kind_text(spec.kind) + "'");
  }
  if (a.positionals.size() > 1) throw UsageError("too many arguments");
  const auto ttl_text = a.last("--ttl");
  if (!ttl_text) throw UsageError("acquire needs --ttl DUR (the lock is not renewed)");
  const milliseconds ttl = parse_ttl_arg("--ttl", *ttl_text);
  if (ttl.count() <= 0) throw UsageError("--ttl must be positive");
  const auto wait = wait_option(a);
  if (auto k = replicas_option(a)) {
    if (ctx.redlock() && *k > 0) throw UsageError("--replicas is for --redis deployments; Redlock masters have no replicas");
    ctx.set_replication_ack(*k);
  }

  SignalFd signals({SIGINT, SIGTERM, SIGHUP});  // before the Client's thread exists
  dlock::LeaseOptions lo;
  lo.mode = dlock::LeaseMode::fixed_ttl;
  lo.ttl = ttl;
  LockTarget target = ctx.redlock() ? LockTarget(ctx.redlock_nodes(), name, spec, lo)
                                    : LockTarget(ctx.client(), name, spec, lo);
  WaitOutcome w = wait_for_lock(ctx, target, wait, signals);
  if (w.signal != 0) {
    ctx.fail(128 + w.signal, "interrupted", "interrupted while waiting for lock '" + name + "'; " + held_after_signal(w));
    return 128 + w.signal;
  }
  if (!w.lease) return ctx.fail(w.error, Phase::acquiring);

  const dlock::Lease& lease = *w.lease;
  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("name", name).field("key", ctx.key(name)).field("kind", ctx.redlock() ? "redlock" : "mutex");
    j.field("owner", lease.owner());
    j.field("fencing_token", lease.token().value).field("ttl_ms", static_cast<long long>(ttl.count()));
    // What this machine may count on: the TTL less the acquisition's round trip (validity is
    // counted from its send) and the drift allowance. A late answer leaves less than ttl_ms.
    j.field("valid_ms", static_cast<long long>(lease.remaining().count()));
    ctx.print_json(j);
  } else {
    // Exported: `eval "$(dlock acquire ...)"` must hand the owner to the `dlock extend` and
    // `dlock release` processes the script runs next, which read it from their environment.
    std::printf("DLOCK_OWNER=%s\nDLOCK_FENCING_TOKEN=%llu\nexport DLOCK_OWNER DLOCK_FENCING_TOKEN\n",
                shell_quote(lease.owner()).c_str(), static_cast<unsigned long long>(lease.token().value));
  }
  // A Lease releases in its destructor, and so does the Client for what it still holds: end
  // the process without running either, so the lock stays held for its TTL. A Redlock's
  // acquisition returned once a majority took it: let the other masters' answers land first.
  ctx.settle_redlock();
  Context::exit_now(exit_code::ok);
}

int cmd_extend(Context& ctx, const Args& args) {
  static const std::vector<OptionSpec> specs = {{"--ttl", 0, true}};
  ParsedArgs a = ctx.parse(args, specs);
  const std::string name = name_argument(a);
  const std::string owner = owner_argument(a, 1);
  const auto ttl_text = a.last("--ttl");
  if (!ttl_text) throw UsageError("extend needs --ttl DUR");
  const milliseconds ttl = parse_ttl_arg("--ttl", *ttl_text);
  if (ttl.count() <= 0) throw UsageError("--ttl must be positive");

  const std::string key = ctx.key(name);
  auto o = run_lease_script(ctx, {"EVAL", lua::extend, "1", key, owner, std::to_string(ttl.count())});
  if (!o) return ctx.fail(o.error());
  if (ctx.redlock()) {
    if (auto failed = redlock_verdict(ctx, name, key, *o, extended_reply)) return *failed;
  } else {
    const dlock::Reply& r = *o->reply;
    if (auto type = other_type(r)) return wrong_type(ctx, key, *type);
    if (!extended_reply(r)) {
      return ctx.fail(exit_code::not_owner, "not_owner",
                      "lock '" + name + "' is not held by this owner (expired, released or taken over)");
    }
  }
  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("name", name).field("owner", owner).field("ttl_ms", static_cast<long long>(ttl.count()));
    ctx.print_json(j);
  } else if (ctx.verbose()) {
    ctx.note("lock '" + name + "' now expires in " + dlock::format_duration(ttl));
  }
  return exit_code::ok;
}

int cmd_release(Context& ctx, const Args& args) {
  ParsedArgs a = ctx.parse(args, {});
  const std::string name = name_argument(a);
  const std::string owner = owner_argument(a, 1);
  const std::string key = ctx.key(name);
  // Redlock masters are standalone servers, so only --redis can be a Cluster.
  const bool cluster = !ctx.redlock() && ctx.client().deployment().kind == dlock::Deployment::Kind::cluster;
  auto o = run_lease_script(ctx, {"EVAL", lua::release, "2", key, key + ":rel", owner, key + ":ch",
                                  std::to_string(kReleaseMarkerMs), cluster ? "SPUBLISH" : "PUBLISH"});
  if (!o) return ctx.fail(o.error());
  long long code = 1;
  if (ctx.redlock()) {
    if (auto failed = redlock_verdict(ctx, name, key, *o, released_reply)) return *failed;
    // "already released" only when no master released it now.
    code = 2;
    for (const auto& r : o->nodes) {
      if (r && r->is_integer() && r->integer() == 1) code = 1;
    }
  } else {
    const dlock::Reply& r = *o->reply;
    if (auto type = other_type(r)) return wrong_type(ctx, key, *type);
    code = r.is_integer() ? r.integer() : -1;
    if (code != 1 && code != 2) {
      return ctx.fail(exit_code::not_owner, "not_owner",
                      "lock '" + name + "' is not held by this owner (expired, released or taken over)");
    }
  }
  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("name", name).field("owner", owner).field("already_released", code == 2);
    ctx.print_json(j);
  } else if (ctx.verbose()) {
    ctx.note(code == 1 ? "released lock '" + name + "'" : "lock '" + name + "' was already released by this owner");
  }
  return exit_code::ok;
}

}  // namespace dlock::cli
