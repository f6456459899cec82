// dlock list [PATTERN] and dlock leaks — both walk the prefix's keys with SCAN (never KEYS),
// find the lock names among them, and inspect each name with dlock::inspect (any kind).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "commands.hpp"
#include "dlock/admin.hpp"
#include "lock_view.hpp"
#include "redis_batch.hpp"

namespace dlock::cli {

namespace {

// The keys that make a name worth inspecting: the lock key itself, a semaphore's permits, a
// FairLock's queue (waiters of a free lock) and a SharedMutex's readers. Counters (:fence),
// markers (:rel, :released) and limits alone do not make a lock; `leaks` inspects the names of
// counters too (every name ever locked), for counters that are no counter.
bool names_a_lock(std::string_view suffix, bool with_counters) {
  return suffix.empty() || suffix == ":permits" || suffix == ":queue" || suffix == ":readers" ||
         (with_counters && suffix == ":fence");
}

// A key under the prefix whose {name} no lock can have (a control character, over 512 bytes):
// written by something else. Never inspected (the library refuses such a name), and never
// printed raw: a control character could drive the reader's terminal.
struct InvalidName {
  std::string key;     // the first such key seen under the name
  std::string reason;  // what is wrong with the name
};

// Every lock under the prefix whose name matches `glob` and that is held, has waiters, is a key
// of another type under a lock's name, or (with_counters) whose fencing counter is no counter;
// inspected, sorted by name. Names that are no valid lock name go to `invalid`, by name: one
// such key must not make the whole scan fail.
dlock::Result<std::vector<dlock::LockInfo>> collect_locks(Context& ctx, const std::string& glob,
                                                          std::map<std::string, InvalidName>& invalid,
                                                          bool with_counters = false) {
  std::set<std::string> names;
  auto scanned = scan_keys(ctx.client(), ctx.key_pattern(glob) + "*", [&](std::vector<std::string> keys) -> dlock::Result<void> {
    for (const auto& k : keys) {
      const auto close = k.find('}', ctx.globals().prefix.size());
      if (close == std::string::npos || !names_a_lock(std::string_view(k).substr(close + 1), with_counters)) continue;
      auto name = ctx.name_of_key(std::string_view(k).substr(0, close + 1));
      if (!name) continue;
      if (auto problem = lock_name_problem(*name)) {
        invalid.try_emplace(*name, InvalidName{k, *problem});
      } else {
        names.insert(*name);
      }
    }
    return {};
  });
  if (!scanned) return scanned.error();
  std::vector<dlock::LockInfo> out;
  // Inspected in pipelined chunks: one round trip's wait per chunk, bounded memory.
  constexpr std::size_t kChunk = 500;
  std::vector<std::string> chunk;
  auto flush = [&]() -> dlock::Result<void> {
    auto infos = dlock::inspect(ctx.client(), chunk);
    chunk.clear();
    if (!infos) return infos.error();
    for (auto& info : *infos) {
      if (info.held() || !info.waiters.empty() || info.kind == dlock::LockKind::foreign ||
          (with_counters && info.fencing_counter_fault)) {
        out.push_back(std::move(info));
      }
    }
    return {};
  };
  for (const auto& name : names) {  // std::set: sorted by name
    chunk.push_back(name);
    if (chunk.size() == kChunk) {
      if (auto ok = flush(); !ok) return ok.error();
    }
  }
  if (!chunk.empty()) {
    if (auto ok = flush(); !ok) return ok.error();
  }
  return out;
}

// Why a lock is abnormal, or empty.
std::string leak_reason(const dlock::LockInfo& info) {
  std::string reason;
  bool forever = info.held() && !info.key_ttl;
  for (const auto& h : info.holders) forever = forever || !h.ttl;
  if (info.kind == dlock::LockKind::foreign && !info.key_ttl) forever = true;
  if (forever) reason = "no expiry: the key has no TTL and would never be freed";
  if (info.value && !parse_owner_token(*info.value)) {
    reason += std::string(reason.empty() ? "" : "; ") + "the value is not a dlock owner token (another client?)";
  }
  if (info.fencing_counter_fault) {
    // 'unlock --force' leaves counters alone (they are never deleted by dlock): a DEL repairs it.
    reason += std::string(reason.empty() ? "" : "; ") + "the fencing counter " + info.key + ":fence holds " +
              *info.fencing_counter_fault + ", which gives no next token: every acquisition that counts one fails " +
              "until it is deleted (DEL " + info.key + ":fence)";
  }
  return reason;
}

std::string holders_text(const dlock::LockInfo& info) {
  if (info.holders.empty()) return "-";
  const auto& h = info.holders.front();
  std::string text = h.owner.empty() ? "-" : describe_holder(holder_info(h.owner));
  if (info.kind == dlock::LockKind::mutex || info.kind == dlock::LockKind::fair) {
    if (!holder_info(h.owner)) text = "(foreign value)";
  }
  if (h.mode == dlock::LockHolder::Mode::permits || info.kind == dlock::LockKind::reentrant) {
    text += " x" + std::to_string(h.count);
  }
  if (h.mode == dlock::LockHolder::Mode::write) text = "W " + text;
  if (h.mode == dlock::LockHolder::Mode::read) text = "R " + text;
  if (info.holders.size() > 1) text += " +" + std::to_string(info.holders.size() - 1);
  return text;
}

}  // namespace

int cmd_list(Context& ctx, const Args& args) {
  ParsedArgs a = ctx.parse(args, {});
  ctx.reject_redlock();
  if (a.positionals.size() > 1) throw UsageError("list takes at most one PATTERN");
  const std::string glob = a.positionals.empty() ? "*" : a.positionals[0];
  std::map<std::string, InvalidName> invalid;
  auto locks = collect_locks(ctx, glob, invalid);
  if (!locks) return ctx.fail(locks.error());
  // Skipped, but not silently: `leaks` lists them.
  if (!invalid.empty()) {
    ctx.note("skipped " + std::to_string(invalid.size()) + " name(s) under the prefix that are no valid lock name; " +
             "'dlock leaks' lists them");
  }

  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("prefix", ctx.globals().prefix).field("pattern", glob).field("count", static_cast<long long>(locks->size()));
    j.field("invalid_names", static_cast<long long>(invalid.size()));
    j.key("locks").begin_array();
    for (const auto& info : *locks) {
      j.begin_object();
      json_lock_members(j, info);
      j.end_object();
    }
    j.end_array();
    ctx.print_json(j);
    return exit_code::ok;
  }
  std::size_t width = 4;
  for (const auto& info : *locks) width = std::max(width, info.name.size());
  width = std::min<std::size_t>(width, 60);
  const int w = static_cast<int>(width);
  std::printf("%-*s  %-9s  %-32s  %-10s  %-8s  %s\n", w, "NAME", "KIND", "HOLDER", "HELD FOR", "TTL", "WAITERS");
  for (const auto& info : *locks) {
    std::string held = "-";
    if (!info.holders.empty()) {
      const auto who = holder_info(info.holders.front().owner);
      if (who && who->since_unix_ms) held = human_duration(held_for_ms(*who->since_unix_ms));
    }
    std::string kind = kind_name(info);
    if (info.permits_limit) kind += "/" + std::to_string(*info.permits_limit);
    std::printf("%-*s  %-9s  %-32s  %-10s  %-8s  %lld\n", w, info.name.c_str(), kind.c_str(), holders_text(info).c_str(),
                held.c_str(), ttl_text(info.key_ttl).c_str(), waiter_count(info));
  }
  if (ctx.verbose()) ctx.note(std::to_string(locks->size()) + " lock(s) held or waited for");
  return exit_code::ok;
}

int cmd_leaks(Context& ctx, const Args& args) {
  ParsedArgs a = ctx.parse(args, {});
  ctx.reject_redlock();
  if (!a.positionals.empty()) throw UsageError("leaks takes no arguments");
  std::map<std::string, InvalidName> invalid;
  auto locks = collect_locks(ctx, "*", invalid, true);
  if (!locks) return ctx.fail(locks.error());

  struct Leak {
    const dlock::LockInfo* info;
    std::string reason;
  };
  std::vector<Leak> leaks;
  for (const auto& info : *locks) {
    if (auto reason = leak_reason(info); !reason.empty()) leaks.push_back({&info, std::move(reason)});
  }

  const auto invalid_reason = [](const InvalidName& bad) {
    return "not a valid lock name (" + bad.reason + "): no dlock lock uses this key; something else wrote it";
  };
  const std::size_t count = leaks.size() + invalid.size();
  if (ctx.json()) {
    Json j = ctx.begin_json(count == 0);
    j.field("prefix", ctx.globals().prefix).field("checked", static_cast<long long>(locks->size() + invalid.size()));
    j.field("count", static_cast<long long>(count));
    j.key("leaks").begin_array();
    for (const auto& l : leaks) {
      j.begin_object();
      json_lock_members(j, *l.info);
      j.field("reason", l.reason);
      j.end_object();
    }
    for (const auto& [name, bad] : invalid) {
      j.begin_object();
      j.field("name", name).field("key", bad.key).field("state", "invalid_name");
      j.field("reason", invalid_reason(bad));
      j.end_object();
    }
    j.end_array();
    ctx.print_json(j);
  } else {
    for (const auto& [name, bad] : invalid) {
      std::printf("%s  %s: %s\n", Json::quote(name).c_str(), Json::quote(bad.key).c_str(), invalid_reason(bad).c_str());
    }
    for (const auto& l : leaks) {
      std::string what = "a " + l.info->redis_type;
      if (l.info->value && !parse_owner_token(*l.info->value)) what = "value " + Json::quote(*l.info->value);
      else if (l.info->held()) what = kind_name(*l.info) + " held by " + holders_text(*l.info);
      else if (l.info->redis_type == "none") what = "free";
      std::printf("%s  %s (%s): %s\n", l.info->name.c_str(), l.info->key.c_str(), what.c_str(), l.reason.c_str());
    }
    if (count == 0 && ctx.verbose()) ctx.note("no leaks among " + std::to_string(locks->size()) + " lock(s)");
    if (!invalid.empty()) {
      ctx.note(std::to_string(invalid.size()) + " key(s) under the prefix have no valid lock name; 'dlock unlock' " +
               "cannot name them: remove them with DEL if nothing else needs them");
    }
    if (!leaks.empty()) {
      // 'unlock --force' removes holds, never a counter: a counter's repair is its DEL.
      const bool holds = std::any_of(leaks.begin(), leaks.end(), [](const Leak& l) {
        return l.info->held() || l.info->kind == dlock::LockKind::foreign || l.info->value;
      });
      const bool counters =
          std::any_of(leaks.begin(), leaks.end(), [](const Leak& l) { return l.info->fencing_counter_fault.has_value(); });
      ctx.note(std::to_string(leaks.size()) + " abnormal lock(s) of " + std::to_string(locks->size()) +
               "; inspect with 'dlock status NAME'" + (holds ? ", remove with 'dlock unlock --force NAME'" : "") +
               (counters ? std::string(holds ? "; " : ", ") + "repair a fencing counter by deleting it" : ""));
    }
  }
  return count == 0 ? exit_code::ok : exit_code::found;
}

}  // namespace dlock::cli
