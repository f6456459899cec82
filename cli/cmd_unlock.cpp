// dlock unlock --force NAME — one atomic script removes the lock whoever holds it and publishes
// "revoked" on its channel: waiters wake at once, the holder learns it at its next renewal.
#include <cstdio>

#include "commands.hpp"
#include "lua_scripts.hpp"
#include "owner_token.hpp"

namespace dlock::cli {

int cmd_unlock(Context& ctx, const Args& args) {
  static const std::vector<OptionSpec> specs = {{"--force", 'f', false}};
  ParsedArgs a = ctx.parse(args, specs);
  if (!a.has("--force")) {
    throw UsageError("unlock removes a lock whoever holds it; say so with --force (to release your own, use 'dlock release')");
  }
  if (a.positionals.size() != 1) throw UsageError("unlock --force needs exactly one lock NAME");
  const std::string name = a.positionals[0];
  check_lock_name(name);
  const std::string key = ctx.key(name);

  auto r = ctx.client().command({"EVAL", lua::force_unlock, "1", key, key + ":ch"});
  if (!r) return ctx.fail(r.error());
  if (!r->is_array() || r->size() != 2 || !(*r)[0].is_integer()) {
    return ctx.fail(exit_code::server_error, "protocol", "unexpected reply from the unlock script: " + r->to_string());
  }
  const long long code = (*r)[0].integer();
  if (code == -1) {
    return ctx.fail(exit_code::wrong_type, "wrong_type",
                    "key '" + key + "' holds a " + (*r)[1].str() + ", not a dlock mutex; nothing was removed");
  }
  const bool removed = code == 1;
  std::optional<std::string> owner;
  if (removed && (*r)[1].is_string()) owner = (*r)[1].str();
  const auto info = owner ? parse_owner_token(*owner) : std::nullopt;

  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("name", name).field("key", key).field("removed", removed);
    j.key("previous_owner").opt_str(owner);
    j.key("holder");
    if (info) {
      j.begin_object().field("host", info->host).field("pid", info->pid);
      j.key("since_unix_ms").opt_num(info->since_unix_ms);
      j.end_object();
    } else {
      j.null();
    }
    ctx.print_json(j);
  } else if (removed) {
    std::string held = describe_holder(info);
    if (info && info->since_unix_ms) held += ", held for " + human_duration(held_for_ms(*info->since_unix_ms));
    std::printf("removed lock '%s', held by %s (owner %s); waiters were notified\n", name.c_str(), held.c_str(),
                owner ? owner->c_str() : "?");
  } else {
    std::printf("lock '%s' was not held; nothing removed\n", name.c_str());
  }
  return removed ? exit_code::ok : exit_code::found;
}

}  // namespace dlock::cli
