// Countdown: runs `then` once, when the last of several answers has arrived. Loop-thread only
// (not atomic): every user counts replies that its connections hand to the event loop.
//
// It starts at the number of answers awaited. A caller that learns of more while it sends them
// starts at 1 for itself, add()s one per send and calls done() for itself when it has sent them
// all, so that an answer that comes back at once cannot end the count early.
#pragma once

#include <cassert>
#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

namespace dlock::detail {

class Countdown {
 public:
  // left >= 1: a count of 0 would never run `then`.
  Countdown(std::size_t left, std::function<void()> then) : left_(left), then_(std::move(then)) {
    assert(left_ > 0);
  }

  // Shared by the answers' handlers, each of which calls done() once.
  static std::shared_ptr<Countdown> make(std::size_t left, std::function<void()> then) {
    return std::make_shared<Countdown>(left, std::move(then));
  }

  void add() noexcept { ++left_; }

  // `then` runs on the call that brings the count to zero, and never again.
  void done() {
    if (left_ > 0 && --left_ == 0 && then_) std::exchange(then_, {})();
  }

 private:
  std::size_t left_;
  std::function<void()> then_;
};

}  // namespace dlock::detail
