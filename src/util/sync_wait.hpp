// SyncWait<T>: how a blocking call waits for its asynchronous form. Set once (later sets are
// ignored), so a cancellation and a late completion can race safely.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>

namespace dlock::detail {

template <class T>
class SyncWait {
 public:
  // Returns false when a value was already set.
  bool set(T value) {
    {
      std::lock_guard lock(mu_);
      if (value_) return false;
      value_.emplace(std::move(value));
    }
    cv_.notify_all();
    return true;
  }
  T wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return value_.has_value(); });
    return std::move(*value_);
  }
  // The value, or nullopt when `timeout` passed first.
  template <class Rep, class Period>
  std::optional<T> wait_for(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return value_.has_value(); })) return std::nullopt;
    return std::move(*value_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> value_;
};

}  // namespace dlock::detail
