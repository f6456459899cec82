#include "support/history.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace dlock::test {

namespace {

constexpr std::string_view kKindNames[] = {"attempt_begin", "attempt_end", "acquire", "release",
                                           "loss",          "write",       "fault"};

std::string_view kind_name(EventKind k) { return kKindNames[static_cast<int>(k)]; }

EventKind kind_from(std::string_view s) {
  for (std::size_t i = 0; i < std::size(kKindNames); ++i) {
    if (kKindNames[i] == s) return static_cast<EventKind>(i);
  }
  throw std::invalid_argument("history: unknown event kind '" + std::string(s) + "'");
}

std::uint64_t to_u64(std::string_view v) { return std::stoull(std::string(v)); }
std::int64_t to_i64(std::string_view v) { return std::stoll(std::string(v)); }

std::string ms(std::int64_t ns) { return std::to_string(ns / 1'000'000) + " ms"; }

constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();

}  // namespace

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string to_line(const Event& e) {
  std::ostringstream o;
  o << "t=" << e.t << " ev=" << kind_name(e.kind);
  if (e.kind == EventKind::fault) o << " end=" << e.end;
  if (!e.proc.empty()) o << " proc=" << e.proc;
  if (!e.lock.empty()) o << " lock=" << e.lock;
  if (!e.hold.empty()) o << " hold=" << e.hold;
  if (!e.owner.empty()) o << " owner=" << e.owner;
  if (e.token) o << " token=" << e.token;
  if (e.kind == EventKind::write) o << " seq=" << e.seq << " accepted=" << (e.accepted ? 1 : 0);
  if (e.kind == EventKind::attempt_begin || e.kind == EventKind::attempt_end ||
      (e.kind == EventKind::acquire && e.attempt != 0)) {
    o << " attempt=" << e.attempt;
  }
  if (e.kind == EventKind::attempt_begin) o << " wait_ms=" << e.wait_ms;
  if (!e.outcome.empty()) o << " outcome=" << e.outcome;
  return o.str();
}

Event parse_line(std::string_view line) {
  Event e;
  bool has_t = false, has_ev = false;
  std::size_t pos = 0;
  try {
    while (pos < line.size()) {
      std::size_t sp = line.find(' ', pos);
      std::string_view field = line.substr(pos, sp == std::string_view::npos ? sp : sp - pos);
      pos = sp == std::string_view::npos ? line.size() : sp + 1;
      if (field.empty()) continue;
      std::size_t eq = field.find('=');
      if (eq == std::string_view::npos) throw std::invalid_argument("no '='");
      std::string_view k = field.substr(0, eq), v = field.substr(eq + 1);
      if (k == "t") e.t = to_i64(v), has_t = true;
      else if (k == "ev") e.kind = kind_from(v), has_ev = true;
      else if (k == "end") e.end = to_i64(v);
      else if (k == "proc") e.proc = v;
      else if (k == "lock") e.lock = v;
      else if (k == "hold") e.hold = v;
      else if (k == "owner") e.owner = v;
      else if (k == "token") e.token = to_u64(v);
      else if (k == "seq") e.seq = to_u64(v);
      else if (k == "accepted") e.accepted = v == "1";
      else if (k == "attempt") e.attempt = to_u64(v);
      else if (k == "wait_ms") e.wait_ms = to_i64(v);
      else if (k == "outcome") e.outcome = v;
      else throw std::invalid_argument("unknown key '" + std::string(k) + "'");
    }
  } catch (const std::logic_error& ex) {  // stoll & co. throw invalid_argument/out_of_range
    throw std::invalid_argument("history: bad line '" + std::string(line) + "': " + ex.what());
  }
  if (!has_t || !has_ev) throw std::invalid_argument("history: bad line '" + std::string(line) + "'");
  return e;
}

HistoryWriter::HistoryWriter(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("history: open " + path + ": " + std::strerror(errno));
}

HistoryWriter::~HistoryWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void HistoryWriter::append(const Event& e) noexcept {
  try {
    std::string line = to_line(e) + "\n";
    std::size_t done = 0;
    while (done < line.size()) {
      ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  } catch (...) {  // bad_alloc: the event is lost, and the checker will say what is missing
  }
}

std::vector<Event> read_histories(const std::string& dir) {
  std::vector<Event> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".history") continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      try {
        out.push_back(parse_line(line));
      } catch (const std::invalid_argument&) {
        if (in.peek() != EOF) throw;  // only a torn LAST line is expected (kill -9)
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Event& a, const Event& b) { return a.t < b.t; });
  return out;
}

// ------------------------------------------------------------------------------ the checker

namespace {

struct Hold {
  std::string id, lock, proc, owner;
  std::uint64_t token = 0;
  std::int64_t acquired = 0;
  std::int64_t tried = 0;            // begin of the attempt that acquired (= acquired if unknown)
  std::int64_t released = kForever;  // release() call
  std::int64_t lost = kForever;      // loss report
  std::string release_outcome;
  bool seen = false;  // an acquire event exists
  std::int64_t end() const { return std::min(released, lost); }
};

struct Checker {
  const CheckBounds& b;
  CheckReport r;
  std::vector<const Event*> faults;
  std::int64_t last_fault_end = std::numeric_limits<std::int64_t>::min();

  void fail(const char* rule, std::string detail) { r.violations.push_back({rule, std::move(detail)}); }

  static std::int64_t ns(std::chrono::milliseconds d) { return d.count() * 1'000'000; }

  // A documented fault that explains why `later` could acquire while `earlier` still
  // believed it held the lock; nullptr if none.
  const Event* explanation(const Hold& earlier, const Hold& later) const {
    for (const Event* f : faults) {
      if (f->outcome == fault::client_pause && f->proc == earlier.proc && f->t < earlier.end() &&
          f->end > earlier.acquired && f->t <= later.acquired) {
        return f;
      }
      // The server granted `earlier` somewhere between its attempt's begin and `acquired`
      // (the client's return): a kill in that window may have come after the grant, with the
      // reply read from the socket after the kill. A grant seen only once the new, empty
      // server was up may have come from that server, and then the restart explains nothing.
      if (f->outcome == fault::server_restart_empty && f->t >= earlier.tried && earlier.acquired <= f->end &&
          f->t <= later.acquired) {
        return f;
      }
    }
    return nullptr;
  }

  void check_holds(std::map<std::string, std::vector<Hold>>& by_lock) {
    for (auto& [lock, holds] : by_lock) {
      std::sort(holds.begin(), holds.end(),
                [](const Hold& x, const Hold& y) { return x.acquired < y.acquired; });
      for (std::size_t i = 0; i < holds.size(); ++i) {
        const Hold& a = holds[i];
        if (a.end() == kForever) {
          fail("liveness", "hold " + a.id + " of " + lock + " never ended (no release, no loss)");
        }
        for (std::size_t j = i + 1; j < holds.size() && holds[j].acquired < a.end(); ++j) {
          check_overlap(lock, a, holds[j]);
        }
      }
      // Tokens of successive holds rise: every hold that ended before c was granted has a
      // lower token than c. One sweep over the holds in order of their end.
      //
      // c was granted before its acquire event was written and before its loss: a pause of
      // its process just as acquire() returned lets the loop thread write the loss (on_lost)
      // before the worker thread writes the acquisition. Such a hold counts as granted at its
      // loss; "before" is strict, so it is not compared with itself.
      std::vector<const Hold*> by_end;
      std::vector<std::pair<std::int64_t, const Hold*>> by_grant;
      for (const Hold& x : holds) {
        by_end.push_back(&x);
        by_grant.emplace_back(std::min(x.acquired, x.end()), &x);
      }
      std::sort(by_end.begin(), by_end.end(),
                [](const Hold* x, const Hold* y) { return x->end() < y->end(); });
      std::stable_sort(by_grant.begin(), by_grant.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      std::size_t k = 0;
      const Hold* highest = nullptr;
      for (const auto& [granted, cp] : by_grant) {
        const Hold& c = *cp;
        while (k < by_end.size() && by_end[k]->end() < granted) {
          if (highest == nullptr || by_end[k]->token > highest->token) highest = by_end[k];
          ++k;
        }
        if (highest != nullptr && c.token <= highest->token) {
          fail("fencing", "hold " + c.id + " of " + lock + " got token " + std::to_string(c.token) +
                              " after hold " + highest->id + " had token " +
                              std::to_string(highest->token));
        }
      }
    }
  }

  void check_overlap(const std::string& lock, const Hold& a, const Hold& c) {
    const Event* f = explanation(a, c);
    if (f == nullptr) {
      fail("mutual_exclusion", "holds " + a.id + " (token " + std::to_string(a.token) + ") and " +
                                   c.id + " (token " + std::to_string(c.token) + ") of " + lock +
                                   " overlap for " + ms(std::min(a.end(), c.end()) - c.acquired) +
                                   " with no documented fault to explain it");
      return;
    }
    ++r.explained_overlaps;
    const std::int64_t cause = std::max(c.acquired, f->end);
    const std::int64_t limit = cause + ns(b.renew_interval) + ns(b.round_trip);
    if (a.lost == kForever && a.release_outcome == "ok") {
      fail("honesty", "hold " + a.id + " of " + lock + " was overlapped by " + c.id + " (" +
                          f->outcome + ") but its release reported success instead of lock_lost");
    } else if (a.end() > limit) {
      fail("honesty", "hold " + a.id + " of " + lock + " still believed it held the lock " +
                          ms(a.end() - cause) + " after " + c.id + " took over / the " +
                          f->outcome + " ended; the bound is " + ms(limit - cause));
    }
  }

  void check_writes(std::map<std::string, std::vector<const Event*>>& writes) {
    for (auto& [lock, ws] : writes) {
      std::sort(ws.begin(), ws.end(), [](const Event* x, const Event* y) { return x->seq < y->seq; });
      std::uint64_t highest = 0;
      for (const Event* w : ws) {
        const bool current = w->token >= highest;
        if (current && !w->accepted) {
          fail("fencing", "write #" + std::to_string(w->seq) + " to " + lock + " with token " +
                              std::to_string(w->token) + " >= highest " + std::to_string(highest) +
                              " was rejected");
        } else if (!current && w->accepted) {
          fail("fencing", "stale write #" + std::to_string(w->seq) + " to " + lock + " by " +
                              w->hold + " with token " + std::to_string(w->token) +
                              " < highest " + std::to_string(highest) + " was accepted");
        }
        if (w->accepted) {
          ++r.writes_accepted;
          highest = std::max(highest, w->token);
        } else if (!current) {
          ++r.stale_writes_rejected;
        }
      }
    }
  }

  void check_attempts(const std::vector<Event>& h) {
    std::map<std::pair<std::string, std::uint64_t>, const Event*> open;
    for (const Event& e : h) {
      if (e.kind == EventKind::attempt_begin) {
        open[{e.proc, e.attempt}] = &e;
        ++r.attempts;
      } else if (e.kind == EventKind::attempt_end) {
        auto it = open.find({e.proc, e.attempt});
        if (it == open.end()) {
          fail("liveness", "attempt " + e.proc + "#" + std::to_string(e.attempt) + " ended without beginning");
          continue;
        }
        const Event& begin = *it->second;
        open.erase(it);
        if (e.outcome == "timeout" && e.t - begin.t < begin.wait_ms * 1'000'000) {
          fail("liveness", "attempt " + begin.proc + "#" + std::to_string(begin.attempt) + " on " +
                               begin.lock + " reported a timeout after " + ms(e.t - begin.t) +
                               " of its " + std::to_string(begin.wait_ms) + " ms deadline");
        }
        if (e.outcome == "timeout" || e.outcome == "busy") ++r.timeouts;
        else if (e.outcome != "acquired") ++r.errors;
        std::int64_t allowed = begin.wait_ms * 1'000'000 + ns(b.wait_slack);
        for (const Event* f : faults) {
          if (f->outcome == fault::client_pause && f->proc == begin.proc && f->t < e.t && f->end > begin.t) {
            allowed += f->end - f->t;
          }
        }
        if (e.t - begin.t > allowed) {
          fail("liveness", "attempt " + begin.proc + "#" + std::to_string(begin.attempt) + " on " +
                               begin.lock + " with a " + std::to_string(begin.wait_ms) +
                               " ms deadline took " + ms(e.t - begin.t));
        }
        if (e.outcome != "acquired" && e.outcome != "timeout" && e.outcome != "busy" &&
            begin.t > last_fault_end + ns(b.settle)) {
          fail("liveness", "attempt " + begin.proc + "#" + std::to_string(begin.attempt) + " on " +
                               begin.lock + " failed with '" + e.outcome +
                               "' after the faults had settled");
        }
      }
    }
    for (const auto& [key, begin] : open) {
      fail("liveness", "attempt " + key.first + "#" + std::to_string(key.second) + " on " +
                           begin->lock + " never ended (hung)");
    }
  }

  void run(const std::vector<Event>& h) {
    std::map<std::string, Hold> holds;  // by hold id
    std::map<std::pair<std::string, std::uint64_t>, std::int64_t> began;  // (proc, attempt) -> t
    std::map<std::string, std::vector<const Event*>> writes;
    for (const Event& e : h) {
      switch (e.kind) {
        case EventKind::fault:
          faults.push_back(&e);
          last_fault_end = std::max(last_fault_end, e.end);
          ++r.faults;
          break;
        case EventKind::acquire: {
          Hold& x = holds[e.hold];
          if (x.seen) fail("honesty", "hold id " + e.hold + " acquired twice");
          x.seen = true;
          x.id = e.hold, x.lock = e.lock, x.proc = e.proc, x.owner = e.owner;
          x.token = e.token, x.acquired = e.t;
          auto it = began.find({e.proc, e.attempt});
          x.tried = e.attempt != 0 && it != began.end() ? it->second : e.t;
          break;
        }
        case EventKind::release: {
          Hold& x = holds[e.hold];
          x.released = std::min(x.released, e.t);
          x.release_outcome = e.outcome;
          break;
        }
        case EventKind::loss: {
          Hold& x = holds[e.hold];
          if (x.lost == kForever) ++r.losses;
          x.lost = std::min(x.lost, e.t);
          break;
        }
        case EventKind::write:
          writes[e.lock].push_back(&e);
          break;
        case EventKind::attempt_begin:
          began[{e.proc, e.attempt}] = e.t;
          break;
        case EventKind::attempt_end:
          break;
      }
    }
    std::map<std::string, std::vector<Hold>> by_lock;
    for (auto& [id, x] : holds) {
      if (!x.seen) {
        fail("honesty", "hold " + id + " released or lost but never acquired");
        continue;
      }
      by_lock[x.lock].push_back(x);
      ++r.holds;
    }
    check_holds(by_lock);
    check_writes(writes);
    check_attempts(h);
  }
};

}  // namespace

std::string CheckReport::summary() const {
  std::ostringstream o;
  o << "holds=" << holds << " losses=" << losses << " explained_overlaps=" << explained_overlaps
    << " writes_accepted=" << writes_accepted << " stale_writes_rejected=" << stale_writes_rejected
    << " attempts=" << attempts << " timeouts=" << timeouts << " errors=" << errors
    << " faults=" << faults << " violations=" << violations.size();
  for (const Violation& v : violations) o << "\n  [" << v.rule << "] " << v.detail;
  return o.str();
}

CheckReport check(const std::vector<Event>& history, const CheckBounds& bounds) {
  Checker c{bounds, {}, {}};
  c.run(history);
  return std::move(c.r);
}

}  // namespace dlock::test
