// Who runs a ClientCore's event loop (the threading note in client_core.hpp), and what becomes of
// work posted to it once it has ended.
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "client_core.hpp"
#include "cluster/cluster_router.hpp"
#include "cluster/node.hpp"
#include "cluster/sentinel_watcher.hpp"

namespace dlock::detail {
namespace {

// The ClientCore whose loop this thread runs now (the own thread: always; a caller: while it
// runs the loop in drive_until()).
thread_local const ClientCore* t_running_loop = nullptr;

}  // namespace

void ClientCore::start() {
  work_.emplace(io_.get_executor());
  std::promise<void> started;
  auto ready = started.get_future();
  thread_ = std::thread([this, &started] {
    t_running_loop = this;
    started.set_value();
    run_loop();
    close_loop();
    // Shut down from one of its own handlers, the Client detached this thread and may have gone
    // meanwhile: it is then destroyed here, outside its loop, when this thread lets go of it.
    std::shared_ptr<ClientCore> last;
    {
      std::lock_guard lock(shutdown_mu_);
      last = std::move(keep_alive_);
    }
    loop_exited_.set_value();
  });
  ready.wait();
  post([this] {
    if (cluster_) cluster_->start();
    else if (sentinel_) sentinel_->start();
    else primary_->start();
  });
}

bool ClientCore::on_loop_thread() const noexcept { return t_running_loop == this; }

// The own thread: runs the loop whenever no caller does. Holding it, it polls for events (busy
// polling, ClientOptions::busy_poll) and then sleeps in the kernel; it lets go when a caller asks
// and sleeps until the caller hands the loop back.
void ClientCore::run_loop() {
  std::chrono::steady_clock::time_point poll_from{};  // when the polling before sleeping started (see below)
  for (;;) {
    int owner = loop_free;
    if (!loop_owner_.compare_exchange_strong(owner, loop_own_thread, std::memory_order_acquire)) {
      // A caller runs the loop: sleep until it hands it back (a caller that only asked for it
      // and then took it goes the same way; one that gave up leaves it free).
      const unsigned seen = loop_handbacks_.load(std::memory_order_acquire);
      // Busy polling here too: a caller usually hands the loop back within a round trip, and
      // taking it back awake saves a wake-up. It also keeps this vCPU awake for the server,
      // as the own thread's polling does without callers (docs/BENCHMARKS.md: on an idle VM a
      // request to a server on a halted vCPU costs a wake-up of that vCPU).
      const auto poll_until = std::chrono::steady_clock::now() + options_.busy_poll;
      while (loop_handbacks_.load(std::memory_order_acquire) == seen &&
             loop_owner_.load(std::memory_order_acquire) == loop_caller &&
             std::chrono::steady_clock::now() < poll_until) {
        std::this_thread::yield();
      }
      if (loop_owner_.load(std::memory_order_acquire) == loop_caller) loop_handbacks_.wait(seen);
      if (io_.stopped() && loop_owner_.load() != loop_free) return;  // shutdown() gave up waiting
      // Handed back with nothing else waiting on the loop: the caller usually calls again within
      // microseconds (acquire, then release), and finding the loop free it takes it at once.
      // Taken back now, the caller's next call would wait for this thread to notice and let go:
      // measured in the 1-thread bench, 12-14 us on average per call, on every call (docs/
      // BENCHMARKS.md). So this thread leaves it free for up to busy_poll first, and counts that
      // time as polling (see poll_from below). Events that come meanwhile (a timer, a
      // cancellation) wait that long at most; a command posted by a thread that does not come
      // to run the loop (an async call; after a tenth of busy_poll) or a second blocked caller
      // (who leaves the loop to this thread) ends the wait early.
      poll_from = std::chrono::steady_clock::now();
      if (handback_quiet_.load(std::memory_order_relaxed)) leave_loop_free(poll_from + options_.busy_poll);
      continue;
    }
    const bool stopped = run_owned(poll_from);
    poll_from = {};
    loop_owner_.store(loop_free, std::memory_order_release);
    if (stopped) return;
    // A caller asked for the loop: let it take it before bidding again.
    while (loop_owner_.load(std::memory_order_acquire) == loop_free && loop_wanted_.load() > 0) {
      std::this_thread::yield();
    }
  }
}

void ClientCore::leave_loop_free(std::chrono::steady_clock::time_point until) {
  using clock = std::chrono::steady_clock;
  // How long a posted drain may wait for the thread that posted it to come for the loop: a
  // blocking call posts its command and bids for the loop within a microsecond or so, but a
  // sanitized or descheduled one takes far longer. A tenth of busy_poll (10 us at the default)
  // scales with what the user already accepts as the loop's polling budget.
  const auto unclaimed_drain = options_.busy_poll / 10;
  clock::time_point drain_seen{};
  for (;;) {
    if (loop_owner_.load(std::memory_order_acquire) != loop_free) return;
    if (blocked_callers_.load(std::memory_order_relaxed) > 1) return;
    const auto now = clock::now();
    if (now >= until) return;
    if (drain_posted_.load(std::memory_order_relaxed) && loop_wanted_.load(std::memory_order_relaxed) == 0) {
      if (drain_seen == clock::time_point{}) drain_seen = now;
      else if (now - drain_seen >= unclaimed_drain) return;
    } else {
      drain_seen = {};
    }
    std::this_thread::yield();
  }
}

bool ClientCore::run_owned(std::chrono::steady_clock::time_point poll_from) {
  using clock = std::chrono::steady_clock;
  const auto budget = options_.busy_poll;
  // Polling counts from poll_from when given: time spent leaving the loop free is polling too,
  // so a Client that goes idle spins busy_poll in all, not twice that.
  auto last_event = poll_from == clock::time_point{} ? clock::now() : poll_from;
  for (;;) {
    if (loop_wanted_.load() > 0) return false;
    if (io_.poll() > 0) {
      last_event = clock::now();
      continue;
    }
    if (io_.stopped()) return true;  // poll() stops the loop when it has run out of work
    if (clock::now() - last_event < budget) {
      std::this_thread::yield();
      continue;
    }
    // Sleep in the kernel until the next event. A caller that asks meanwhile sees loop_sleeping_
    // and waits for this thread as before (seq_cst: of the two stores, each side sees the other's).
    loop_sleeping_.store(true);
    if (loop_wanted_.load() > 0) {
      loop_sleeping_.store(false);
      return false;
    }
    const std::size_t ran = io_.run_one();
    loop_sleeping_.store(false);
    if (ran == 0) return true;  // stopped
    last_event = clock::now();
  }
}

bool ClientCore::take_loop() {
  using clock = std::chrono::steady_clock;
  loop_wanted_.fetch_add(1);
  bool got = false;
  // The own thread, awake, lets go within one pass of its loop; don't wait longer than a few
  // of those (it may be running a long batch of handlers, or be preempted).
  const auto give_up = clock::now() + std::chrono::microseconds(50);
  for (;;) {
    int owner = loop_free;
    if (loop_owner_.compare_exchange_weak(owner, loop_caller, std::memory_order_acquire)) {
      got = true;
      break;
    }
    // Another caller runs the loop (it runs this caller's handlers too), or the own thread sleeps
    // in the kernel and this caller's command has just woken it: waiting for it is what the
    // caller would do anyway.
    if (owner == loop_caller || loop_sleeping_.load() || clock::now() >= give_up) break;
    std::this_thread::yield();
  }
  loop_wanted_.fetch_sub(1);
  return got;
}

// What else may need the loop soon, seen by the caller that is about to hand it back: commands
// awaiting replies, subscriptions (waiters of any kind listen on channels; a lingering one
// counts too), other blocked callers (they wait for the loop's thread to read their replies).
// Cluster: never quiet (its nodes are not looked at), so the own thread takes the loop back
// at once, as before.
bool ClientCore::loop_quiet() noexcept {
  if (cluster_ || blocked_callers_.load(std::memory_order_relaxed) > 1 || notifier_->channel_count() > 0) return false;
  for (const auto& c : primary_->conns) {
    if (c->queued() > 0) return false;
  }
  if (ack_node_) {
    for (const auto& c : ack_node_->conns) {
      if (c->queued() > 0) return false;
    }
  }
  return true;
}

void ClientCore::give_loop_back() {
  loop_owner_.store(loop_free, std::memory_order_release);
  loop_handbacks_.fetch_add(1, std::memory_order_release);
  loop_handbacks_.notify_one();
}

// A blocking caller runs the loop itself: it writes its command and waits for the reply on the
// sockets, with no hand-over to another thread and back. It polls for busy_poll after the last
// event, like the own thread, then sleeps in the kernel until the next one.
bool ClientCore::drive_until(const std::atomic<bool>& ready, std::chrono::steady_clock::time_point deadline) {
  if (!options_.callers_run_loop || ready.load(std::memory_order_acquire)) return false;
  // A thread that runs a loop already (a handler, or a caller inside another Client's handler)
  // never runs this one too: it would interleave two loops' handlers on one stack.
  if (t_running_loop != nullptr) return false;
  // With other callers waiting too, the loop's own thread serves them all (their commands share
  // writes, their replies one read): measured, callers taking turns at running the loop cost
  // each of them a hand-over to the next and were slower than that (docs/BENCHMARKS.md).
  if (blocked_callers_.load(std::memory_order_relaxed) > 1 || !take_loop()) return false;
  using clock = std::chrono::steady_clock;
  t_running_loop = this;
  // Hand the loop back however this ends (a handler that throws included), or the own thread
  // would sleep for good.
  struct HandBack {
    ClientCore* core;
    ~HandBack() {
      core->handback_quiet_.store(core->loop_quiet(), std::memory_order_relaxed);  // still holding it
      t_running_loop = nullptr;
      core->give_loop_back();
    }
  } hand_back{this};
  const auto budget = options_.busy_poll;
  auto last_event = clock::now();
  while (!ready.load(std::memory_order_acquire) && !io_.stopped()) {
    const auto now = clock::now();
    if (now >= deadline) break;
    if (io_.poll_one() > 0) {
      last_event = now;
      continue;
    }
    if (now - last_event < budget) {
      std::this_thread::yield();
      continue;
    }
    if (io_.run_one_until(deadline) > 0) last_event = clock::now();
  }
  return ready.load(std::memory_order_acquire);
}

void ClientCore::interrupt() {
  asio::post(io_, [] {});
}

// Work posted to a loop that has ended would wait in its queue for ever: a blocking caller would
// never be answered, and a handler holding its ClientCore (most do) would keep it alive for good.
// So, once the loop has ended (close_loop), a post runs its handler on the posting thread, as the
// loop would have: one handler at a time, with on_loop_thread() true meanwhile. The Client is
// shut down by then, so such a handler only fails or ends what it was given.
//
// `posting_` and `loop_ended_` make "queued before the end" and "run after it" exclusive without
// a lock on every post: a post that saw the loop running is counted until its handler is queued,
// and close_loop waits for those before it runs what is left in the queue (seq_cst: of the two
// stores, each side sees the other's).
void ClientCore::post(std::function<void()> fn) {
  posting_.fetch_add(1);
  if (!loop_ended_.load()) {
    asio::post(io_, std::move(fn));
    posting_.fetch_sub(1);
    return;
  }
  posting_.fetch_sub(1);
  {
    std::lock_guard lock(after_loop_mu_);
    after_loop_.push_back(std::move(fn));
    // Another thread runs them now (or this one, further up), or close_loop will.
    if (after_loop_running_ || !after_loop_open_) return;
    after_loop_running_ = true;
  }
  auto self = weak_from_this().lock();  // kept while its handlers run
  // Posted from another Client's handler (a Redlock answer from another node, handed to this
  // home Client): this one's handlers must not run inside it. On that stack they would pass for
  // its loop's, and a blocking call or that Client's destruction made from them would wait for
  // the very thread they hold. They get a thread of their own.
  // That Client joins the thread at its own shutdown, so its callbacks do not outlive it.
  if (t_running_loop != nullptr && t_running_loop != this && self) {
    try {
      if (const_cast<ClientCore*>(t_running_loop)->adopt_helper([self] { self->run_after_loop(); })) return;
    } catch (const std::system_error&) {  // no thread to be had: run them here after all
    }
  }
  run_after_loop();
}

// The own thread, once run_loop() returned: no thread runs the loop any more.
void ClientCore::close_loop() {
  // Keep it for good, so that no caller runs it again (a caller that still ran it when
  // shutdown() stopped it hands it back once it sees it stopped).
  for (int owner = loop_free; !loop_owner_.compare_exchange_weak(owner, loop_own_thread); owner = loop_free) {
    std::this_thread::yield();
  }
  {
    // Under the lock: shutdown() stops the loop only while it has not ended (a stop landing
    // between the restart and the poll below would leave leftovers unrun).
    std::lock_guard lock(after_loop_mu_);
    loop_ended_.store(true);
  }
  // Every handler posted before the end is in the loop's queue once these posts are done; this
  // thread runs them first, with what was posted after the end meanwhile, then lets posters run
  // theirs.
  while (posting_.load() > 0) std::this_thread::yield();
  {
    std::lock_guard lock(after_loop_mu_);
    after_loop_running_ = true;
    after_loop_open_ = true;
  }
  run_after_loop();
}

// Runs what was posted after the loop ended, and what is still in its queue (handlers posted just
// before it ended, and those that loop-thread code posts to it directly), until both are empty.
// One thread at a time (after_loop_running_).
void ClientCore::run_after_loop() {
  // Restored however this ends (a handler that throws included), so later posts still run.
  struct Scope {
    ClientCore* core;
    const ClientCore* outer = std::exchange(t_running_loop, core);
    bool finished = false;
    ~Scope() {
      t_running_loop = outer;
      if (finished) return;
      std::lock_guard lock(core->after_loop_mu_);
      core->after_loop_running_ = false;
    }
  } scope{this};
  for (;;) {
    io_.restart();
    std::size_t ran = io_.poll();  // ready handlers only: a timer still pending never fires
    std::deque<std::function<void()>> batch;
    {
      std::lock_guard lock(after_loop_mu_);
      batch.swap(after_loop_);
      if (batch.empty() && ran == 0) {
        after_loop_running_ = false;
        scope.finished = true;
        return;
      }
    }
    for (auto& fn : batch) fn();
  }
}

bool ClientCore::on_a_loop_thread() noexcept { return t_running_loop != nullptr; }

}  // namespace dlock::detail
