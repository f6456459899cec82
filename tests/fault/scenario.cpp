#include "fault/scenario.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "support/wait.hpp"

namespace dlock::test {

namespace {

std::string make_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/dlock-fault-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  }
  return tmpl;
}

}  // namespace

Scenario::Scenario(ScenarioOptions opts) : opts_(std::move(opts)), dir_(make_dir()) {
  std::filesystem::create_directories(dir_ + "/resource");
  server_ = std::make_unique<RedisServer>(opts_.server);
  if (opts_.through_proxy) proxy_ = std::make_unique<FaultProxy>(server_->host(), server_->port());
  faults_ = std::make_unique<HistoryWriter>(dir_ + "/faults.history");
}

Scenario::~Scenario() {
  workers_.clear();  // SIGKILL + reap any still running
  raw_.reset();
  proxy_.reset();
  if (server_) server_->resume();  // a paused server must be killable and reaped
  server_.reset();
  std::error_code ec;
  if (std::getenv("DLOCK_FAULT_KEEP") == nullptr) std::filesystem::remove_all(dir_, ec);
  else std::fprintf(stderr, "fault scenario files kept in %s\n", dir_.c_str());
}

RawConnection& Scenario::raw() {
  raw_.reset();
  raw_ = std::make_unique<RawConnection>(*server_);
  return *raw_;
}

std::string Scenario::worker_kind(int i) const {
  if (opts_.kinds.empty()) return opts_.kind;
  return opts_.kinds[static_cast<std::size_t>(i) % opts_.kinds.size()];
}

std::vector<std::string> Scenario::worker_locks(int i) const {
  if (opts_.kinds.empty()) return opts_.locks;
  std::vector<std::string> out;
  for (const auto& l : opts_.locks) out.push_back(worker_kind(i) + "-" + l);
  return out;
}

void Scenario::start_workers() {
  const std::string url = opts_.through_proxy ? proxy_->url() : server_->url();
  for (int i = 0; i < opts_.processes; ++i) {
    std::string locks;
    for (const auto& l : worker_locks(i)) locks += (locks.empty() ? "" : ",") + l;
    const std::string proc = "w" + std::to_string(i);
    // Built before fork(): the child may only exec (no allocation after a threaded fork).
    auto args = std::make_shared<std::vector<std::string>>(std::vector<std::string>{
        DLOCK_FAULT_WORKER, "--url", url, "--history", dir_ + "/" + proc + ".history",
        "--proc", proc, "--resource", dir_ + "/resource", "--kind", worker_kind(i), "--locks", locks,
        "--threads", std::to_string(opts_.threads), "--seconds",
        std::to_string(opts_.duration.count()), "--ttl", std::to_string(opts_.ttl.count()),
        "--hold-ms", std::to_string(opts_.hold.count()), "--wait-ms",
        std::to_string(opts_.wait.count()), "--command-timeout",
        std::to_string(opts_.command_timeout.count())});
    auto argv = std::make_shared<std::vector<char*>>();
    for (auto& a : *args) argv->push_back(a.data());
    argv->push_back(nullptr);
    workers_.push_back(std::make_unique<ChildProcess>([args, argv]() -> int {
      detail::close_fds_from(3);
      detail::reset_signals();
      ::execv((*argv)[0], argv->data());
      return 127;
    }));
  }
}

std::size_t Scenario::acquisitions() const {
  std::size_t count = 0;
  for (const Event& e : read_histories(dir_)) count += e.kind == EventKind::acquire;
  return count;
}

bool Scenario::wait_for_acquisitions(std::size_t n, std::chrono::milliseconds timeout) {
  return eventually([&] { return acquisitions() >= n; }, scaled(timeout),
                    std::chrono::milliseconds(50));
}

void Scenario::record(const Event& e) { faults_->append(e); }

void Scenario::fault(std::string_view kind, const std::string& target,
                     std::chrono::milliseconds length, const std::function<void()>& inject,
                     const std::function<void()>& heal) {
  Event e;
  e.kind = EventKind::fault, e.outcome = kind, e.proc = target;
  e.t = now_ns();
  inject();
  std::this_thread::sleep_for(length);
  heal();
  e.end = now_ns();
  record(e);
}

void Scenario::instant_fault(std::string_view kind, const std::function<void()>& act) {
  Event e;
  e.kind = EventKind::fault, e.outcome = kind, e.proc = "server";
  e.t = now_ns();
  act();
  e.end = now_ns();
  record(e);
}

std::optional<int> Scenario::current_holder() {
  std::map<std::string, std::string> open;  // hold -> proc
  for (const Event& e : read_histories(dir_)) {
    if (e.kind == EventKind::acquire) open[e.hold] = e.proc;
    if (e.kind == EventKind::release || e.kind == EventKind::loss) open.erase(e.hold);
  }
  for (const auto& [hold, proc] : open) {
    if (proc.size() > 1 && proc[0] == 'w') return std::atoi(proc.c_str() + 1);
  }
  return std::nullopt;
}

void Scenario::pause_worker(int i, std::chrono::milliseconds length) {
  ChildProcess& w = *workers_.at(static_cast<std::size_t>(i));
  fault(fault::client_pause, "w" + std::to_string(i), length, [&] { w.signal(SIGSTOP); },
        [&] { w.signal(SIGCONT); });
}

void Scenario::sleep(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

namespace {

// A hung worker's threads, to stderr, before it is killed: the test log then shows where the
// library stood (a hang is seen seldom, and rarely again by hand). Needs gdb (scripts/install-deps
// installs it; the worker allows the attach: PR_SET_PTRACER); without it, only the hang is
// reported.
void print_stacks(pid_t pid) {
  // Bounded: a gdb that hangs must not keep the worker from being killed.
  const std::string cmd = "command -v gdb >/dev/null && timeout -k 5 60 gdb -p " + std::to_string(pid) +
                          " -batch -q -iex 'set debuginfod enabled off' -ex 'thread apply all bt' 2>&1"
                          " | grep -v '^\\[New LWP' | head -400 >&2";
  std::fprintf(stderr, "worker pid %d hung; its threads:\n", static_cast<int>(pid));
  (void)std::system(cmd.c_str());
}

}  // namespace

std::vector<int> Scenario::join_workers() {
  std::vector<int> codes;
  // The workers stop taking locks after `duration`; a release or wait in progress then ends
  // within its own timeouts.
  const auto limit = scaled(opts_.wait + 4 * opts_.command_timeout + std::chrono::seconds(10));
  for (auto& w : workers_) {
    auto code = w->wait_for(limit);
    if (!code) {
      print_stacks(w->pid());
      w->signal(SIGKILL);
      codes.push_back(-1);  // hung
    } else {
      codes.push_back(*code);
    }
  }
  return codes;
}

CheckReport Scenario::check() {
  CheckBounds b;
  b.renew_interval = opts_.ttl / 3;
  // Honesty: a round trip, which after a broken connection includes a reconnect and a
  // command timeout of the attempt that found it broken.
  b.round_trip = scaled(2 * opts_.command_timeout + std::chrono::milliseconds(500));
  b.wait_slack = scaled(2 * opts_.command_timeout + std::chrono::milliseconds(1000));
  b.settle = scaled(2 * opts_.command_timeout + opts_.ttl);
  CheckReport r = dlock::test::check(read_histories(dir_), b);
  std::printf("[history] %s\n", r.summary().c_str());
  return r;
}

bool Scenario::locks_left_behind_expire() {
  auto ends_with = [](const std::string& k, std::string_view suffix) {
    return k.size() >= suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return eventually(
      [&] {
        RawConnection& r = raw();
        const std::string server_ms = std::to_string(r.server_ms());
        std::set<std::string> names;
        for (int i = 0; i < opts_.processes; ++i) {
          for (const auto& l : worker_locks(i)) names.insert(l);
        }
        for (const auto& l : names) {
          // The lock's own key is gone and every other key of it expires on its own, except
          // those permanent by design (the documented layouts in include/dlock/*.hpp): the
          // fencing counter and a Semaphore's limit. A Semaphore's permits are zset entries
          // that expire by score: none may still be live.
          for (const auto& k : r.cmd_array({"KEYS", "dlock:{" + l + "}*"})) {
            if (k == "dlock:{" + l + "}") return false;
            if (ends_with(k, ":fence") || ends_with(k, ":limit")) continue;
            if (ends_with(k, ":permits")) {
              if (r.cmd_int({"ZCOUNT", k, "(" + server_ms, "+inf"}) != 0) return false;
              continue;
            }
            if (r.cmd_int({"PTTL", k}) == -1) return false;
          }
        }
        return true;
      },
      scaled(opts_.ttl + std::chrono::milliseconds(1000)), std::chrono::milliseconds(50));
}

}  // namespace dlock::test
