#include "peers.hpp"

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "commandstats.hpp"
#include "targets.hpp"

namespace bench {

namespace {

CommandCounts counts_of(const Json& j) {
  CommandCounts c;
  for (const auto& [name, v] : j.members()) {
    if (v.is_number()) c[name] = static_cast<std::uint64_t>(v.number());
  }
  return c;
}

}  // namespace

Json merge_peer_results(Report& report, const std::string& path, int multi) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read peer results " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  Json doc = Json::parse(ss.str());
  const std::string library = doc.string_or("library", "peer");
  const std::string slug = doc.string_or("slug", library);
  const std::string prefix = "peer." + slug + ".";
  const std::string word = doc.string_or("callers_word", "thread");
  if (doc.has("skipped")) return doc;

  std::set<std::string> script_commands;
  for (const auto& c : doc.get("script_commands").items()) script_commands.insert(top_level_name(c.string()));

  for (const auto& u : doc.get("uncontended").items()) {
    const int callers = static_cast<int>(u.number_or("callers", 0));
    add_uncontended_row(report, prefix, library, callers, word, multi);
    Row* cmds = nullptr;
    if (callers == 1) {
      cmds = &report.add(Row{uncontended_id(prefix, 1) + ".cmds", "2 uncontended: client commands per pair, 1 " + word,
                             library, "cmds", 2, {}, {}, {}, 0, {}, {}});
    }
    for (const auto& run : u.get("runs").items()) {
      report.record(uncontended_id(prefix, callers), run.number_or("pairs_per_second", 0));
      const double pairs = run.number_or("pairs", 0);
      if (cmds != nullptr && pairs > 0) {
        cmds->runs.push_back(static_cast<double>(client_issued(counts_of(run.get("commands")), script_commands)) / pairs);
      }
    }
  }
  for (const auto& c : doc.get("contended").items()) {
    const int processes = static_cast<int>(c.number_or("processes", 2));
    const int workers = static_cast<int>(c.number_or("workers", 8));
    add_contended_rows(report, prefix, library, workers, processes, false);
    auto id = [&](const char* m) { return contended_id(prefix, processes, m); };
    for (const auto& run : c.get("runs").items()) {
      const double acq = run.number_or("acquisitions", 0);
      report.record(id("rate"), run.number_or("acquisitions_per_second", 0));
      report.record(id("util"), 100.0 * run.number_or("utilisation", 0));
      report.record(id("p50"), run.number_or("handoff_p50_us", 0));
      report.record(id("p99"), run.number_or("handoff_p99_us", 0));
      report.record(id("max"), run.number_or("handoff_max_us", 0));
      report.record(id("fair"), run.number_or("fairness", 0));
      if (acq > 0) {
        report.record(id("cmds"), static_cast<double>(client_issued(counts_of(run.get("commands")), script_commands)) / acq);
      }
    }
  }
  // The drivers ran before dlock-bench's rounds and repeat on their own: their i-th value has
  // no floor measured back to back with it, so their ratios use the judged rounds' floor median.
  for (const auto& r : report.rows()) {
    if (r.id.rfind(prefix, 0) == 0) report.find(r.id)->paired = false;
  }
  return doc;
}

}  // namespace bench
