// dlock-flash-sale — the demo: a flash sale on Redis, without a lock, with dlock::Mutex, and
// with a holder that is paused past its lease (where only the fencing token saves the stock).
//
//   dlock-flash-sale --redis redis://127.0.0.1:6379 [--processes 4] [--threads 4] [--stock 100]
//                    [--think-ms 1] [--summary FILE]
//
// Every buyer is a thread in one of several OS processes (fork), and every process creates its
// OWN dlock::Client after the fork: a Client owns threads and sockets, which never survive a
// fork. A purchase is a deliberately non-atomic read-modify-write of the Redis value `stock`:
//
//     GET stock;  if it is > 0:  think a little,  SET stock-1,  INCR sold
//
// 1. Without a lock, buyers read the same stock and overwrite each other: items are oversold.
// 2. With a dlock::Mutex held around the purchase (std::lock_guard): exactly `stock` orders.
// 3. Process A takes the lock (watchdog lease, TTL 1 s) and reads the stock; the parent freezes
//    it with SIGSTOP (its watchdog freezes with it) until the lease has run out in Redis and
//    process B has taken the lock and written. Resumed, A writes with its old fencing token;
//    dlock::fenced_set rejects it. The same writes with a plain SET show the lost update.
//
// Exit status: 0 when scenarios 2 and 3 behave as expected (scenario 1's oversell is a race:
// expected, printed, but never a failure), 1 when they do not, 2 on bad usage or no server.
// With --summary FILE the summary rows are appended to FILE (tab-separated: scenario, expected,
// observed, ok) instead of being printed, so scripts/demo can add its own row and print one table.
#include <dlock/dlock.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string url = "redis://127.0.0.1:6379";
  int processes = 4;
  int threads = 4;
  long stock = 100;
  std::chrono::milliseconds think{1};
  std::string summary_file;
};

// Redis keys of the demo. The lock itself lives under dlock's own prefix ("dlock:{flash-sale}").
const std::string k_stock = "flash-sale:stock";          // string: items left
const std::string k_sold = "flash-sale:sold";            // string: orders taken
const std::string k_items = "flash-sale:buyers";         // hash: item number -> buyers of it
const std::string k_fenced = "flash-sale:fenced-stock";  // fenced resource (fenced_set's hash)
const std::string k_plain = "flash-sale:plain-stock";    // the same resource without fencing
const std::string lock_name = "flash-sale";

// ---- small helpers -------------------------------------------------------------------------

// One command; a transport error or an error reply becomes an exception.
dlock::Reply must(dlock::Client& c, std::vector<std::string> args) {
  const std::string cmd = args.front();
  auto r = c.command(std::move(args));
  if (!r) throw std::runtime_error(cmd + ": " + r.error().what());
  if (r->is_error()) throw std::runtime_error(cmd + ": " + r->str());
  return *r;
}

long get_long(dlock::Client& c, const std::string& key) {
  auto r = must(c, {"GET", key});
  if (r.is_nil()) return 0;
  auto v = r.as_integer();
  if (!v) throw std::runtime_error("GET " + key + ": not an integer: " + r.to_string());
  return static_cast<long>(*v);
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// Pipes between the parent and its children carry short text lines (< PIPE_BUF: atomic).
struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    r = fds[0];
    w = fds[1];
  }
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void send_line(int fd, const std::string& line) {
  std::string s = line + "\n";
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

// Reads one line; nullopt at EOF (every writer closed its end, e.g. the child died).
std::optional<std::string> read_line(int fd) {
  std::string line;
  char ch;
  for (;;) {
    ssize_t n = ::read(fd, &ch, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return line.empty() ? std::nullopt : std::optional<std::string>(line);
    if (ch == '\n') return line;
    line.push_back(ch);
  }
}

// Blocks until the other side writes a byte or closes its end.
void wait_for_signal_on(int fd) {
  char ch;
  while (::read(fd, &ch, 1) < 0 && errno == EINTR) {
  }
}

// Children of the parent, killed if the demo hangs (SIGALRM), so nothing stays behind frozen.
pid_t g_children[256];
std::atomic<int> g_nchildren{0};

// SIGALRM (the demo hangs), SIGINT, SIGTERM, SIGHUP: kill the children first (SIGKILL also ends
// a process frozen with SIGSTOP), so nothing stays behind.
extern "C" void on_fatal_signal(int sig) {
  for (int i = 0; i < g_nchildren.load(); ++i) ::kill(g_children[i], SIGKILL);
  if (sig == SIGALRM) {
    const char msg[] = "dlock-flash-sale: timed out; children killed\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(1);
  }
  // Die of the signal itself, so that a calling shell sees the interrupt and stops too.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  ::_exit(128 + sig);
}

const int g_fatal_signals[] = {SIGALRM, SIGINT, SIGTERM, SIGHUP};

// fork(); the child runs `body` and exits with its return value, never returning here.
template <class F>
pid_t spawn(F&& body) {
  std::fflush(nullptr);  // or the child would print the parent's buffered output again
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    for (int sig : g_fatal_signals) ::signal(sig, SIG_DFL);
    int rc = 1;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", static_cast<int>(::getpid()), e.what());
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  int i = g_nchildren.load();
  if (i < 256) {
    g_children[i] = pid;
    g_nchildren.store(i + 1);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

// The parent talks to Redis only through short-lived Clients, so that no Client thread is
// running when it forks.
template <class F>
auto with_client(const Config& cfg, F&& f) {
  dlock::Client c(cfg.url);
  if (auto p = c.ping(); !p) throw std::runtime_error("cannot reach Redis: " + p.error().what());
  return f(c);
}

// ---- scenarios 1 and 2: the sale ----------------------------------------------------------

// One purchase: GET, think, SET, INCR. Not atomic: that is the point. False when sold out.
bool buy_one(dlock::Client& c, std::chrono::milliseconds think) {
  const long stock = get_long(c, k_stock);
  if (stock <= 0) return false;
  std::this_thread::sleep_for(think);  // the time between read and write that races exploit
  must(c, {"SET", k_stock, std::to_string(stock - 1)});
  must(c, {"INCR", k_sold});
  must(c, {"HINCRBY", k_items, std::to_string(stock), "1"});  // item #stock got one more buyer
  return true;
}

// A buyer process: its own Client, one Mutex shared by its threads (when locking), `threads`
// buyers buying until the stock is gone. Reports "ready", then "orders N" or "error ...".
int buyer_process(const Config& cfg, bool with_lock, int report_fd, int go_fd) {
  dlock::Client client(cfg.url);  // created after the fork: this process's own connections
  if (auto p = client.ping(); !p) {
    send_line(report_fd, "error " + p.error().what());
    return 1;
  }
  std::optional<dlock::Mutex> mutex;
  if (with_lock) mutex.emplace(client, lock_name);
  send_line(report_fd, "ready");
  wait_for_signal_on(go_fd);  // all processes start buying at the same moment

  std::atomic<long> orders{0};
  std::mutex err_mu;
  std::string error;
  std::vector<std::thread> buyers;
  for (int t = 0; t < cfg.threads; ++t) {
    buyers.emplace_back([&] {
      try {
        for (;;) {
          bool bought;
          if (mutex) {
            std::lock_guard guard(*mutex);  // dlock::Mutex is a standard Lockable
            bought = buy_one(client, cfg.think);
          } else {
            bought = buy_one(client, cfg.think);
          }
          if (!bought) break;
          ++orders;
        }
      } catch (const std::exception& e) {
        std::lock_guard g(err_mu);
        if (error.empty()) error = e.what();
      }
    });
  }
  for (auto& b : buyers) b.join();
  if (!error.empty()) {
    send_line(report_fd, "error " + error);
    return 1;
  }
  send_line(report_fd, "orders " + std::to_string(orders.load()));
  return 0;
}

struct SaleResult {
  long orders = 0;       // INCR sold
  long stock_left = 0;   // GET stock at the end
  long items = 0;        // distinct items sold
  long max_buyers = 0;   // most buyers of one item
  long max_item = 0;     // ... that item
  std::vector<long> per_process;
  std::vector<std::string> errors;
  double seconds = 0;
  long oversold() const { return orders - items; }
};

SaleResult run_sale(const Config& cfg, bool with_lock) {
  with_client(cfg, [&](dlock::Client& c) {
    must(c, {"DEL", k_stock, k_sold, k_items});
    must(c, {"SET", k_stock, std::to_string(cfg.stock)});
    return 0;
  });

  SaleResult res;
  Pipe report, go;
  std::vector<pid_t> pids;
  for (int i = 0; i < cfg.processes; ++i) {
    pids.push_back(spawn([&] {
      ::close(report.r);
      ::close(go.w);  // so that the parent closing its end is seen as EOF: the start signal
      return buyer_process(cfg, with_lock, report.w, go.r);
    }));
  }
  close_fd(report.w);
  close_fd(go.r);

  int ready = 0;
  while (ready + static_cast<int>(res.errors.size()) < cfg.processes) {
    auto line = read_line(report.r);
    if (!line) break;
    if (*line == "ready") ++ready;
    else res.errors.push_back(line->substr(line->find(' ') + 1));
  }
  const auto t0 = Clock::now();
  close_fd(go.w);  // go!
  while (auto line = read_line(report.r)) {
    std::istringstream in(*line);
    std::string what;
    in >> what;
    if (what == "orders") {
      long n = 0;
      in >> n;
      res.per_process.push_back(n);
    } else {
      res.errors.push_back(line->substr(line->find(' ') + 1));
    }
  }
  close_fd(report.r);
  for (pid_t p : pids) {
    int rc = wait_exit(p);
    if (rc != 0 && res.errors.empty()) res.errors.push_back("a buyer process exited with status " + std::to_string(rc));
  }
  res.seconds = seconds_since(t0);

  with_client(cfg, [&](dlock::Client& c) {
    res.orders = get_long(c, k_sold);
    res.stock_left = get_long(c, k_stock);
    auto h = must(c, {"HGETALL", k_items});
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
      long item = std::atol(h[i].str().c_str());
      long buyers = std::atol(h[i + 1].str().c_str());
      ++res.items;
      if (buyers > res.max_buyers) {
        res.max_buyers = buyers;
        res.max_item = item;
      }
    }
    return 0;
  });
  return res;
}

void print_sale(const SaleResult& r) {
  std::string per;
  for (long n : r.per_process) per += (per.empty() ? "" : " ") + std::to_string(n);
  std::printf("   %-16s %6ld    per process: %s\n", "orders taken", r.orders, per.c_str());
  std::printf("   %-16s %6ld\n", "stock left", r.stock_left);
  if (r.oversold() > 0) {
    std::printf("   %-16s %6ld    item #%ld was sold %ld times\n", "oversold", r.oversold(),
                r.max_item, r.max_buyers);
  } else {
    std::printf("   %-16s %6ld    every item sold exactly once\n", "oversold", r.oversold());
  }
  std::printf("   %-16s %6.2f s\n", "time", r.seconds);
  for (const auto& e : r.errors) std::printf("   ERROR: %s\n", e.c_str());
}

// ---- scenario 3: a paused holder, and fencing ---------------------------------------------

struct PausedResult {
  bool ok = false;
  int stale_accepted = 0;
  std::string observed;
};

std::uint64_t to_u64(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 10); }

PausedResult run_paused_holder(const Config& cfg) {
  PausedResult res;
  const long initial = cfg.stock;
  const long a_buys = 1, b_buys = 3;
  with_client(cfg, [&](dlock::Client& c) {
    must(c, {"DEL", k_fenced, k_plain});
    must(c, {"HSET", k_fenced, "value", std::to_string(initial)});  // no 'fence' yet: any token passes
    must(c, {"SET", k_plain, std::to_string(initial)});
    return 0;
  });

  // Process A: takes the lock, reads, and (frozen in between) writes with its token.
  Pipe a_out, a_go;
  pid_t a = spawn([&] {
    ::close(a_out.r);
    ::close(a_go.w);
    dlock::Client client(cfg.url);
    dlock::LeaseOptions lease_opts;
    lease_opts.mode = dlock::LeaseMode::watchdog;  // renewed every 333 ms... while A runs
    lease_opts.ttl = 1s;
    dlock::Mutex mutex(client, lock_name, lease_opts);
    auto lease = mutex.acquire(dlock::WaitOptions{10s});
    if (!lease) return send_line(a_out.w, "error " + lease.error().what()), 1;
    auto stock = dlock::fenced_get(client, k_fenced);
    if (!stock || !*stock) return send_line(a_out.w, "error reading the stock"), 1;
    const long s = std::atol((*stock)->c_str());
    send_line(a_out.w, fmt("acquired %llu %ld", static_cast<unsigned long long>(lease->token().value), s));
    // The parent freezes this process right here, between its read and its write. (The pipe
    // only pins that moment; the freeze itself is SIGSTOP, like a GC pause or a VM migration.)
    wait_for_signal_on(a_go.r);
    const std::string mine = std::to_string(s - a_buys);
    auto w = dlock::fenced_set(client, k_fenced, mine, lease->token());
    if (!w) return send_line(a_out.w, "error " + w.error().what()), 1;
    must(client, {"SET", k_plain, mine});  // what a holder without fencing would do
    // The watchdog runs again too; give it a moment to tell what it found.
    for (int i = 0; i < 50 && !lease->lost(); ++i) std::this_thread::sleep_for(10ms);
    const char* why = !lease->lost()                                 ? "not-noticed"
                      : lease->loss_reason() == dlock::LossReason::taken ? "taken"
                                                                        : "expired";
    send_line(a_out.w, fmt("wrote %d %llu %s", w->accepted ? 1 : 0,
                           static_cast<unsigned long long>(w->highest.value), why));
    (void)lease->release();  // lock_lost: it was not ours any more
    return w->accepted ? 1 : 0;
  });
  close_fd(a_out.w);
  close_fd(a_go.r);

  std::uint64_t a_token = 0;
  long a_read = 0;
  {
    auto line = read_line(a_out.r);
    std::istringstream in(line.value_or(""));
    std::string what;
    in >> what >> a_token >> a_read;
    if (what != "acquired") {
      res.observed = "A failed: " + line.value_or("exited");
      ::kill(a, SIGKILL);
      wait_exit(a);
      return res;
    }
  }
  std::printf("   A  %-22s token %llu, reads stock %ld, will buy %ld\n", "takes the lock",
              static_cast<unsigned long long>(a_token), a_read, a_buys);

  ::kill(a, SIGSTOP);
  int st = 0;
  while (::waitpid(a, &st, WUNTRACED) < 0 && errno == EINTR) {
  }
  send_line(a_go.w, "go");  // read only once A runs again
  close_fd(a_go.w);
  const auto frozen_at = Clock::now();
  std::printf("   A  %-22s its watchdog is frozen too: no renewal, the key expires in Redis\n",
              "frozen (SIGSTOP)");
  std::fflush(stdout);

  // Process B: waits for the lock (it is free once A's lease ran out), buys, writes fenced.
  Pipe b_out, b_done;
  pid_t b = spawn([&] {
    ::close(a_out.r);
    ::close(b_out.r);
    ::close(b_done.w);
    dlock::Client client(cfg.url);
    dlock::Mutex mutex(client, lock_name);
    auto lease = mutex.acquire(dlock::WaitOptions{10s});
    if (!lease) return send_line(b_out.w, "error " + lease.error().what()), 1;
    auto stock = dlock::fenced_get(client, k_fenced);
    if (!stock || !*stock) return send_line(b_out.w, "error reading the stock"), 1;
    const long s = std::atol((*stock)->c_str());
    const std::string mine = std::to_string(s - b_buys);
    auto w = dlock::fenced_set(client, k_fenced, mine, lease->token());
    if (!w) return send_line(b_out.w, "error " + w.error().what()), 1;
    must(client, {"SET", k_plain, mine});
    send_line(b_out.w, fmt("wrote %llu %ld %d", static_cast<unsigned long long>(lease->token().value), s,
                           w->accepted ? 1 : 0));
    wait_for_signal_on(b_done.r);  // B still holds the lock while A resumes
    return lease->release() ? 0 : 1;
  });
  close_fd(b_out.w);
  close_fd(b_done.r);

  std::uint64_t b_token = 0;
  long b_read = 0;
  int b_accepted = 0;
  {
    auto line = read_line(b_out.r);
    std::istringstream in(line.value_or(""));
    std::string what;
    in >> what >> b_token >> b_read >> b_accepted;
    if (what != "wrote") {
      res.observed = "B failed: " + line.value_or("exited");
      ::kill(a, SIGKILL);
      ::kill(b, SIGKILL);
      wait_exit(a);
      wait_exit(b);
      return res;
    }
  }
  const double waited = seconds_since(frozen_at);
  std::printf("   B  %-22s token %llu, after %.2f s; reads stock %ld, buys %ld\n", "takes the lock",
              static_cast<unsigned long long>(b_token), waited, b_read, b_buys);
  std::printf("   B  %-22s %s\n", fmt("fenced_set %ld", b_read - b_buys).c_str(),
              b_accepted ? "accepted" : "REJECTED (unexpected)");

  ::kill(a, SIGCONT);
  std::printf("   A  %-22s still believes it holds the lock, writes what it computed\n", "resumed (SIGCONT)");
  std::fflush(stdout);
  int a_accepted = 1;
  std::uint64_t highest = 0;
  std::string a_loss;
  {
    auto line = read_line(a_out.r);
    std::istringstream in(line.value_or(""));
    std::string what;
    in >> what >> a_accepted >> highest >> a_loss;
    if (what != "wrote") {
      res.observed = "A failed after resume: " + line.value_or("exited");
      ::kill(a, SIGKILL);
      ::kill(b, SIGKILL);
      wait_exit(a);
      wait_exit(b);
      return res;
    }
  }
  if (a_accepted) {
    std::printf("   A  %-22s ACCEPTED (unexpected): token %llu, highest %llu\n",
                fmt("fenced_set %ld", a_read - a_buys).c_str(), static_cast<unsigned long long>(a_token),
                static_cast<unsigned long long>(highest));
  } else {
    std::printf("   A  %-22s REJECTED: its token %llu < %llu, the highest seen\n",
                fmt("fenced_set %ld", a_read - a_buys).c_str(), static_cast<unsigned long long>(a_token),
                static_cast<unsigned long long>(highest));
  }
  if (a_loss == "not-noticed") {
    std::printf("   A  %-22s still held, as far as A can tell\n", "its lease");
  } else {
    std::printf("   A  %-22s lost (%s), but only noticed after the resume\n", "its lease", a_loss.c_str());
  }
  send_line(b_done.w, "done");
  close_fd(b_done.w);
  const int a_rc = wait_exit(a);
  const int b_rc = wait_exit(b);
  close_fd(a_out.r);
  close_fd(b_out.r);

  std::string fenced_value, fence, plain_value;
  with_client(cfg, [&](dlock::Client& c) {
    fenced_value = dlock::fenced_get(c, k_fenced).value().value_or("");
    fence = must(c, {"HGET", k_fenced, "fence"}).str();
    plain_value = must(c, {"GET", k_plain}).str();
    return 0;
  });
  const long expect = initial - b_buys;
  res.stale_accepted = a_accepted ? 1 : 0;
  std::printf("   %s stock %s: B's sale stands; stale writes accepted: %d\n",
              fenced_value == std::to_string(expect) ? "=>" : "!!", fenced_value.c_str(), res.stale_accepted);
  if (plain_value == std::to_string(a_read - a_buys)) {
    std::printf("   => the same writes with a plain SET leave stock %s: A's stale write erased B's sale of %ld\n",
                plain_value.c_str(), b_buys);
  } else {
    std::printf("   => the same writes with a plain SET leave stock %s\n", plain_value.c_str());
  }

  res.ok = b_token > a_token && b_accepted && !a_accepted && highest == b_token &&
           fenced_value == std::to_string(expect) && to_u64(fence) == b_token && a_rc == 0 && b_rc == 0;
  res.observed = std::to_string(res.stale_accepted) + " stale writes accepted";
  if (!res.ok && res.stale_accepted == 0) res.observed += " (but see above)";
  return res;
}

// ---- main ---------------------------------------------------------------------------------

int usage(const char* argv0, int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: %s --redis URL [--processes N] [--threads N] [--stock N] [--think-ms N] [--summary FILE]\n",
               argv0);
  return rc;
}

using Row = std::array<std::string, 4>;

void print_table(const std::vector<Row>& rows) {
  std::array<std::size_t, 4> w{};
  for (const auto& r : rows)
    for (std::size_t i = 0; i < 4; ++i) w[i] = std::max(w[i], r[i].size());
  for (const auto& r : rows) {
    std::printf("  %-*s  %-*s  %-*s  %s\n", static_cast<int>(w[0]), r[0].c_str(), static_cast<int>(w[1]),
                r[1].c_str(), static_cast<int>(w[2]), r[2].c_str(), r[3].c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) std::exit(usage(argv[0], 2));
      return argv[++i];
    };
    if (a == "--redis") cfg.url = next();
    else if (a == "--processes") cfg.processes = std::atoi(next().c_str());
    else if (a == "--threads") cfg.threads = std::atoi(next().c_str());
    else if (a == "--stock") cfg.stock = std::atol(next().c_str());
    else if (a == "--think-ms") cfg.think = std::chrono::milliseconds(std::atoi(next().c_str()));
    else if (a == "--summary") cfg.summary_file = next();
    else if (a == "-h" || a == "--help") return usage(argv[0], 0);
    else return usage(argv[0], 2);
  }
  if (cfg.processes < 1 || cfg.processes > 64 || cfg.threads < 1 || cfg.threads > 64 || cfg.stock < 1 ||
      cfg.think.count() < 0) {
    return usage(argv[0], 2);
  }
  for (int sig : g_fatal_signals) ::signal(sig, on_fatal_signal);
  ::alarm(120);  // a hung demo must not leave frozen children behind

  try {
    // Fail early, and readably, when there is no server.
    with_client(cfg, [](dlock::Client&) { return 0; });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock-flash-sale: %s (%s)\n", e.what(), cfg.url.c_str());
    return 2;
  }

  std::vector<Row> rows;
  bool ok2 = false, ok3 = false;
  try {
    std::printf("Flash sale: %d processes x %d threads buy from a stock of %ld items.\n", cfg.processes,
                cfg.threads, cfg.stock);
    std::printf("One purchase is a read-modify-write, not atomic on purpose:\n");
    std::printf("    GET stock; if > 0: think %lld ms, SET stock-1, INCR sold\n",
                static_cast<long long>(cfg.think.count()));

    std::printf("\n1. No lock\n");
    auto r1 = run_sale(cfg, false);
    print_sale(r1);
    if (r1.errors.empty()) {
      std::printf("   => concurrent buyers read the same stock and overwrite each other's SET\n");
    }
    rows.push_back({"1 no lock", "oversold > 0 (a race: likely)",
                    r1.errors.empty() ? std::to_string(r1.orders) + " sold, " + std::to_string(r1.oversold()) + " oversold"
                                      : "error",
                    !r1.errors.empty() ? "FAIL" : r1.oversold() > 0 ? "yes" : "race not hit"});

    std::printf("\n2. dlock::Mutex around each purchase (std::lock_guard; one Client per process)\n");
    auto r2 = run_sale(cfg, true);
    print_sale(r2);
    ok2 = r2.errors.empty() && r2.orders == cfg.stock && r2.stock_left == 0 && r2.items == cfg.stock &&
          r2.max_buyers == 1;
    rows.push_back({"2 dlock::Mutex", std::to_string(cfg.stock) + " sold, 0 oversold",
                    r2.errors.empty() ? std::to_string(r2.orders) + " sold, " + std::to_string(r2.oversold()) + " oversold"
                                      : "error",
                    ok2 ? "yes" : "FAIL"});

    std::printf("\n3. A holder paused past its lease (watchdog, TTL 1 s); writes fenced with dlock::fenced_set\n");
    auto r3 = run_paused_holder(cfg);
    ok3 = r3.ok;
    rows.push_back({"3 paused holder, fenced", "0 stale writes accepted", r3.observed, ok3 ? "yes" : "FAIL"});
  } catch (const std::exception& e) {
    std::printf("   ERROR: %s\n", e.what());
    rows.push_back({"(aborted)", "", e.what(), "FAIL"});
  }

  if (!cfg.summary_file.empty()) {
    std::ofstream out(cfg.summary_file, std::ios::app);
    for (const auto& r : rows) out << r[0] << '\t' << r[1] << '\t' << r[2] << '\t' << r[3] << '\n';
  } else {
    std::printf("\nSummary\n");
    rows.insert(rows.begin(), Row{"scenario", "expected", "observed", "ok"});
    print_table(rows);
  }
  std::fflush(stdout);
  return ok2 && ok3 ? 0 : 1;
}
