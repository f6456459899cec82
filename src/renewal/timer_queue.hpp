// TimerQueue: due times for many items, driven by one timer. Pure logic, no clock of its own,
// so the renewal scheduler's ordering is unit-tested with an injected time.
//
// A binary heap in one vector, intrusive: each item keeps its own position in the heap (a
// 32-bit slot reached through SlotOf), which is what remove() and rescheduling need. The
// watchdog keeps one entry per held lease, thousands at once: a std::multimap spent a 64-byte
// tree node per entry and an iterator in the item; an entry here is the item, its due time and
// a sequence number (32 bytes for a shared_ptr) in a vector whose unwritten capacity costs no
// memory (docs/BENCHMARKS.md, the watchdog memory row).
//
// SlotOf: a callable `std::uint32_t& (const T&)` giving the slot kept by the item T refers to
// (T is a pointer-like handle). The queue sets it while the item is queued and resets it to
// npos when the item leaves (pop_due, remove). Items due at the same time leave in the order
// they were added.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace dlock::detail {

template <class TimePoint, class T, class SlotOf>
class TimerQueue {
 public:
  static constexpr std::uint32_t npos = std::numeric_limits<std::uint32_t>::max();

  // Queues `item` (which must not be queued already) to fall due at `due`.
  void add(TimePoint due, T item) {
    heap_.push_back(Entry{due, seq_++, std::move(item)});
    sift_up(heap_.size() - 1);
  }
  // True while `item` is queued.
  static bool queued(const T& item) { return SlotOf{}(item) != npos; }
  // When `item` falls due; nullopt when it is not queued.
  std::optional<TimePoint> due_of(const T& item) const {
    const std::uint32_t i = SlotOf{}(item);
    if (i == npos) return std::nullopt;
    return heap_[i].due;
  }
  // Takes `item` out of the queue; nothing when it is not queued.
  void remove(const T& item) {
    const std::uint32_t i = SlotOf{}(item);
    if (i == npos) return;
    take(i);
  }
  bool empty() const noexcept { return heap_.empty(); }
  std::size_t size() const noexcept { return heap_.size(); }

  // The earliest due time, if any.
  std::optional<TimePoint> next() const {
    if (heap_.empty()) return std::nullopt;
    return heap_.front().due;
  }

  // Removes and returns every item due at or before `now`, earliest first.
  std::vector<T> pop_due(TimePoint now) {
    std::vector<T> due;
    while (!heap_.empty() && heap_.front().due <= now) due.push_back(take(0));
    return due;
  }

 private:
  struct Entry {
    TimePoint due;
    std::uint64_t seq;  // ties leave in the order they came
    T item;
  };

  static bool before(const Entry& a, const Entry& b) noexcept {
    return a.due < b.due || (a.due == b.due && a.seq < b.seq);
  }
  void place(std::size_t i, Entry&& e) {
    SlotOf{}(e.item) = static_cast<std::uint32_t>(i);
    heap_[i] = std::move(e);
  }
  void sift_up(std::size_t i) {
    Entry e = std::move(heap_[i]);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!before(e, heap_[parent])) break;
      place(i, std::move(heap_[parent]));
      i = parent;
    }
    place(i, std::move(e));
  }
  void sift_down(std::size_t i) {
    Entry e = std::move(heap_[i]);
    const std::size_t n = heap_.size();
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], e)) break;
      place(i, std::move(heap_[child]));
      i = child;
    }
    place(i, std::move(e));
  }
  // Removes the entry at position i and returns its item.
  T take(std::size_t i) {
    T item = std::move(heap_[i].item);
    SlotOf{}(item) = npos;
    const std::size_t last = heap_.size() - 1;
    if (i != last) {
      heap_[i] = std::move(heap_[last]);
      heap_.pop_back();
      // The moved entry may belong above or below its new place.
      if (i > 0 && before(heap_[i], heap_[(i - 1) / 2])) {
        sift_up(i);
      } else {
        sift_down(i);
      }
    } else {
      heap_.pop_back();
    }
    if (heap_.empty()) heap_.shrink_to_fit();  // an idle client gives the memory back
    return item;
  }

  std::vector<Entry> heap_;
  std::uint64_t seq_ = 0;
};

}  // namespace dlock::detail
