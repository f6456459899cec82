// The lease commands for shell scripts:
//   dlock acquire NAME --ttl DUR [--wait DUR | --no-wait]   take it, print the owner token, exit holding it
//   dlock extend NAME [OWNER] --ttl DUR                      compare-and-pexpire
//   dlock release NAME [OWNER]                               compare-and-delete, marker, "released"
// OWNER defaults to $DLOCK_OWNER so it need not show in process lists.
#include <signal.h>

#include <cstdio>
#include <cstdlib>

#include "commands.hpp"
#include "dlock/duration.hpp"
#include "lock_wait.hpp"
#include "lua_scripts.hpp"

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

}  // namespace

int cmd_acquire(Context& ctx, const Args& args) {
  static const std::vector<OptionSpec> specs = [] {
    std::vector<OptionSpec> v = {{"--ttl", 0, true}, {"--wait", 0, true}, {"--no-wait", 0, false}};
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
  const milliseconds ttl = parse_duration_arg("--ttl", *ttl_text);
  if (ttl.count() <= 0) throw UsageError("--ttl must be positive");
  const auto wait = wait_option(a);

  SignalFd signals({SIGINT, SIGTERM, SIGHUP});  // before the Client's thread exists
  dlock::LeaseOptions lo;
  lo.mode = dlock::LeaseMode::fixed_ttl;
  lo.ttl = ttl;
  LockTarget target(ctx.client(), name, spec, lo);
  WaitOutcome w = wait_for_lock(ctx, target, wait, signals);
  if (w.signal != 0) {
    ctx.fail(128 + w.signal, "interrupted", "interrupted while waiting for lock '" + name + "'; nothing is held");
    return 128 + w.signal;
  }
  if (!w.lease) return ctx.fail(w.error, Phase::acquiring);

  const dlock::Lease& lease = *w.lease;
  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("name", name).field("key", ctx.key(name)).field("kind", "mutex").field("owner", lease.owner());
    j.field("fencing_token", lease.token().value).field("ttl_ms", static_cast<long long>(ttl.count()));
    ctx.print_json(j);
  } else {
    std::printf("DLOCK_OWNER=%s\nDLOCK_FENCING_TOKEN=%llu\n", shell_quote(lease.owner()).c_str(),
                static_cast<unsigned long long>(lease.token().value));
  }
  // A Lease releases in its destructor, and so does the Client for what it still holds: end
  // the process without running either, so the lock stays held for its TTL.
  Context::exit_now(exit_code::ok);
}

int cmd_extend(Context& ctx, const Args& args) {
  static const std::vector<OptionSpec> specs = {{"--ttl", 0, true}};
  ParsedArgs a = ctx.parse(args, specs);
  const std::string name = name_argument(a);
  const std::string owner = owner_argument(a, 1);
  const auto ttl_text = a.last("--ttl");
  if (!ttl_text) throw UsageError("extend needs --ttl DUR");
  const milliseconds ttl = parse_duration_arg("--ttl", *ttl_text);
  if (ttl.count() <= 0) throw UsageError("--ttl must be positive");

  const std::string key = ctx.key(name);
  auto r = ctx.client().command({"EVAL", lua::extend, "1", key, owner, std::to_string(ttl.count())});
  if (!r) return ctx.fail(r.error());
  if (auto type = other_type(*r)) return wrong_type(ctx, key, *type);
  const bool extended = r->is_integer() && r->integer() == 1;
  if (!extended) {
    return ctx.fail(exit_code::not_owner, "not_owner",
                    "lock '" + name + "' is not held by this owner (expired, released or taken over)");
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
  auto r = ctx.client().command(
      {"EVAL", lua::release, "2", key, key + ":rel", owner, key + ":ch", std::to_string(kReleaseMarkerMs)});
  if (!r) return ctx.fail(r.error());
  if (auto type = other_type(*r)) return wrong_type(ctx, key, *type);
  const long long code = r->is_integer() ? r->integer() : -1;
  if (code != 1 && code != 2) {
    return ctx.fail(exit_code::not_owner, "not_owner",
                    "lock '" + name + "' is not held by this owner (expired, released or taken over)");
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
