// TimerQueue: due times for many items, driven by one timer. Pure logic, no clock of its own,
// so the renewal scheduler's ordering is unit-tested with an injected time.
#pragma once

#include <map>
#include <optional>
#include <vector>

namespace dlock::detail {

template <class TimePoint, class T>
class TimerQueue {
 public:
  using Handle = typename std::multimap<TimePoint, T>::iterator;

  Handle add(TimePoint due, T item) { return items_.emplace(due, std::move(item)); }
  void remove(Handle h) { items_.erase(h); }
  bool empty() const noexcept { return items_.empty(); }
  std::size_t size() const noexcept { return items_.size(); }
  Handle end() noexcept { return items_.end(); }

  // The earliest due time, if any.
  std::optional<TimePoint> next() const {
    if (items_.empty()) return std::nullopt;
    return items_.begin()->first;
  }

  // Removes and returns every item due at or before `now`, earliest first.
  std::vector<T> pop_due(TimePoint now) {
    std::vector<T> due;
    auto it = items_.begin();
    while (it != items_.end() && it->first <= now) {
      due.push_back(std::move(it->second));
      it = items_.erase(it);
    }
    return due;
  }

 private:
  std::multimap<TimePoint, T> items_;
};

}  // namespace dlock::detail
