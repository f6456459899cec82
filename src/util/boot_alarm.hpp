// BootAlarm: a one-shot timer on CLOCK_BOOTTIME, for the event loop (Asio).
//
// Why not asio::basic_waitable_timer<BootClock>: Asio reads the clock only to compute how long
// to sleep, and sleeps on CLOCK_MONOTONIC (epoll's timeout, its own timerfd), which stops while
// the machine is suspended. A deadline that passed during a suspend was then reached only when
// the monotonic sleep ran out after the resume: the watchdog's "lost" or "at risk" came up to a
// renew interval (10 s by default) late, while the holder, resumed too, went on working on a
// lease whose validity had ended. A timerfd on CLOCK_BOOTTIME with an absolute expiry fires at
// the resume when its time passed during the suspend.
//
// The interface is the part of basic_waitable_timer that RenewalScheduler uses, with the same
// semantics: expires_at() and cancel() end a pending wait with asio::error::operation_aborted; a
// handler already queued when they are called still runs with success (its caller re-checks
// the time). Loop thread only.
#pragma once

#include <asio.hpp>
#include <system_error>
#include <utility>

#include "dlock/clock.hpp"

namespace dlock::detail {

class BootAlarm {
 public:
  // Throws std::system_error if the kernel gives no timerfd (out of file descriptors).
  explicit BootAlarm(asio::io_context& io);

  BootAlarm(const BootAlarm&) = delete;
  BootAlarm& operator=(const BootAlarm&) = delete;

  // Ends a pending wait (operation_aborted) and sets the expiry. A time already past fires at
  // once.
  void expires_at(BootClock::time_point t);
  // Ends a pending wait (operation_aborted); the expiry stays set.
  void cancel();

  // `h(std::error_code)` runs on the loop once the expiry is reached, or with
  // operation_aborted when the wait is ended first (also when the alarm is destroyed).
  template <class Handler>
  void async_wait(Handler&& h) {
    fd_.async_wait(asio::posix::stream_descriptor::wait_read,
                   [fd = fd_.native_handle(), h = std::forward<Handler>(h)](std::error_code ec) mutable {
                     if (!ec) drain(fd);
                     h(ec);
                   });
  }

 private:
  // Reads the expiry count, so the descriptor is not readable again until the next expiry.
  static void drain(int fd) noexcept;

  asio::posix::stream_descriptor fd_;
};

}  // namespace dlock::detail
