// dlock status NAME — what lives under NAME (dlock::inspect): the kind, every holder (owner,
// host/pid, since when, TTL, count / permits / read or write), the waiters dlock can see, the
// fencing counter and, for a semaphore, its number of permits.
#include <cstdio>
#include <map>
#include <optional>

#include "commands.hpp"
#include "dlock/admin.hpp"
#include "lock_view.hpp"
#include "node_fanout.hpp"

namespace dlock::cli {

namespace {

void print_holder(const dlock::LockInfo& info, const dlock::LockHolder& h) {
  const auto who = holder_info(h.owner);
  std::string line = who ? "host " + who->host + ", pid " + std::to_string(who->pid)
                         : std::string("unknown: not a dlock owner token (another client?)");
  if (who && who->since_unix_ms) {
    line += ", for " + human_duration(held_for_ms(*who->since_unix_ms)) + " (since " + iso_time(*who->since_unix_ms) + ")";
  }
  switch (h.mode) {
    case dlock::LockHolder::Mode::read: line = "reader: " + line; break;
    case dlock::LockHolder::Mode::write: line = "writer: " + line; break;
    case dlock::LockHolder::Mode::permits:
      line = std::to_string(h.count) + " permit" + (h.count == 1 ? "" : "s") + ": " + line;
      break;
    case dlock::LockHolder::Mode::exclusive:
      if (info.kind == dlock::LockKind::reentrant) line += ", taken " + std::to_string(h.count) + "x";
      break;
  }
  std::printf("holder   %s\n", line.c_str());
  std::printf("         owner %s, ttl %s%s\n", shown(h.owner).c_str(), ttl_text(h.ttl).c_str(),
              h.ttl ? "" : " (no expiry: a leak; see 'dlock leaks')");
  if (h.token) std::printf("         fencing token %llu\n", static_cast<unsigned long long>(*h.token));
}

// --redlock: the lock on each master (dlock::inspect on all of them at once, so silent masters
// cost one command timeout together), and whether one owner holds it on a majority — what
// makes a Redlock held.
int redlock_status(Context& ctx, const std::string& name) {
  const auto& nodes = ctx.redlock_nodes();
  const std::size_t quorum = nodes.size() / 2 + 1;
  struct NodeView {
    std::string node;
    dlock::Result<dlock::LockInfo> info;
  };
  std::vector<NodeView> views;
  std::map<std::string, std::size_t> owners;  // holder -> masters where it holds the key
  auto answers = inspect_on_all(nodes, name);
  // Every command status sent was answered or timed out: nothing is left to settle on the way
  // out, and a silent master is not asked a second time.
  ctx.skip_settle();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    views.push_back({nodes[i]->address().display(), std::move(answers[i])});
    const auto& info = views.back().info;
    if (info && info->held()) ++owners[info->holders.front().owner];
  }
  std::string majority_owner;
  std::size_t best = 0;
  for (const auto& [owner, n] : owners) {
    if (n > best) {
      best = n;
      majority_owner = owner;
    }
  }
  const bool held = best >= quorum;
  // Free only when a majority said so: with too few masters answering, a majority of the
  // others may hold it.
  std::size_t answered = 0;
  std::optional<dlock::Error> first_error;
  for (const auto& v : views) {
    if (v.info) ++answered;
    else if (!first_error) first_error = v.info.error();
  }
  const bool unknown = !held && answered < quorum;
  const int code = unknown ? exit_code_for(first_error->code, Phase::other) : exit_code::ok;
  if (ctx.json()) {
    Json j = ctx.begin_json(!unknown);
    j.field("name", name).field("key", ctx.key(name)).field("kind", "redlock");
    j.field("state", held ? "held" : unknown ? "unknown" : "free").field("quorum", static_cast<long long>(quorum));
    j.field("answered", static_cast<long long>(answered));
    j.field("majority", held).field("agreeing", static_cast<long long>(best));
    j.key("owner").opt_str(held ? std::optional<std::string>(majority_owner) : std::nullopt);
    j.key("nodes").begin_array();
    for (const auto& v : views) {
      j.begin_object().field("node", v.node).field("ok", v.info.ok());
      if (v.info) {
        json_lock_members(j, v.info.value());
        j.field("agrees", held && v.info->held() && v.info->holders.front().owner == majority_owner);
      } else {
        j.field("error", errc_name(v.info.code())).field("message", v.info.error().what());
      }
      j.end_object();
    }
    j.end_array();
    if (unknown) j.field("exit_code", code);
    ctx.print_json(j);
    return code;
  }
  std::printf("lock     %s\nkey      %s on %zu masters (Redlock; a majority is %zu)\n", name.c_str(),
              ctx.key(name).c_str(), nodes.size(), quorum);
  for (const auto& v : views) {
    if (!v.info) {
      std::printf("node     %s: cannot inspect: %s\n", v.node.c_str(), v.info.error().what().c_str());
      continue;
    }
    const auto& info = v.info.value();
    if (!info.held()) {
      std::printf("node     %s: %s%s\n", v.node.c_str(), state_name(info),
                  info.kind == dlock::LockKind::foreign ? (" (a " + info.redis_type + " that is not a dlock lock)").c_str() : "");
      continue;
    }
    const auto& h = info.holders.front();
    std::printf("node     %s: %s by %s, ttl %s%s\n", v.node.c_str(), kind_name(info).c_str(),
                describe_holder(holder_info(h.owner)).c_str(), ttl_text(h.ttl).c_str(),
                held && h.owner == majority_owner ? "" : " (not the majority's owner)");
    std::printf("         owner %s\n", shown(h.owner).c_str());
  }
  if (held) {
    std::printf("state    held: %zu of %zu masters agree on owner %s\n", best, nodes.size(), shown(majority_owner).c_str());
  } else if (unknown) {
    std::printf("state    unknown: only %zu of %zu masters answered (%zu needed to tell)\n", answered, nodes.size(), quorum);
  } else {
    std::printf("state    free: no owner holds a majority (%zu of %zu at most; %zu needed)\n", best, nodes.size(), quorum);
  }
  return code;
}

}  // namespace

int cmd_status(Context& ctx, const Args& args) {
  ParsedArgs a = ctx.parse(args, {});
  if (a.positionals.size() != 1) throw UsageError("status needs exactly one lock NAME");
  const std::string name = a.positionals[0];
  check_lock_name(name);
  if (ctx.redlock()) return redlock_status(ctx, name);

  auto inspected = dlock::inspect(ctx.client(), name);
  if (!inspected) return ctx.fail(inspected.error());
  const dlock::LockInfo& info = *inspected;

  if (ctx.json()) {
    Json j = ctx.begin_json();
    json_lock_members(j, info);
    j.field("waiters_counts", info.kind == dlock::LockKind::fair
                                  ? "live places in " + info.key + ":queue"
                                  : "processes subscribed to " + info.key +
                                        ":ch (waiters, plus a holder listening for revocation)" +
                                        (info.kind == dlock::LockKind::rw ? ", and waiting writers' intents" : ""));
    ctx.print_json(j);
    return exit_code::ok;
  }

  std::printf("lock     %s\nkey      %s\nstate    %s\nkind     %s\n", name.c_str(), info.key.c_str(),
              state_name(info), kind_name(info).c_str());
  if (info.kind == dlock::LockKind::foreign) {
    std::printf("note     the key holds a %s that is not a dlock lock; dlock leaves it alone, and acquiring it "
                "fails (exit 65)\n",
                info.redis_type.c_str());
  }
  if (info.permits_limit) std::printf("permits  %lld\n", *info.permits_limit);
  for (const auto& h : info.holders) print_holder(info, h);
  if (info.fencing_counter_fault) {
    std::printf("fencing  %s:fence holds %s, which gives no next token: every acquisition that counts\n"
                "         one fails until that key is deleted (it is then seeded from the server's clock)\n",
                info.key.c_str(), info.fencing_counter_fault->c_str());
  } else if (info.fencing_counter) {
    const bool exclusive = info.held() && info.holders.front().mode != dlock::LockHolder::Mode::read &&
                           info.holders.front().mode != dlock::LockHolder::Mode::permits;
    std::printf("fencing  %llu (%s)\n", static_cast<unsigned long long>(*info.fencing_counter),
                exclusive ? "the current holder's token, if it took the lock through dlock" : "the last token issued");
  } else {
    std::printf("fencing  none issued yet\n");
  }
  std::size_t places = 0;
  for (std::size_t i = 0; i < info.waiters.size(); ++i) {
    const auto& w = info.waiters[i];
    if (w.role == dlock::LockWaiter::Role::roll) {
      // A Mutex's roll: waiting Clients (processes) in the order a release names them.
      ++places;
      std::printf("%s %zu. %s, place lasts %s\n", places == 1 ? "roll    " : "        ", places,
                  w.id == "*" ? "MultiLock waiters (woken together)" : ("client " + w.id).c_str(),
                  human_duration(w.ttl.count()).c_str());
      continue;
    }
    const bool fair = w.role == dlock::LockWaiter::Role::fair_queue;
    const auto who = holder_info(w.id);
    std::printf("%s %s%s, place %s\n", fair ? (i == 0 ? "queue   " : "        ") : "intent  ",
                fair ? (std::to_string(i + 1) + ". ").c_str() : "writer ",
                who ? ("host " + who->host + ", pid " + std::to_string(who->pid)).c_str() : shown(w.id).c_str(),
                w.ttl.count() > 0 ? ("lasts " + human_duration(w.ttl.count())).c_str() : "expired (skipped)");
  }
  if (info.kind == dlock::LockKind::fair) {
    std::printf("waiters  %lld (live places in the queue)\n", waiter_count(info));
  } else {
    std::printf("waiters  %lld (processes subscribed to %s:ch: waiting processes, plus a holder that listens\n"
                "         for revocation, such as dlock run; threads of one process count once)\n",
                info.subscribers, info.key.c_str());
  }
  return exit_code::ok;
}

}  // namespace dlock::cli
