// LoopbackListener: a TCP socket listening on a free loopback port, for tests that play a
// server (or a broken one) by hand. Closed by the destructor.
#pragma once

namespace dlock::test {

class LoopbackListener {
 public:
  // Throws std::runtime_error if it cannot listen.
  explicit LoopbackListener(int backlog = 64);
  ~LoopbackListener();
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  int port() const { return port_; }
  int fd() const { return fd_; }
  // Blocks until a connection arrives; its descriptor, or -1.
  int accept();

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace dlock::test
