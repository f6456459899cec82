// dlock unlock --force NAME — dlock::force_unlock: one atomic script removes every hold of the
// lock, whatever its kind, publishes "revoked" on its channel and wakes a FairLock's queue head.
// Waiters wake at once; a holder listening for revocation (dlock run) stops at once, others
// learn it at their next renewal.
#include <cstdio>

#include "commands.hpp"
#include "dlock/admin.hpp"
#include "lock_view.hpp"

namespace dlock::cli {

int cmd_unlock(Context& ctx, const Args& args) {
  static const std::vector<OptionSpec> specs = {{"--force", 'f', false}};
  ParsedArgs a = ctx.parse(args, specs);
  ctx.reject_redlock();
  if (!a.has("--force")) {
    throw UsageError("unlock removes a lock whoever holds it; say so with --force (to release your own, use 'dlock release')");
  }
  if (a.positionals.size() != 1) throw UsageError("unlock --force needs exactly one lock NAME");
  const std::string name = a.positionals[0];
  check_lock_name(name);
  const std::string key = ctx.key(name);

  auto r = dlock::force_unlock(ctx.client(), name);
  if (!r) {
    if (r.code() == dlock::errc::wrong_type) {
      return ctx.fail(exit_code::wrong_type, "wrong_type", r.error().what() + "; nothing was removed");
    }
    return ctx.fail(r.error());
  }
  const bool removed = !r->removed.empty();
  // The first holder, as single-holder kinds report it (and as earlier versions did).
  std::optional<std::string> owner;
  if (removed) owner = r->removed.front().owner;

  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("name", name).field("key", key).field("kind", std::string(dlock::to_string(r->kind)));
    j.field("removed", removed);
    j.key("previous_owner").opt_str(owner);
    j.key("holder");
    json_holder_info(j, owner ? holder_info(*owner) : std::nullopt);
    j.key("removed_holders").begin_array();
    for (const auto& h : r->removed) json_holder(j, h);
    j.end_array();
    j.key("woken_head").opt_str(r->woken_head);
    ctx.print_json(j);
  } else if (removed) {
    for (const auto& h : r->removed) {
      const auto info = holder_info(h.owner);
      std::string held = describe_holder(info);
      if (info && info->since_unix_ms) held += ", held for " + human_duration(held_for_ms(*info->since_unix_ms));
      std::string what = mode_name(h.mode);
      if (h.count != 1 || h.mode == dlock::LockHolder::Mode::permits) what += " x" + std::to_string(h.count);
      std::printf("removed %s %s hold of '%s', held by %s (owner %s)\n", std::string(dlock::to_string(r->kind)).c_str(),
                  what.c_str(), name.c_str(), held.c_str(), shown(h.owner).c_str());
    }
    std::printf("waiters were notified%s\n", r->woken_head ? " (and the head of the fair queue woken)" : "");
  } else {
    std::printf("lock '%s' was not held; nothing removed\n", name.c_str());
  }
  return removed ? exit_code::ok : exit_code::found;
}

}  // namespace dlock::cli
