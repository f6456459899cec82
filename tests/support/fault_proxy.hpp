#pragma once
// A TCP proxy on loopback between dlock clients and a real redis-server, driven by the test to
// inject network faults: added latency, held bytes, dropped connections and a black hole. The
// server stays a real one; only the wire between them misbehaves, the way a congested or
// partitioned network does.
//
// Modes (set at any time from any thread; they apply to every proxied connection):
//   pass       bytes flow both ways as they arrive.
//   delay(d)   every chunk read from either side is forwarded d after it arrived (order kept):
//              a slow link. delay(0) is pass.
//   pause      bytes are read and held in the proxy; nothing is forwarded. pass()/delay()
//              release the held bytes in order: a stall that heals without loss.
//   pause_new  connections open now pass; bytes of those accepted from now on are read and held
//              (in both directions) until the mode changes: a reconnect that hangs in its
//              handshake while the connections it left alone work.
//   hold_replies  bytes to the server flow as they arrive; bytes from the server (replies,
//              pub/sub messages) are read and held. pass()/delay() release them in order: the
//              commands ran, their answers come late (a paused client process, a reply stuck
//              in a congested link). Nothing is lost.
//   blackhole  new connections are accepted but never connected upstream; bytes of every
//              connection are read and thrown away: a partition. When the black hole ends,
//              every connection it swallowed bytes of is closed (its byte stream is broken;
//              on a real network TCP would have reset it).
// Action:
//   drop()     closes every proxied connection now (both sides), whatever the mode. Returns
//              once they are closed: bytes held for them are gone, and a mode set afterwards
//              applies only to connections accepted later.
//   sever()    every proxied connection open now goes silent for good, whatever the mode: the
//              server's side is closed, the client's stays open and what the client sends is
//              thrown away, with no reset and no answer (a host that vanished, a NAT or
//              firewall that dropped an idle flow). Connections accepted later follow the mode.
//              Returns once done.
//
// Runs on its own thread (poll loop); the destructor stops it and closes every socket.
// Not copyable or movable.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace dlock::test {

class FaultProxy {
 public:
  enum class Mode { pass, delay, pause, blackhole, hold_replies, pause_new };

  // Listens on 127.0.0.1:<free port>, forwarding to upstream_host:upstream_port (connected
  // anew for every accepted client, so a restarted server on the same port is picked up).
  // Throws std::runtime_error if it cannot listen.
  FaultProxy(std::string upstream_host, int upstream_port);
  ~FaultProxy();  // never throws

  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const noexcept { return port_; }
  std::string url() const;  // "redis://127.0.0.1:<port>"

  void pass();
  void delay(std::chrono::milliseconds d);
  void pause();
  void pause_new();
  void blackhole();
  void hold_replies();
  void drop();
  void sever();

  Mode mode() const;
  // Proxied connections currently open (client side accepted, not yet closed).
  std::size_t open_connections() const noexcept { return open_.load(); }
  // Client connections accepted since construction.
  std::uint64_t accepted() const noexcept { return accepted_.load(); }

 private:
  void set_mode(Mode m, std::chrono::milliseconds d);
  // drop()/sever(): sets `request` and waits until the proxy thread carried it out.
  void act(bool& request);
  void wake() noexcept;
  void run() noexcept;

  std::string upstream_host_;
  int upstream_port_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: mode changes and stop interrupt poll()
  int port_ = 0;

  mutable std::mutex mu_;
  Mode mode_ = Mode::pass;
  std::chrono::milliseconds delay_{0};
  bool drop_requested_ = false;
  bool sever_requested_ = false;
  std::uint64_t drops_done_ = 0;  // drops and severs the proxy thread carried out (under mu_)
  std::condition_variable dropped_;
  bool stop_ = false;

  std::atomic<std::size_t> open_{0};
  std::atomic<std::uint64_t> accepted_{0};
  std::thread thread_;
};

}  // namespace dlock::test
