// dlock status NAME — free or held; holder (from the owner token), remaining TTL, fencing
// counter, kind, and the waiters dlock knows about (subscribers of the lock's channel).
#include <cstdio>

#include "commands.hpp"
#include "owner_token.hpp"
#include "redis_batch.hpp"

namespace dlock::cli {

int cmd_status(Context& ctx, const Args& args) {
  ParsedArgs a = ctx.parse(args, {});
  if (a.positionals.size() != 1) throw UsageError("status needs exactly one lock NAME");
  const std::string name = a.positionals[0];
  check_lock_name(name);
  const std::string key = ctx.key(name);

  auto replies = pipeline(ctx.client(), {{"TYPE", key},
                                         {"GET", key},
                                         {"PTTL", key},
                                         {"GET", key + ":fence"},
                                         {"PUBSUB", "NUMSUB", key + ":ch"}});
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (i == 1 && replies[i].code() == dlock::errc::wrong_type) continue;  // GET of another type
    if (!replies[i]) return ctx.fail(replies[i].error());
  }
  const std::string type = replies[0]->str();
  const bool held = type != "none";
  std::optional<std::string> owner;
  if (replies[1].ok() && replies[1]->is_string()) owner = replies[1]->str();
  const long long pttl = replies[2]->is_integer() ? replies[2]->integer() : -2;
  std::optional<long long> fence;
  if (replies[3]->is_string()) fence = replies[3]->as_integer();
  long long waiters = 0;
  if (replies[4]->is_array() && replies[4]->size() == 2) waiters = (*replies[4])[1].as_integer().value_or(0);
  const auto info = owner ? parse_owner_token(*owner) : std::nullopt;
  const std::string kind = held ? lock_kind(type) : "mutex";

  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("name", name).field("key", key).field("state", held ? "held" : "free").field("kind", kind);
    j.key("owner").opt_str(owner);
    j.key("holder");
    if (info) {
      j.begin_object().field("host", info->host).field("pid", info->pid);
      j.key("since_unix_ms").opt_num(info->since_unix_ms);
      j.key("held_ms").opt_num(info->since_unix_ms ? std::optional<long long>(held_for_ms(*info->since_unix_ms))
                                                    : std::nullopt);
      j.end_object();
    } else {
      j.null();
    }
    j.key("ttl_ms").opt_num(held ? std::optional<long long>(pttl) : std::nullopt);
    j.key("fencing_counter").opt_num(fence);
    j.field("waiters", waiters).field("waiters_counts", "processes subscribed to " + key + ":ch (waiters, plus a holder listening for revocation)");
    ctx.print_json(j);
    return exit_code::ok;
  }

  std::printf("lock     %s\nkey      %s\nstate    %s\nkind     %s\n", name.c_str(), key.c_str(),
              held ? "held" : "free", kind.c_str());
  if (held) {
    if (info) {
      std::string since;
      if (info->since_unix_ms) {
        since = ", for " + human_duration(held_for_ms(*info->since_unix_ms)) + " (since " +
                iso_time(*info->since_unix_ms) + ")";
      }
      std::printf("holder   host %s, pid %lld%s\n", info->host.c_str(), info->pid, since.c_str());
    } else if (owner) {
      std::printf("holder   unknown: the value is not a dlock owner token (another client?)\n");
    }
    if (owner) std::printf("owner    %s\n", owner->c_str());
    if (pttl >= 0) std::printf("ttl      %s\n", human_duration(pttl).c_str());
    else std::printf("ttl      none: the key never expires (a leak; see 'dlock leaks')\n");
  }
  if (fence) {
    std::printf("fencing  %lld (%s)\n", *fence,
                held ? "the current holder's token, if it took the lock through dlock" : "the last token issued");
  } else {
    std::printf("fencing  none issued yet\n");
  }
  std::printf("waiters  %lld (processes subscribed to %s:ch: waiting processes, plus a holder that listens\n"
              "         for revocation, such as dlock run; threads of one process count once)\n", waiters,
              key.c_str());
  return exit_code::ok;
}

}  // namespace dlock::cli
