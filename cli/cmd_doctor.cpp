// dlock doctor — checks the server for what dlock relies on, and says what to change.
// Every check goes through Client::command (or, per node, Client::command_on); a check the ACL
// (or a managed service) refuses is reported as "cannot check", never as a failure, and counted
// (the summary line, "unchecked" in JSON). Exit 0 unless a check failed (78).
//
// The server checks (version, eviction, persistence, replication) run on every node that holds
// locks: the one server, the primary the sentinels named, or EVERY primary of a Cluster (each
// reported with its node, plus that node's cluster_state), since each has its own settings.
// The URL's kind is checked against the server's mode (cluster_enabled) both ways.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "commands.hpp"
#include "lock_target.hpp"
#include "node_fanout.hpp"

namespace dlock::cli {

namespace {

enum class Status { ok, info, warn, fail, unknown };

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::info: return "info";
    case Status::warn: return "warn";
    case Status::fail: return "FAIL";
    case Status::unknown: return "?";
  }
  return "?";
}

const char* status_json(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::info: return "info";
    case Status::warn: return "warn";
    case Status::fail: return "fail";
    case Status::unknown: return "cannot_check";
  }
  return "cannot_check";
}

struct Check {
  std::string name;
  Status status;
  std::string detail;
  std::string fix;
  std::string node = {};  // the Cluster node it is about; empty: the deployment
};

// One command to the node under check.
using Probe = std::function<dlock::Result<dlock::Reply>(std::vector<std::string>)>;

// "field:value" lines of an INFO section.
std::string info_field(const std::string& info, const std::string& field) {
  std::istringstream in(info);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  }
  return {};
}

// CONFIG GET name -> its value; nullopt (with `why`) when refused.
std::optional<std::string> config_get(const Probe& c, const std::string& name, std::string& why) {
  auto r = c({"CONFIG", "GET", name});
  if (!r) {
    why = r.error().what();
    return std::nullopt;
  }
  if (!r->is_array() || r->size() < 2) {
    why = "no such setting";
    return std::nullopt;
  }
  return (*r)[1].str();
}

Check check_version(const Probe& c) {
  auto r = c({"INFO", "server"});
  if (!r) return {"version", Status::unknown, "cannot check: " + r.error().what(), ""};
  const std::string v = info_field(r->str(), "redis_version");
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) != 2) {
    return {"version", Status::unknown, "cannot read redis_version from INFO", ""};
  }
  if (major >= 7) return {"version", Status::ok, "Redis " + v, ""};
  // The scripts keep a waiters' roll's TTL with PEXPIRE ... GT / NX (7.0): on an older server a
  // waiter's busy try fails with a script error.
  return {"version", Status::fail, "Redis " + v + " is older than 7.0, which dlock's scripts need (PEXPIRE GT/NX)",
          "upgrade to Redis 7.0 or later"};
}

Check check_eviction(const Probe& c) {
  std::string why;
  auto policy = config_get(c, "maxmemory-policy", why);
  if (!policy) return {"maxmemory-policy", Status::unknown, "cannot check: " + why, ""};
  if (*policy == "noeviction") return {"maxmemory-policy", Status::ok, "noeviction", ""};
  std::string limit;
  auto maxmemory = config_get(c, "maxmemory", why);
  if (maxmemory) limit = *maxmemory == "0" ? " (maxmemory 0: no limit yet)" : " (maxmemory " + *maxmemory + ")";
  return {"maxmemory-policy", Status::fail,
          *policy + limit + ": under memory pressure Redis evicts keys, and an evicted lock key is a lock "
                            "silently freed while its holder still works",
          "CONFIG SET maxmemory-policy noeviction, and set it in redis.conf (or use a dedicated instance)"};
}

Check check_persistence(const Probe& c) {
  std::string why;
  auto aof = config_get(c, "appendonly", why);
  if (!aof) return {"persistence", Status::unknown, "cannot check: " + why, ""};
  auto save = config_get(c, "save", why);
  if (*aof == "yes") return {"persistence", Status::ok, "appendonly yes", ""};
  const std::string fix = "CONFIG SET appendonly yes (and appendfsync everysec or always), also in redis.conf";
  if (save && !save->empty()) {
    return {"persistence", Status::warn,
            "RDB snapshots only (save \"" + *save + "\"): a crash loses locks and fencing counters written "
            "since the last snapshot (counters are re-seeded from the server clock)", fix};
  }
  return {"persistence", Status::warn,
          "none: a restart forgets every lock and fencing counter (counters are re-seeded from the server clock)", fix};
}

// The commands the library's Lua scripts call (src/scripts/*.lua: `grep -o "redis.call('[A-Z]*'"`),
// each with arguments of the right arity for ACL DRYRUN. ACLs are enforced inside scripts too,
// so a user allowed EVAL but not, say, PEXPIRE passes the EVAL probe and then fails every
// acquisition. Keep this list in step with the scripts.
struct ScriptCommand {
  const char* name;
  std::vector<std::string> args;  // after the key
  bool keyless = false;
};

const std::vector<ScriptCommand>& script_commands() {
  static const std::vector<ScriptCommand> commands = {
      {"GET", {}}, {"SET", {"v"}}, {"DEL", {}}, {"EXISTS", {}}, {"TYPE", {}}, {"PTTL", {}},
      {"PEXPIRE", {"1000"}}, {"INCR", {}}, {"DECR", {}}, {"TIME", {}, true},
      {"HGET", {"f"}}, {"HSET", {"f", "v"}}, {"HDEL", {"f"}}, {"HMGET", {"f"}}, {"HINCRBY", {"f", "1"}},
      {"HGETALL", {}}, {"HEXISTS", {"f"}},
      {"LINDEX", {"0"}}, {"LPOP", {}}, {"LREM", {"0", "v"}}, {"RPUSH", {"v"}}, {"LRANGE", {"0", "-1"}},
      {"ZADD", {"1", "m"}}, {"ZPOPMIN", {}}, {"ZREM", {"m"}}, {"ZSCORE", {"m"}}, {"ZRANGEBYSCORE", {"0", "1"}},
      {"ZRANGE", {"0", "-1"}}, {"ZREMRANGEBYSCORE", {"0", "1"}}, {"ZREMRANGEBYRANK", {"0", "0"}}, {"ZCARD", {}},
      {"ZCOUNT", {"0", "1"}},
  };
  return commands;
}

// Which scripts need what: a Mutex (and MultiLock, Redlock, fencing counters) needs the first
// group (the README's minimal ACL); the roll (ZADD, ZPOPMIN, ZREM) is optional for it; the other
// kinds and the admin commands need more.
const std::vector<std::string> kMutexCommands = {"GET", "SET", "DEL", "EXISTS", "TYPE", "PTTL", "PEXPIRE",
                                                 "INCR", "DECR", "TIME"};
const std::vector<std::string> kRollCommands = {"ZADD", "ZPOPMIN", "ZREM"};
const std::vector<std::pair<std::string, std::vector<std::string>>> kKindCommands = {
    {"fair", {"LINDEX", "LPOP", "LREM", "RPUSH", "HGET", "HSET", "HDEL", "ZADD", "ZREM", "ZSCORE", "ZRANGEBYSCORE"}},
    {"reentrant", {"HINCRBY", "HMGET", "HSET"}},
    {"rw", {"HGET", "HMGET", "HSET", "HDEL", "ZADD", "ZRANGE", "ZREM", "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZCARD",
            "ZCOUNT", "ZSCORE"}},
    {"semaphore", {"HGET", "HSET", "ZADD", "ZCARD", "ZRANGE", "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZREM", "ZSCORE",
                   "ZCOUNT"}},
    {"status/list/leaks/unlock", {"HGET", "HGETALL", "HEXISTS", "LINDEX", "LRANGE", "ZSCORE", "ZRANGEBYSCORE"}},
};

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// On a Cluster dlock notifies over sharded pub/sub (SPUBLISH/SSUBSCRIBE), so those are probed.
std::vector<Check> check_acl(dlock::Client& c, const std::string& prefix, bool cluster) {
  auto who = c.command({"ACL", "WHOAMI"});
  if (!who) return {{"acl", Status::unknown, "cannot check: " + who.error().what(), ""}};
  const std::string user = who->str();
  const std::string key = prefix + "{doctor}";
  const std::string channel = key + ":ch";
  const std::vector<std::pair<std::string, std::vector<std::string>>> probes = {
      {"scripts (EVALSHA)", {"EVALSHA", std::string(40, '0'), "1", key}},
      {"scripts (EVAL)", {"EVAL", "return 1", "1", key}},
      {std::string(cluster ? "SPUBLISH" : "PUBLISH") + " release notifications",
       {cluster ? "SPUBLISH" : "PUBLISH", channel, "released"}},
      {std::string(cluster ? "SSUBSCRIBE" : "SUBSCRIBE") + " to release notifications",
       {cluster ? "SSUBSCRIBE" : "SUBSCRIBE", channel}},
  };
  std::vector<Check> out;
  // nullopt: allowed; else the refusal. Empty optional return: DRYRUN itself failed.
  std::string dryrun_error;
  auto dryrun = [&](const std::vector<std::string>& cmd) -> std::optional<std::string> {
    std::vector<std::string> dry = {"ACL", "DRYRUN", user};
    dry.insert(dry.end(), cmd.begin(), cmd.end());
    auto r = c.command(dry);
    if (!r) {
      dryrun_error = r.error().what();
      return std::nullopt;
    }
    if (r->is_status() && r->str() == "OK") return std::nullopt;
    return r->str();
  };
  const auto cannot_check = [&] {
    return Check{"acl", Status::unknown,
                 "cannot check (ACL DRYRUN needs Redis 7 and the right to run it): " + dryrun_error, ""};
  };
  std::string denied;
  for (const auto& [what, cmd] : probes) {
    auto refused = dryrun(cmd);
    if (!dryrun_error.empty()) return {cannot_check()};
    if (refused) denied += (denied.empty() ? "" : "; ") + what + ": " + *refused;
  }
  std::set<std::string> refused_in_scripts;
  std::string script_refusal;  // the first refusal's text, which names the reason (command, key)
  for (const auto& sc : script_commands()) {
    std::vector<std::string> cmd = {sc.name};
    if (!sc.keyless) cmd.push_back(key + ":acl");
    cmd.insert(cmd.end(), sc.args.begin(), sc.args.end());
    auto refused = dryrun(cmd);
    if (!dryrun_error.empty()) return {cannot_check()};
    if (refused) {
      refused_in_scripts.insert(sc.name);
      if (script_refusal.empty()) script_refusal = *refused;
    }
  }
  const auto refused_of = [&](const std::vector<std::string>& names) {
    std::string list;
    for (const auto& n : names) {
      if (refused_in_scripts.count(n) != 0) list += (list.empty() ? "" : " ") + lower(n);
    }
    return list;
  };
  const std::string core = refused_of(kMutexCommands);
  if (!core.empty()) {
    denied += (denied.empty() ? "" : "; ") + std::string("inside the lock scripts: ") + core + " (" +
              script_refusal + ")";
  }
  const std::string roll = refused_of(kRollCommands);
  const std::string fix = "ACL SETUSER " + user + " ~" + prefix + "* &" + prefix +
                          "* +get +set +del +pexpire +pttl +type +exists +incr +decr +time +zadd +zpopmin +zrem +eval "
                          "+evalsha +publish +subscribe +unsubscribe +scan +pubsub +ping +client|setname" +
                          (cluster ? " +spublish +ssubscribe +sunsubscribe +cluster|slots" : "");
  if (denied.empty() && !roll.empty()) {
    out.push_back({"acl", Status::warn,
                   "user '" + user + "' is refused " + roll +
                       " (the waiters' roll): locks work, but a Mutex release wakes every waiting process instead of one",
                   fix});
  } else if (denied.empty()) {
    out.push_back({"acl", Status::ok, "user '" + user + "' may use keys and channels under '" + prefix + "'", ""});
  } else {
    out.push_back({"acl", Status::fail,
                   "user '" + user + "' is refused: " + denied + (roll.empty() ? "" : "; the waiters' roll: " + roll),
                   fix});
  }
  // The other kinds: a warning, not a failure (the README's minimal ACL is for mutexes), but
  // each named, since their acquisitions fail with errc::auth.
  std::string kinds, missing;
  std::set<std::string> missing_set;
  for (const auto& [kind, names] : kKindCommands) {
    const std::string r = refused_of(names);
    if (r.empty()) continue;
    kinds += (kinds.empty() ? "" : "; ") + kind + " (" + r + ")";
    for (const auto& n : names) {
      if (refused_in_scripts.count(n) != 0 && missing_set.insert(n).second) missing += " +" + lower(n);
    }
  }
  if (!kinds.empty()) {
    out.push_back({"acl-kinds", Status::warn,
                   "user '" + user + "' may not run what these need inside their scripts: " + kinds +
                       "; they fail with an ACL error",
                   "if you use them: ACL SETUSER " + user + missing});
  } else {
    out.push_back({"acl-kinds", Status::ok, "every lock kind's scripts may run", ""});
  }
  return out;
}

Check check_keyspace_events(const Probe& c) {
  std::string why;
  auto flags = config_get(c, "notify-keyspace-events", why);
  if (!flags) return {"keyspace-events", Status::unknown, "cannot check: " + why, ""};
  auto has = [&](char f) { return flags->find(f) != std::string::npos; };
  // 'g' carries DEL (a force-unlock, another client's delete), 'x' expiries; 'A' is both.
  const bool deletes = has('K') && (has('A') || has('g'));
  const bool expiries = has('K') && (has('A') || has('x'));
  const std::string on = "on (\"" + *flags + "\"): ";
  if (deletes && expiries) {
    return {"keyspace-events", Status::info,
            on + "waiters also wake at once when a lock expires or another client deletes it", ""};
  }
  if (deletes) {
    return {"keyspace-events", Status::info,
            on + "waiters also wake at once when another client deletes a lock, but not when one expires "
                 "(noticed at its TTL or the next recheck)",
            "optional: CONFIG SET notify-keyspace-events " + *flags + "x"};
  }
  if (expiries) {
    return {"keyspace-events", Status::info,
            on + "waiters also wake at once when a lock expires, but not when another client deletes one "
                 "(noticed at its TTL or the next recheck)",
            "optional: CONFIG SET notify-keyspace-events " + *flags + "g"};
  }
  return {"keyspace-events", Status::info,
          "off: waiters wake on dlock's release notifications; a lock that expires or that another client "
          "deletes is noticed at its TTL or the next recheck (500 ms)",
          "optional: CONFIG SET notify-keyspace-events Kgx"};
}

// `ack`: --replicas K, the replicas each acquisition would wait for (0: off).
Check check_replication(const Probe& c, unsigned ack) {
  auto r = c({"INFO", "replication"});
  if (!r) return {"replication", Status::unknown, "cannot check: " + r.error().what(), ""};
  const std::string role = info_field(r->str(), "role");
  const std::string replicas_text = info_field(r->str(), "connected_slaves");
  if (role == "slave" || role == "replica") {
    return {"replication", Status::fail, "this server is a replica: lock writes are refused (READONLY)",
            "point --redis at the primary"};
  }
  const unsigned replicas = static_cast<unsigned>(std::strtoul(replicas_text.c_str(), nullptr, 10));
  const std::string k = std::to_string(ack), n = std::to_string(replicas);
  if (replicas > 0 && ack == 0) {
    return {"replication", Status::warn,
            "primary with " + n + " replica(s), and replication acknowledgement is off: replication is "
            "asynchronous, so a failover can lose a lock that was granted",
            "have acquisitions wait for replicas with --replicas K (K <= " + n + ", for run and acquire; "
            "ClientOptions::replication_ack in the library), and protect the resource with fencing tokens"};
  }
  if (ack > replicas) {
    return {"replication", Status::fail,
            "--replicas " + k + " but the primary has " + n + " connected replica(s): every acquisition would "
            "fail (it is undone when fewer replicas acknowledge)",
            (replicas == 0 ? std::string("drop --replicas (there are no replicas)")
                           : "lower --replicas to at most " + n) + ", or bring the replicas back"};
  }
  if (ack > 0) {
    return {"replication", Status::ok,
            "primary with " + n + " replica(s); each acquisition waits for " + k + " of them to acknowledge (WAIT)", ""};
  }
  return {"replication", Status::ok, "role " + (role.empty() ? std::string("unknown") : role) + ", no replicas", ""};
}

Check check_cluster_state(const Probe& c) {
  auto r = c({"CLUSTER", "INFO"});
  if (!r) return {"cluster-state", Status::unknown, "cannot check: " + r.error().what(), ""};
  const std::string state = info_field(r->str(), "cluster_state");
  if (state == "ok") return {"cluster-state", Status::ok, "cluster_state ok", ""};
  return {"cluster-state", Status::fail,
          "cluster_state " + (state.empty() ? std::string("unknown") : state) +
              ": this node refuses commands (CLUSTERDOWN), so locks in its slots cannot be taken or renewed",
          "CLUSTER INFO and redis-cli --cluster check: every slot must be served"};
}

// Whether the node runs in cluster mode: INFO's cluster_enabled, or where INFO is refused, CLUSTER
// INFO (refused with "cluster support disabled" by a server that is not). nullopt, with `why`,
// when neither tells.
std::optional<bool> cluster_enabled(const Probe& c, std::string& why) {
  if (auto r = c({"INFO", "cluster"}); r) {
    const std::string v = info_field(r->str(), "cluster_enabled");
    if (v == "0" || v == "1") return v == "1";
  } else {
    why = r.error().what();
  }
  auto r = c({"CLUSTER", "INFO"});
  if (r) return true;
  if (r.error().what().find("cluster support disabled") != std::string::npos) return false;
  why = r.error().what();
  return std::nullopt;
}

// The URL's deployment against the server's mode. A redis-cluster:// URL naming a server that is
// not in cluster mode gets no slot map: dlock takes the seed for the deployment's one primary,
// and every Cluster check on it (cluster_state) can only say "cannot check", which looked like a
// doctor that passed. A redis:// URL naming a Cluster node treats that node as the whole
// deployment: locks whose slot another node serves fail with MOVED, and list/leaks see only this
// node's keys. `node` is the one checked, named in the URL the fix proposes.
Check check_cluster_mode(const Probe& c, bool cluster_url, const dlock::ServerAddress& node) {
  std::string why;
  const std::optional<bool> enabled = cluster_enabled(c, why);
  if (!enabled) return {"cluster-mode", Status::unknown, "cannot check: " + why, ""};
  const bool tls = node.tls.enabled;
  const std::string host_port = node.transport == dlock::ServerAddress::Transport::unix_socket
                                    ? std::string("HOST:PORT")
                                    : (node.host.find(':') != std::string::npos ? "[" + node.host + "]" : node.host) +
                                          ":" + std::to_string(node.port);
  if (cluster_url && !*enabled) {
    return {"cluster-mode", Status::fail,
            std::string("the URL is ") + (tls ? "rediss" : "redis") + "-cluster://, but this server is not in cluster " +
                "mode (cluster_enabled:0): dlock finds no slot map and takes it for the Cluster's only primary",
            "for this one server use --redis " + std::string(tls ? "rediss://" : "redis://") + host_port +
                (tls ? " (with the same TLS parameters)" : "") + "; if a Cluster was meant, name one of its nodes"};
  }
  if (!cluster_url && *enabled) {
    return {"cluster-mode", Status::fail,
            "this server is a Cluster node (cluster_enabled:1), but the URL names one server: locks whose slot "
            "another node serves fail with MOVED, and list and leaks see only this node's keys",
            "use --redis " + std::string(tls ? "rediss-cluster://" : "redis-cluster://") + host_port +
                " (any node of the Cluster will do as the seed)"};
  }
  return {"cluster-mode", Status::ok,
          *enabled ? "a Cluster node (cluster_enabled:1)" : "one server, not in cluster mode (cluster_enabled:0)", ""};
}

}  // namespace

int cmd_doctor(Context& ctx, const Args& args) {
  static const std::vector<OptionSpec> specs = {{"--replicas", 0, true}};
  ParsedArgs a = ctx.parse(args, specs);
  ctx.reject_redlock();
  if (!a.positionals.empty()) throw UsageError("doctor takes no arguments");
  const unsigned ack = replicas_option(a).value_or(0);
  dlock::Client& c = ctx.client();
  auto nodes = data_nodes(c);
  if (!nodes) return ctx.fail(nodes.error());
  const auto kind = c.deployment().kind;

  std::vector<Check> checks;
  if (kind == dlock::Deployment::Kind::sentinel) {
    checks.push_back({"sentinel", Status::info,
                      "the sentinels name " + nodes->front().display() + " as the primary of '" +
                          c.deployment().master_name + "'",
                      ""});
  }
  for (const auto& node : *nodes) {
    const Probe probe = [&c, &node](std::vector<std::string> cmd) { return c.command_on(node, std::move(cmd)); };
    std::vector<Check> per_node;
    // On a Cluster only a mismatch is reported: cluster-state says "ok" of a node in cluster mode.
    // Sentinel is not checked: it does not monitor Cluster nodes.
    if (kind == dlock::Deployment::Kind::cluster) {
      Check mode = check_cluster_mode(probe, /*cluster_url=*/true, node);
      per_node.push_back(mode.status == Status::fail ? std::move(mode) : check_cluster_state(probe));
    } else if (kind == dlock::Deployment::Kind::standalone) {
      per_node.push_back(check_cluster_mode(probe, /*cluster_url=*/false, node));
    }
    per_node.push_back(check_version(probe));
    per_node.push_back(check_eviction(probe));
    per_node.push_back(check_persistence(probe));
    per_node.push_back(check_replication(probe, ack));
    for (auto& k : per_node) {
      if (kind == dlock::Deployment::Kind::cluster) k.node = node.display();
      checks.push_back(std::move(k));
    }
  }
  // Deployment-wide: the ACL probes are routed by their key; the keyspace-events setting is
  // read where the first primary has it.
  for (auto& acl : check_acl(c, ctx.globals().prefix, kind == dlock::Deployment::Kind::cluster)) {
    checks.push_back(std::move(acl));
  }
  checks.push_back(check_keyspace_events(
      [&c, &nodes](std::vector<std::string> cmd) { return c.command_on(nodes->front(), std::move(cmd)); }));

  int failed = 0, warned = 0, unchecked = 0;
  for (const auto& k : checks) {
    failed += k.status == Status::fail;
    warned += k.status == Status::warn;
    unchecked += k.status == Status::unknown;
  }
  if (ctx.json()) {
    Json j = ctx.begin_json(failed == 0);
    j.field("server", c.deployment().display()).field("prefix", ctx.globals().prefix);
    j.field("replicas", static_cast<long long>(ack));
    j.field("failed", failed).field("warnings", warned).field("unchecked", unchecked);
    j.key("checks").begin_array();
    for (const auto& k : checks) {
      j.begin_object().field("check", k.name).field("status", status_json(k.status)).field("detail", k.detail);
      j.key("node").opt_str(k.node.empty() ? std::nullopt : std::optional<std::string>(k.node));
      j.key("fix").opt_str(k.fix.empty() ? std::nullopt : std::optional<std::string>(k.fix));
      j.end_object();
    }
    j.end_array();
    ctx.print_json(j);
  } else {
    std::printf("dlock doctor: %s, prefix '%s'\n", c.deployment().display().c_str(), ctx.globals().prefix.c_str());
    for (const auto& k : checks) {
      const std::string where = k.node.empty() ? std::string() : "[" + k.node + "] ";
      std::printf("  %-4s  %-16s  %s%s\n", status_name(k.status), k.name.c_str(), where.c_str(), k.detail.c_str());
      if (!k.fix.empty() && k.status != Status::ok) std::printf("        %-16s  fix: %s\n", "", k.fix.c_str());
    }
    // "all is well" only when every check was made: a check the ACL or a managed service
    // refused proves nothing either way, and a user may have forbidden them all.
    if (failed == 0 && warned == 0 && unchecked == 0) {
      std::printf("all is well\n");
    } else {
      std::printf("%d failed, %d warning(s)", failed, warned);
      if (unchecked > 0) std::printf(", %d check(s) could not be made (marked '?')", unchecked);
      std::printf("\n");
    }
  }
  // A check that could not be made is no failure: a managed service may refuse CONFIG or INFO
  // for good, and doctor would then never pass. The summary and "unchecked" say how many.
  return failed == 0 ? exit_code::ok : exit_code::refused;
}

}  // namespace dlock::cli
