// call_idempotent(): runs one idempotent command (a release, a renewal, a downgrade) and waits
// for its reply, sending it again while its outcome is unknown.
//
// Why not a single retry: after a connection error or a timeout the connection is down for a
// moment (it reconnects after a backoff) and fails commands fast until it is back, so a retry
// sent at once failed too. A release then reported "connection error, the key expires at its
// TTL" for a lock it had in fact released, or left the lock held until its TTL after a blip of a
// few milliseconds. So tries go on until reconnect.max + connect_timeout have passed since the
// first unknown outcome: long enough for the connection's next reconnect, whatever its backoff
// stood at. The pauses between tries (5 ms doubling to 100 ms) only pass while the node is
// unreachable; every try that reaches it is answered or times out after command_timeout.
// The markers that make releases idempotent live long enough for this (release_memory.hpp).
//
// async_call_idempotent() is call_idempotent() with a callback (Lease::async_release).
// send_idempotent() is the same for a cleanup that nobody waits for: the release, by its owner
// token, of an acquisition whose outcome is unknown (it may have taken the lock) or that was
// taken but is not wanted (refused as late, cancelled); an ordered MultiLock's give-back; a
// Redlock release on each node (redlock_fanout.hpp, Resend); a ReentrantMutex's drop of an
// unknown take (guarded: reentrant_hold.cpp); a SharedMutex writer's intent withdrawal; a
// FairLock waiter's dequeue. Sent once right after the connection failed, such a cleanup failed
// fast too, and the lock, the intent or the queue place kept everyone else out until it expired.
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include "client_core.hpp"
#include "dlock/clock.hpp"
#include "util/resend_window.hpp"
#include "util/sync_wait.hpp"

namespace dlock::detail {

inline bool outcome_unknown(const Result<Reply>& r) {
  return !r.ok() && (r.code() == errc::connection || r.code() == errc::timeout);
}

// `send(handler)` sends the command once and has `handler` called with its reply (on the loop).
// Blocks the calling thread (which may run the loop meanwhile: SyncWait). `on_loop`, when given,
// sees each reply first, where it arrives (on the loop thread, or on this one for a command
// refused at once). By pointer: it is called before this call can return, and the handler keeps
// to one allocation (a wrapper around `handler` was one more per release).
template <class Send>
Result<Reply> call_idempotent(ClientCore& core, Send&& send,
                              const std::function<void(const Result<Reply>&)>* on_loop = nullptr) {
  ResendWindow window(core.options());
  for (;;) {
    auto wait = std::make_shared<SyncWait<Result<Reply>>>();
    send([wait, on_loop](Result<Reply> reply) {
      if (on_loop != nullptr && *on_loop) (*on_loop)(reply);
      wait->set(std::move(reply));
    });
    Result<Reply> r = wait->wait(core);
    if (!outcome_unknown(r) || core.is_shut_down()) return r;
    const auto pause = window.next_pause();
    if (!pause) return r;
    std::this_thread::sleep_for(*pause);
  }
}

namespace idempotent_detail {

struct Resend : std::enable_shared_from_this<Resend> {
  // `settled_only`: `reply` gets the reply that settles the call (answered, or the last try's
  // unknown outcome once the time is up) instead of the first one.
  Resend(std::shared_ptr<ClientCore> c, std::function<void(ReplyHandler)> s, ReplyHandler r, bool settled)
      : core(std::move(c)), send(std::move(s)), reply(std::move(r)), timer(core->io()), window(core->options()),
        settled_only(settled) {}

  void attempt() {
    send([self = shared_from_this()](Result<Reply> r) { self->answered(std::move(r)); });
  }

  void answered(Result<Reply> r) {
    const bool again = outcome_unknown(r) && !core->is_shut_down() && due_again();
    if (reply && !(again && settled_only)) std::exchange(reply, {})(std::move(r));
    if (!again) return;
    timer.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) return self->attempt();
      // The loop stopped before the next try: whoever waits for the outcome still gets one.
      if (self->reply) std::exchange(self->reply, {})(Error(errc::shutdown, "client is shut down"));
    });
  }

  // Arms the timer for the next try; false once the tries are over.
  bool due_again() {
    const auto pause = window.next_pause();
    if (!pause) return false;
    timer.expires_after(*pause);
    return true;
  }

  std::shared_ptr<ClientCore> core;
  std::function<void(ReplyHandler)> send;
  ReplyHandler reply;
  BootTimer timer;
  ResendWindow window;
  const bool settled_only;
};

}  // namespace idempotent_detail

// The first try is sent at once, on the calling thread (any thread when `send` may be called
// from any: ClientCore::eval; the loop for eval_now), later ones from the loop. `send(handler)`
// sends the command once; `on_first`, when given, gets the first try's reply, so whoever waits
// on the cleanup is not held up by a node that is down; later tries go on by themselves until
// one is answered or the time is up.
inline void send_idempotent(std::shared_ptr<ClientCore> core, std::function<void(ReplyHandler)> send,
                            ReplyHandler on_first = {}) {
  auto r = std::make_shared<idempotent_detail::Resend>(std::move(core), std::move(send), std::move(on_first), false);
  r->attempt();
}

// call_idempotent() without blocking: tries go on as there, and `done` gets the reply that
// settles the call (on the loop thread; on the calling thread for a first try refused at once).
inline void async_call_idempotent(std::shared_ptr<ClientCore> core, std::function<void(ReplyHandler)> send,
                                  ReplyHandler done) {
  auto r = std::make_shared<idempotent_detail::Resend>(std::move(core), std::move(send), std::move(done), true);
  r->attempt();
}

}  // namespace dlock::detail
