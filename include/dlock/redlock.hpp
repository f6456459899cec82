// dlock/redlock.hpp — dlock::Redlock, one lock over N independent Redis masters.
//
// A Redlock is held when a majority (N/2 + 1) of N independent masters (no replication between
// them; N odd, typically 3 or 5) hold its key for the same owner token. It survives the loss of
// a minority of the masters: with 5, any 2 may be down or unreachable.
//
// Redis layout, on EVERY node, for a lock named N and the prefix P of the first node's Client:
//   P{N}          string: the owner token (as Mutex: "<32 hex>@<host>:<pid>:<unix ms>"), SET NX PX
//   P{N}:fence    string: this node's fencing counter; no TTL, never deleted
//   P{N}:rel      string: the last releaser's owner token, for 30 s ("-<owner>" on a node where
//                 the release found the key already gone, unless another owner's release
//                 marker is there). Under either form, neither a renewal nor a late acquire of
//                 that owner sets the key again.
//   P{N}:ch       pub/sub channel: "released" after a release
// That is the Mutex layout, so a Mutex on one of the nodes and a Redlock exclude each other on
// that node (but a Mutex holds one node, never a majority).
//
// Acquisition: the acquire script is sent to every node AT ONCE (each node has its own Client,
// so it costs one round trip, not N). A node counts when it answered "taken" (SET NX PX); the
// try ends as soon as a majority answered "taken" or can no longer do so. A node that does not
// answer is not waited for beyond its Client's ClientOptions::command_timeout (the per-node
// timeout: keep it small next to the TTL), and not at all once the other nodes decided.
// The try succeeds when a majority took the key AND, once a majority knows the fencing token
// (below), validity is left:
//
//     validity = ttl − (now − sent) − drift          drift = LeaseOptions::drift_allowance
//                                                           (default ttl / 100 + 2 ms)
//
// where `sent` is when the acquire left (BootClock, this machine), so `now − sent` covers the
// fencing write-back's round trip too when there is one. Lease::remaining() counts that
// validity down; every successful renewal restarts it from the renewal's send time. A try
// that fails releases its owner token on every node that may hold it (not one that answered
// busy), each as soon as that node has answered the acquire (a release sent earlier could
// overtake it on another connection); a node still unanswered when a held lease is released
// is released again once it answers, unless the lease's release there is known to have come
// after its acquire (it found the key).
//
// Renewal: the Lease is renewed by the watchdog of the FIRST node's Client (one scheduler,
// no timer or thread per lock); each renewal goes to every node in parallel, in the same
// pipelined writes as that node's other renewals. On each node it extends the key where this
// owner holds it, and sets it again (NX) where the key is gone (a node restarted empty or
// reachable again) unless this owner released it there; it never overwrites another owner's
// key. The renewal succeeds when a
// majority answered; on_lost(taken) runs when so many nodes hold another owner's key that no
// majority is left; on_lost(expired) when no majority could be renewed before the validity
// ran out. extend() and release() likewise act on every node and need a majority.
//
// Waiting: the waiters of one lock in one process (Redlock objects over the same first Client
// with the same name) form a FIFO; only its head tries, the others wait for their turn. Every
// wait runs on the first node's Client's event loop (timers, no thread per waiter), for
// acquire() and async_acquire() alike; acquire() blocks its caller on the result. The
// queue subscribes to the lock's channel on every node while anyone waits. A release wakes the
// head once a majority of nodes announced it (a try before that would find the lock still held
// elsewhere); any other message ("revoked", a foreign client's) at once. Each sleep is bounded
// by the holders' remaining TTL (the smallest PTTL seen) and by WaitOptions::recheck_interval,
// never a polling loop. Not guaranteed: order across processes, which race for the lock.
//
// Fencing: each node's acquire sets its counter to max(counter, hint) + 1, where the hint is
// the highest token this Redlock object has seen; a node whose counter is missing (restarted
// empty) first seeds it from its own clock in microseconds, as a Mutex's server does. The
// client takes the MAXIMUM over the nodes that granted the lock as the token. The acquisition
// counts only once a majority of the nodes KNOW the token (their counter is at least the
// token): when a majority of the granting nodes answered that maximum, their counters hold it
// already and the acquisition counts at once (the usual case: every node raises its counter
// by one per grant, so counters stay in step), and the nodes behind it (a lower grant, busy,
// unreachable) are sent the token afterwards, not awaited; otherwise the token is first written
// back to every node (counter = max(counter, token)), one more round trip, and a majority must
// confirm.
// Guaranteed: if holder B's acquisition started after holder A's acquisition counted, then
// token(B) > token(A), provided at least one node that knew A's token and granted B kept its
// counter in between. Those two majorities always share a node, so with no node losing its
// data tokens strictly increase; with all 5 nodes knowing A's token (counters in step, or the
// write-back reaching all 5) and B's majority of 3, up to 2 nodes may restart empty between A
// and B.
// NOT guaranteed (Kleppmann, "How to do distributed locking", 2016): Redlock depends on timing
// assumptions (bounded network delay, process pauses and clock drift); a holder paused past
// its validity (GC, SIGSTOP, VM migration) still believes it holds the lock. The token is what
// lets the resource reject its late writes, and only when the resource checks it (fencing.hpp).
// The token is not a consensus-grade counter either: two holders that overlap because timing
// assumptions failed may both hold tokens, the later one higher. If a majority of the nodes
// that carried the order lost their counters (restarted empty), the clock seed keeps tokens
// rising only while those nodes' clocks do not run behind the last token's microseconds (a
// clock set back, or a token pushed past the clock by more acquisitions than microseconds
// passed). Use a consensus system (etcd, ZooKeeper) when correctness must not depend on timing.
//
// OPERATING RULE: a node that restarts empty (no persistence, or AOF with fsync every second)
// must stay out for at least the maximum lease TTL (a delayed restart), or run with
// `appendonly yes` + `appendfsync always`. Otherwise exclusion can break: A holds nodes 1–3,
// node 3 restarts empty, B takes 3–5 and both hold a majority. A's next renewal then reports
// the loss (nodes 3–5 hold B's token) or, if it reaches node 3 before B does, sets it again
// there so B fails; the window between is unprotected.
//
// Completion: acquire(), release() and extend() return as soon as a majority decided; the
// other nodes' replies land later (their commands were sent at the same moment). A failed
// acquisition has SENT its release to every node before it returns.
//
// Lifetime: the Clients must outlive the Redlock and its leases. Destroying nodes[0]'s Client
// while a lease is held stops its renewal and releases it on every node whose Client is still
// up (best effort, bounded by that Client's shutdown_timeout); on nodes whose Client is gone
// the key expires at its TTL.
//
// Standard adapters: lock()/try_lock()/try_lock_for()/try_lock_until()/unlock() as Mutex, so
// std::unique_lock and std::lock_guard work; holds taken that way belong to the thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/clock.hpp"
#include "dlock/lease.hpp"
#include "dlock/options.hpp"
#include "dlock/result.hpp"

namespace dlock {

namespace detail {
struct RedlockSpec;
class ThreadHolds;
}  // namespace detail

class Redlock {
 public:
  // Redlock(nodes, name, lease)
  //
  // `nodes`: one Client per master, all distinct, an odd number (1, 3, 5, 7...). Two Clients
  // whose addresses are spelt alike (host:port, unix path) are refused; two spellings of one
  // server (127.0.0.1 and localhost, a host name and its IP, a unix socket and the TCP port) are
  // not detected: making sure the masters are distinct servers is the caller's part. Such a
  // server still grants the key once per acquisition (its second spelling finds the key taken,
  // SET NX), so two holders still need intersecting sets of servers, but the lock survives
  // fewer failures than the node count says: with {A, A', B}, losing either server stops every
  // acquisition, while renewals, releases and fencing confirmations count A twice (a holder
  // keeps its lease on A alone). The Clients
  // must outlive this object and its leases. nodes[0]'s watchdog renews the leases, and its key
  // prefix names the keys on every node. Names as for Mutex. Throws
  // std::system_error(errc::invalid_argument) on a bad argument. Never blocks; no I/O.
  Redlock(const std::vector<Client*>& nodes, std::string name, LeaseOptions lease = {});
  ~Redlock();  // releases holds still taken through lock() (noexcept)

  Redlock(const Redlock&) = delete;
  Redlock& operator=(const Redlock&) = delete;

  // connect(urls, options)
  //
  // One Client per URL of a comma-separated list ("redis://a:6379,redis://b:6379,..."), for
  // callers (the CLI) that start from URLs. Throws std::system_error(errc::invalid_argument)
  // on a bad URL, an even or empty list, or two URLs spelt alike (see above). A comma ends a URL only
  // where a scheme follows it ("...,redis://..."), so a password may contain ','. The Clients
  // connect in the background.
  static std::vector<std::unique_ptr<Client>> connect(std::string_view urls, const ClientOptions& options = {});

  // acquire(wait, stop)
  //
  // Takes the lock on a majority as described above, waiting as WaitOptions says. Blocks the
  // calling thread. Errors: busy (timeout zero and held), timeout, cancelled, connection (no
  // majority reachable: the message names each failed node), wrong_type (a key of another
  // type on a node kept a majority out of reach), timeout also when a majority answered
  // only after the validity time was used up, auth, server, called_from_event_loop, shutdown.
  // A wait with a timeout returns at its deadline even while a try is still out on slow or
  // paused nodes (a try with timeout zero runs to its verdict: up to a command timeout), and so
  // does a wait whose `stop` is requested (errc::cancelled); should that try win a majority
  // later, the lease is released at once, as nobody holds it.
  Result<Lease> acquire(WaitOptions wait = {}, std::stop_token stop = {});

  // async_acquire(wait, done, stop)
  //
  // acquire() without blocking: the same wait, the same errors (but never
  // called_from_event_loop; it may be called from any thread, a `done` callback included).
  // `done` runs exactly once, on the event-loop thread of nodes[0]'s Client, or at once on the
  // calling thread when a Client is shut down already; it must not block (a blocking dlock
  // call there fails with called_from_event_loop). Shutting nodes[0]'s Client down ends the
  // wait with errc::shutdown. A wait whose deadline passes or whose `stop` is requested ends
  // then, even while a try is out; a try that wins after that is released at once.
  void async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop = {});

  // --- Standard Lockable / TimedLockable members (as Mutex) ----------------------------------
  void lock();
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return timed_try(detail::clamp_ms(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return timed_try(detail::clamp_until_ms(t));
  }
  void unlock() noexcept;

  // --- State of the calling thread's hold (taken through lock()/try_lock*) -------------------
  bool owns_lock() const noexcept;
  FencingToken fencing_token() const noexcept;
  bool lost() const noexcept;
  milliseconds remaining() const noexcept;
  Error last_error() const;

  const std::string& name() const noexcept { return name_; }
  const std::string& key() const noexcept { return key_; }
  std::size_t node_count() const noexcept;
  // Nodes that must grant the lock: node_count() / 2 + 1.
  std::size_t quorum() const noexcept;

 private:
  bool timed_try(milliseconds d);

  std::string name_;
  std::string key_;
  std::shared_ptr<const detail::RedlockSpec> spec_;
  std::unique_ptr<detail::ThreadHolds> holds_;
};

}  // namespace dlock
