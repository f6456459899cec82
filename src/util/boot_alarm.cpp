#include "util/boot_alarm.hpp"

#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace dlock::detail {

namespace {

// The descriptor belongs to the stream_descriptor only once it is assigned: when the
// assignment throws (registering with the reactor failed), it is closed here.
asio::posix::stream_descriptor make_timer_descriptor(asio::io_context& io) {
  const int fd = ::timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "timerfd_create(CLOCK_BOOTTIME)");
  try {
    return asio::posix::stream_descriptor(io, fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

}  // namespace

BootAlarm::BootAlarm(asio::io_context& io) : fd_(make_timer_descriptor(io)) {}

void BootAlarm::expires_at(BootClock::time_point t) {
  cancel();
  const auto ns = t.time_since_epoch().count();
  itimerspec spec{};
  // Zero would disarm the timer: the earliest expiry is 1 ns after boot, long past.
  spec.it_value.tv_sec = ns > 0 ? static_cast<time_t>(ns / 1'000'000'000) : 0;
  spec.it_value.tv_nsec = ns > 0 ? static_cast<long>(ns % 1'000'000'000) : 1;
  // BootClock counts CLOCK_BOOTTIME from its epoch, so its time points are the timerfd's
  // absolute times. Setting the time also clears an expiry count not read yet.
  ::timerfd_settime(fd_.native_handle(), TFD_TIMER_ABSTIME, &spec, nullptr);
}

void BootAlarm::cancel() {
  std::error_code ignored;
  fd_.cancel(ignored);
}

void BootAlarm::drain(int fd) noexcept {
  std::uint64_t expirations = 0;
  // Non-blocking: EAGAIN when the count was cleared meanwhile (the alarm was set again).
  [[maybe_unused]] const auto n = ::read(fd, &expirations, sizeof expirations);
}

}  // namespace dlock::detail
