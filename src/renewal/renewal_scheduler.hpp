// RenewalScheduler: the watchdog. One per Client, on the event loop, one timer for all leases.
//
// Renewals that fall due together are sent in the same loop iteration, so they leave in one
// pipelined write per node: one round trip for any number of leases. A renewal only ever extends
// a key that still holds this owner's token (so it cannot outlive unlock() or resurrect a lock).
// Failed renewals are retried until the lease's validity has truly run out; then, or when the
// key is found gone, the lease is marked lost and its on_lost runs exactly once.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "io/connection.hpp"
#include "renewal/lease_record.hpp"
#include "renewal/timer_queue.hpp"
#include "util/boot_alarm.hpp"

namespace dlock::detail {

class ClientCore;

class RenewalScheduler {
 public:
  using time_point = BootClock::time_point;

  RenewalScheduler(ClientCore& core, asio::io_context& io);

  // Loop thread only.
  void add(const std::shared_ptr<LeaseRecord>& rec);
  void remove(LeaseRecord& rec);
  // The record's TTL changed (Lease::extend): the next renewals carry it. `confirmed`: the
  // server runs the key on it from `sent_at` on, so validity follows it; false when a renewal
  // with the old TTL crossed the extension and may have cut the key back: validity then stays
  // as it was until a renewal confirms the new TTL.
  void extended(const std::shared_ptr<LeaseRecord>& rec, milliseconds ttl, time_point sent_at, bool confirmed);
  // An extension ends the lease (if it runs) at `until`: validity is lowered to it when that is
  // earlier, and checked then, and the renewal in flight (sent before it: the server ran it
  // first) raises nothing. Until the server confirms, the lease may end either way, so the
  // earlier end is the one to believe: a shorter extension whose outcome stays unknown ends the
  // lease there (on_lost), though the key may live on; one refused before it ran does not
  // (untighten).
  void tighten(const std::shared_ptr<LeaseRecord>& rec, time_point until);
  // The extension was refused before it ran (an error reply to its only try, or never sent):
  // the validity goes back to `before` (what it was before tighten), unless it changed since
  // `tightened` (what tighten left), and the lease is renewed at once.
  void untighten(const std::shared_ptr<LeaseRecord>& rec, time_point before, time_point tightened);
  // Stops the timer and hands back every record still scheduled.
  std::vector<std::shared_ptr<LeaseRecord>> take_all();
  std::size_t size() const noexcept { return queue_.size(); }

  // Reports the loss (exactly once) and stops scheduling the record. A watchdog lease lost
  // because its validity ran out is also released by its owner token (free_key).
  void lose(const std::shared_ptr<LeaseRecord>& rec, LossReason why);
  // A revocation of a listening record was announced (or may have been missed): check the key.
  void revoked(const std::shared_ptr<LeaseRecord>& rec);

 private:
  void schedule(const std::shared_ptr<LeaseRecord>& rec, time_point due);
  void arm();
  void on_timer();
  void renew(const std::shared_ptr<LeaseRecord>& rec, time_point sent);
  void check(const std::shared_ptr<LeaseRecord>& rec);
  void stop_listening(LeaseRecord& rec);
  void apply(const std::shared_ptr<LeaseRecord>& rec, const RenewalStep& step, time_point now);
  void free_key(const std::shared_ptr<LeaseRecord>& rec);

  // Where a record keeps its place in queue_.
  struct SlotOf {
    std::uint32_t& operator()(const std::shared_ptr<LeaseRecord>& r) const noexcept { return r->slot; }
  };
  using Queue = TimerQueue<time_point, std::shared_ptr<LeaseRecord>, SlotOf>;

  ClientCore& core_;
  // On CLOCK_BOOTTIME: a loss or an at-risk time that passed during a suspend is reported at
  // the resume, not a monotonic sleep later (boot_alarm.hpp).
  BootAlarm timer_;
  // When timer_ fires (a wait is pending); at or before the queue's first time, which it may
  // no longer have (arm()). Unset: no wait that arm() counts on (a stale handler that ran
  // after the alarm was moved may have unset it while the new wait is pending; the next
  // expires_at() cancels that one).
  std::optional<time_point> armed_for_;
  bool closing_ = false;  // take_all() ran: the Client shuts down (arm())
  Queue queue_;
};

}  // namespace dlock::detail
