#include "support/fault_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace dlock::test {

namespace {

using Clock = std::chrono::steady_clock;

struct Chunk {
  Clock::time_point due;  // when it may be forwarded
  std::string bytes;
  std::size_t sent = 0;  // prefix already written
};

// One direction of a proxied connection: bytes read from `from`, queued, written to `to`.
struct Pipe {
  std::deque<Chunk> queue;
};

struct Conn {
  int client = -1;
  int server = -1;                // -1: accepted during a black hole, never connected
  Pipe to_server, to_client;
  bool swallowed = false;         // a black hole threw bytes of it away
  bool severed = false;           // sever(): the server's side is closed, the client's ignored
  bool dead = false;
  bool held = false;              // accepted in pause_new: nothing flows until the mode changes
};

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int connect_upstream(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Reads what is available from fd. false on EOF or a hard error.
bool read_some(int fd, std::string& out) {
  char buf[16384];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
      if (static_cast<std::size_t>(n) < sizeof buf) return true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

// Writes the due chunks of `p` to fd. false on a hard error.
bool flush_due(Pipe& p, int fd, Clock::time_point now) {
  while (!p.queue.empty() && p.queue.front().due <= now) {
    Chunk& c = p.queue.front();
    ssize_t n = ::send(fd, c.bytes.data() + c.sent, c.bytes.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    c.sent += static_cast<std::size_t>(n);
    if (c.sent < c.bytes.size()) return true;  // socket full; wait for POLLOUT
    p.queue.pop_front();
  }
  return true;
}

bool has_due(const Pipe& p, Clock::time_point now) {
  return !p.queue.empty() && p.queue.front().due <= now;
}

}  // namespace

FaultProxy::FaultProxy(std::string upstream_host, int upstream_port)
    : upstream_host_(std::move(upstream_host)), upstream_port_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw std::runtime_error(std::string("proxy socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 128) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(listen_fd_);
    throw std::runtime_error(std::string("proxy listen: ") + std::strerror(err));
  }
  port_ = ntohs(addr.sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    ::close(listen_fd_);
    throw std::runtime_error(std::string("proxy eventfd: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { run(); });
}

FaultProxy::~FaultProxy() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  dropped_.notify_all();
  wake();
  if (thread_.joinable()) thread_.join();
  ::close(wake_fd_);
  ::close(listen_fd_);
}

std::string FaultProxy::url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

void FaultProxy::pass() { set_mode(Mode::pass, std::chrono::milliseconds(0)); }
void FaultProxy::delay(std::chrono::milliseconds d) {
  set_mode(d.count() > 0 ? Mode::delay : Mode::pass, d);
}
void FaultProxy::pause() { set_mode(Mode::pause, std::chrono::milliseconds(0)); }
void FaultProxy::pause_new() { set_mode(Mode::pause_new, std::chrono::milliseconds(0)); }
void FaultProxy::blackhole() { set_mode(Mode::blackhole, std::chrono::milliseconds(0)); }
void FaultProxy::hold_replies() { set_mode(Mode::hold_replies, std::chrono::milliseconds(0)); }

void FaultProxy::drop() { act(drop_requested_); }
void FaultProxy::sever() { act(sever_requested_); }

void FaultProxy::act(bool& request) {
  std::unique_lock lk(mu_);
  request = true;
  const std::uint64_t target = drops_done_ + 1;
  wake();
  // Without waiting, a mode set right after (pass()) could be seen by the proxy thread in the
  // same round, before the drop, and let bytes held for the dropped connections through.
  dropped_.wait(lk, [&] { return drops_done_ >= target || stop_; });
}

FaultProxy::Mode FaultProxy::mode() const {
  std::lock_guard lk(mu_);
  return mode_;
}

void FaultProxy::set_mode(Mode m, std::chrono::milliseconds d) {
  {
    std::lock_guard lk(mu_);
    mode_ = m;
    delay_ = d;
  }
  wake();
}

void FaultProxy::wake() noexcept {
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void FaultProxy::run() noexcept {
  std::list<Conn> conns;
  Mode last_mode = Mode::pass;
  auto close_conn = [this](Conn& c) {
    close_fd(c.client);
    close_fd(c.server);
    c.dead = true;
    open_.fetch_sub(1);
  };

  while (true) {
    Mode mode;
    std::chrono::milliseconds delay;
    bool drop_now;
    bool sever_now;
    {
      std::lock_guard lk(mu_);
      if (stop_) break;
      mode = mode_;
      delay = delay_;
      drop_now = drop_requested_;
      drop_requested_ = false;
      sever_now = sever_requested_;
      sever_requested_ = false;
    }
    if (drop_now || sever_now) {
      for (Conn& c : conns) {
        if (drop_now) {
          close_conn(c);
        } else if (!c.dead) {
          close_fd(c.server);
          c.to_server.queue.clear();
          c.to_client.queue.clear();
          c.severed = true;
        }
      }
      {
        std::lock_guard lk(mu_);
        ++drops_done_;
      }
      dropped_.notify_all();
    }
    if (last_mode == Mode::blackhole && mode != Mode::blackhole) {
      // The black hole broke these byte streams; close them as a TCP reset would.
      for (Conn& c : conns) {
        if (!c.dead && !c.severed && (c.swallowed || c.server < 0)) close_conn(c);
      }
    }
    if (mode != Mode::pause_new) {
      for (Conn& c : conns) c.held = false;
    }
    last_mode = mode;
    conns.remove_if([](const Conn& c) { return c.dead; });

    const auto now = Clock::now();
    const bool passing = mode == Mode::pass || mode == Mode::delay;

    // Build the poll set: the wake fd, the listener, then two entries per connection.
    std::vector<pollfd> fds;
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    auto timeout = std::chrono::milliseconds(-1);
    for (Conn& c : conns) {
      // pause_new: the connections accepted before it pass.
      const bool forwarding = passing || (mode == Mode::pause_new && !c.held);
      // hold_replies: only the server's side waits.
      const bool to_server_flows = forwarding || mode == Mode::hold_replies;
      short cev = POLLIN;
      short sev = POLLIN;
      if (to_server_flows) {
        if (forwarding && has_due(c.to_client, now)) cev |= POLLOUT;
        if (has_due(c.to_server, now)) sev |= POLLOUT;
        for (const Pipe* p : {&c.to_client, &c.to_server}) {
          if (!forwarding && p == &c.to_client) continue;
          if (!p->queue.empty() && p->queue.front().due > now) {
            auto wait = std::chrono::ceil<std::chrono::milliseconds>(p->queue.front().due - now);
            if (timeout.count() < 0 || wait < timeout) timeout = wait;
          }
        }
      }
      fds.push_back({c.client, cev, 0});
      fds.push_back({c.server, sev, 0});  // a negative fd is ignored by poll()
    }
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    if (rc < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      std::uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &v, sizeof v);
    }
    // The mode again: a test that changed it and then sent bytes must see those bytes
    // handled under the new mode, even when both woke this one poll().
    {
      std::lock_guard lk(mu_);
      mode = mode_;
      delay = delay_;
    }
    // Accepted connections join `conns` only after this round: the poll set covers the old ones.
    std::list<Conn> fresh;
    if (fds[1].revents & POLLIN) {
      while (true) {
        int cfd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) break;
        int one = 1;
        ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        accepted_.fetch_add(1);
        Conn c;
        c.client = cfd;
        c.held = mode == Mode::pause_new;
        if (mode != Mode::blackhole) {
          c.server = connect_upstream(upstream_host_, upstream_port_);
          if (c.server < 0) {  // server down: refuse as it would
            ::close(cfd);
            continue;
          }
        }
        open_.fetch_add(1);
        fresh.push_back(std::move(c));
      }
    }

    const bool passing_now = mode == Mode::pass || mode == Mode::delay;
    const auto after = Clock::now();
    std::size_t i = 2;
    for (Conn& c : conns) {
      const pollfd& cp = fds[i++];
      const pollfd& sp = fds[i++];
      if (c.dead) continue;
      const bool forward_now = passing_now || (mode == Mode::pause_new && !c.held);
      const bool forward_to_server = forward_now || mode == Mode::hold_replies;
      bool ok = true;
      // Read from both sides; queue (or throw away, in a black hole).
      for (auto [fd, revents, pipe] : {std::tuple{c.client, cp.revents, &c.to_server},
                                       std::tuple{c.server, sp.revents, &c.to_client}}) {
        if (!ok || fd < 0 || !(revents & (POLLIN | POLLHUP | POLLERR))) continue;
        std::string got;
        ok = read_some(fd, got);
        if (got.empty()) continue;
        if (c.severed) continue;
        if (mode == Mode::blackhole) {
          c.swallowed = true;
          continue;
        }
        pipe->queue.push_back(Chunk{after + (mode == Mode::delay ? delay : std::chrono::milliseconds(0)),
                                    std::move(got), 0});
      }
      if (ok && forward_to_server && c.server >= 0) {
        ok = flush_due(c.to_server, c.server, after) && (!forward_now || flush_due(c.to_client, c.client, after));
      }
      if (!ok) close_conn(c);
    }
    conns.splice(conns.end(), fresh);
  }
  for (Conn& c : conns) {
    if (!c.dead) close_conn(c);
  }
}

}  // namespace dlock::test
