// dlock list [PATTERN] and dlock leaks — both walk the prefix's lock keys with SCAN (never
// KEYS) and inspect each page of keys in one pipelined round trip.
#include <algorithm>
#include <cstdio>

#include "commands.hpp"
#include "owner_token.hpp"
#include "redis_batch.hpp"

namespace dlock::cli {

namespace {

struct LockEntry {
  std::string name;
  KeyInfo info;
  std::optional<OwnerInfo> holder;
};

// Every lock key under the prefix whose name matches `glob`, inspected, sorted by name.
dlock::Result<std::vector<LockEntry>> collect_locks(Context& ctx, const std::string& glob) {
  std::vector<LockEntry> out;
  auto scanned = scan_keys(ctx.client(), ctx.key_pattern(glob), [&](std::vector<std::string> keys) -> dlock::Result<void> {
    // Companion keys (P{N}:fence, P{N}:rel) do not match P{*}, but a PATTERN could make them.
    std::erase_if(keys, [&](const std::string& k) { return !ctx.name_of_key(k); });
    if (keys.empty()) return {};
    auto infos = inspect_keys(ctx.client(), keys);
    if (!infos) return infos.error();
    for (auto& info : *infos) {
      if (info.type == "none") continue;  // released between SCAN and inspection
      LockEntry e;
      e.name = *ctx.name_of_key(info.key);
      if (info.value) e.holder = parse_owner_token(*info.value);
      e.info = std::move(info);
      out.push_back(std::move(e));
    }
    return {};
  });
  if (!scanned) return scanned.error();
  std::sort(out.begin(), out.end(), [](const LockEntry& a, const LockEntry& b) { return a.name < b.name; });
  return out;
}

void json_holder(Json& j, const std::optional<OwnerInfo>& h) {
  j.key("holder");
  if (!h) {
    j.null();
    return;
  }
  j.begin_object().field("host", h->host).field("pid", h->pid);
  j.key("since_unix_ms").opt_num(h->since_unix_ms);
  j.end_object();
}

std::string ttl_text(long long pttl) { return pttl >= 0 ? human_duration(pttl) : pttl == -1 ? "never" : "-"; }

}  // namespace

int cmd_list(Context& ctx, const Args& args) {
  ParsedArgs a = ctx.parse(args, {});
  if (a.positionals.size() > 1) throw UsageError("list takes at most one PATTERN");
  const std::string glob = a.positionals.empty() ? "*" : a.positionals[0];
  auto locks = collect_locks(ctx, glob);
  if (!locks) return ctx.fail(locks.error());

  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("prefix", ctx.globals().prefix).field("pattern", glob).field("count", static_cast<long long>(locks->size()));
    j.key("locks").begin_array();
    for (const auto& e : *locks) {
      j.begin_object().field("name", e.name).field("key", e.info.key).field("kind", lock_kind(e.info.type));
      j.key("owner").opt_str(e.info.value);
      json_holder(j, e.holder);
      j.field("ttl_ms", e.info.pttl);
      j.end_object();
    }
    j.end_array();
    ctx.print_json(j);
    return exit_code::ok;
  }
  std::size_t width = 4;
  for (const auto& e : *locks) width = std::max(width, e.name.size());
  width = std::min<std::size_t>(width, 60);
  const int w = static_cast<int>(width);
  std::printf("%-*s  %-6s  %-28s  %-10s  %s\n", w, "NAME", "KIND", "HOLDER", "HELD FOR", "TTL");
  for (const auto& e : *locks) {
    std::string holder = e.info.value ? describe_holder(e.holder) : "-";
    if (!e.holder && e.info.value) holder = "(foreign value)";
    const std::string held =
        e.holder && e.holder->since_unix_ms ? human_duration(held_for_ms(*e.holder->since_unix_ms)) : "-";
    std::printf("%-*s  %-6s  %-28s  %-10s  %s\n", w, e.name.c_str(), lock_kind(e.info.type).c_str(), holder.c_str(),
                held.c_str(), ttl_text(e.info.pttl).c_str());
  }
  if (ctx.verbose()) ctx.note(std::to_string(locks->size()) + " lock(s) held");
  return exit_code::ok;
}

int cmd_leaks(Context& ctx, const Args& args) {
  ParsedArgs a = ctx.parse(args, {});
  if (!a.positionals.empty()) throw UsageError("leaks takes no arguments");
  auto locks = collect_locks(ctx, "*");
  if (!locks) return ctx.fail(locks.error());

  struct Leak {
    const LockEntry* entry;
    std::string reason;
  };
  std::vector<Leak> leaks;
  for (const auto& e : *locks) {
    std::string reason;
    if (e.info.pttl == -1) reason = "no expiry: the key has no TTL and would never be freed";
    if (e.info.type == "string" && !e.holder) {
      reason += std::string(reason.empty() ? "" : "; ") + "the value is not a dlock owner token (another client?)";
    }
    if (!reason.empty()) leaks.push_back({&e, std::move(reason)});
  }

  if (ctx.json()) {
    Json j = ctx.begin_json(leaks.empty());
    j.field("prefix", ctx.globals().prefix).field("checked", static_cast<long long>(locks->size()));
    j.field("count", static_cast<long long>(leaks.size()));
    j.key("leaks").begin_array();
    for (const auto& l : leaks) {
      j.begin_object().field("name", l.entry->name).field("key", l.entry->info.key);
      j.field("kind", lock_kind(l.entry->info.type)).field("reason", l.reason);
      j.key("owner").opt_str(l.entry->info.value);
      json_holder(j, l.entry->holder);
      j.field("ttl_ms", l.entry->info.pttl);
      j.end_object();
    }
    j.end_array();
    ctx.print_json(j);
  } else {
    for (const auto& l : leaks) {
      std::string what = "a " + l.entry->info.type;
      if (l.entry->holder) what = "held by " + describe_holder(l.entry->holder);
      else if (l.entry->info.value) what = "value " + Json::quote(*l.entry->info.value);
      std::printf("%s  %s (%s): %s\n", l.entry->name.c_str(), l.entry->info.key.c_str(), what.c_str(),
                  l.reason.c_str());
    }
    if (leaks.empty() && ctx.verbose()) ctx.note("no leaks among " + std::to_string(locks->size()) + " lock(s)");
    if (!leaks.empty()) {
      ctx.note(std::to_string(leaks.size()) + " abnormal lock(s) of " + std::to_string(locks->size()) +
               "; inspect with 'dlock status NAME', remove with 'dlock unlock --force NAME'");
    }
  }
  return leaks.empty() ? exit_code::ok : exit_code::found;
}

}  // namespace dlock::cli
