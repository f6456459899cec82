#include "kinds_run.hpp"

#include <cstdio>
#include <stdexcept>

#include "contended.hpp"
#include "kinds.hpp"
#include "targets.hpp"
#include "uncontended.hpp"

namespace bench {

namespace {

// --kinds, minus Redlock when no --redlock nodes were given.
std::vector<const KindInfo*> selected(const Options& o) {
  std::vector<const KindInfo*> out;
  for (const auto& k : scenario5_kinds()) {
    if (!wants_kind(o, k.slug) || (k.kind == LockKind::redlock && o.redlock_urls.empty())) continue;
    out.push_back(&k);
  }
  return out;
}

}  // namespace

std::vector<std::string> kinds_to_run(const Options& o) {
  for (const auto& want : o.kinds) {
    bool known = false;
    for (const auto& k : scenario5_kinds()) known = known || k.slug == want;
    if (!known) throw std::runtime_error("--kinds: unknown kind '" + want + "' (see --help)");
  }
  if (wants_kind(o, "redlock") && o.redlock_urls.empty()) {
    std::fprintf(stderr, "dlock-bench: no --redlock nodes: Redlock is left out of scenario 5\n");
  }
  std::vector<std::string> out;
  for (const KindInfo* k : selected(o)) out.push_back(k->slug);
  return out;
}

void add_kind_rows(Report& r, const Options& o) {
  const int multi = o.floor_connections;
  for (const KindInfo* kp : selected(o)) {
    const KindInfo& k = *kp;
    const std::string prefix = kind_prefix(k.slug);
    for (int t : o.kind_threads) add_uncontended_row(r, prefix, k.label, t, "thread", multi);
    r.add(Row{prefix + "uncontended.t1.cmds", "2 uncontended: client commands per pair, 1 thread", k.label, "cmds", 2,
              {}, {}, {}, 0, {}, {}});
    if (k.contended) {
      add_contended_rows(r, prefix, k.label, o.contended_workers, o.kind_processes, true, k.kind == LockKind::fair);
    }
  }
}

void kinds_round(const Options& o, int round, Report& r, KindsRoundOutput out) {
  const std::string rs = ".r" + std::to_string(round);
  for (const KindInfo* kp : selected(o)) {
    const KindInfo& k = *kp;
    const std::string prefix = kind_prefix(k.slug);
    for (int t : o.kind_threads) {
      auto u = uncontended_pairs(o.redis_url, t, AcquireStyle::waiting, o.warmup, o.duration, k.kind, o.redlock_urls);
      r.record(uncontended_id(prefix, t), u.pairs_per_second);
      out.errors += u.errors;
      if (t == 1) r.record(prefix + "uncontended.t1.cmds", u.commands_per_pair);
      out.details.set(prefix + "uncontended.t" + std::to_string(t) + rs, counts_json(u.commands));
      std::fprintf(stderr, "  %-28s %2d thread%s  %.0f pairs/s, %.2f commands/pair\n", k.label.c_str(), t,
                   t == 1 ? " " : "s", u.pairs_per_second, u.commands_per_pair);
    }
    if (!k.contended) continue;
    const int p = o.kind_processes;
    ContendedConfig cfg{o.redis_url, o.contended_workers, p, o.hold_us, o.warmup, o.contended_duration, k.kind,
                        o.redlock_urls};
    auto c = contended_run(cfg);
    auto id = [&](const char* m) { return contended_id(prefix, p, m); };
    r.record(id("rate"), c.acquisitions_per_second);
    r.record(id("util"), 100 * c.utilisation);
    r.record(id("p50"), c.handoff_p50_us);
    r.record(id("p99"), c.handoff_p99_us);
    r.record(id("max"), c.handoff_max_us);
    r.record(id("fair"), c.fairness);
    r.record(id("cmds"), c.commands_per_acquisition);
    r.record(id("xp50"), c.cross_process_p50_us);
    r.record(id("rel50"), c.release_p50_us);
    out.errors += c.errors;
    Json d = Json::object();
    d.set("acquisitions", c.acquisitions);
    d.set("handoffs", c.handoff_us.size());
    d.set("commands", counts_json(c.commands));
    d.set("per_worker", Json::array_of(c.per_worker));
    out.details.set(prefix + "contended.p" + std::to_string(p) + rs, d);
    auto& pool = out.samples[k.slug + "-p" + std::to_string(p)];
    pool.insert(pool.end(), c.handoff_us.begin(), c.handoff_us.end());
    std::fprintf(stderr,
                 "  %-28s contended %d processes: %.0f acq/s, util %.1f%%, handoff p50 %.0f p99 %.0f max %.0f us, "
                 "fairness %.2f, %.2f cmds/acq, release() p50 %.0f us\n",
                 k.label.c_str(), p, c.acquisitions_per_second, 100 * c.utilisation, c.handoff_p50_us,
                 c.handoff_p99_us, c.handoff_max_us, c.fairness, c.commands_per_acquisition, c.release_p50_us);
  }
}

}  // namespace bench
