// ClientCore: what a dlock::Client is made of. Owns the event loop and its thread, the node's
// command connections, the Notifier, the RenewalScheduler and the per-lock wait queues.
//
// Threading: members marked "any thread" may be called from anywhere; the rest only on a thread
// that runs the loop ("the loop thread"). Commands from other threads are collected in one queue
// and handed to the loop with a single post per batch, so concurrent callers share writes
// (pipelining across callers).
//
// Who runs the loop: the Client's own thread, except while a blocking caller runs it
// (ClientOptions::callers_run_loop, LoopDriver): one thread at a time holds the loop
// (loop_owner_), and only the holder runs handlers, so handlers never run concurrently and
// "loop thread only" state needs no locks. The own thread hands the loop to a caller that asks
// while it is awake, and sleeps until the caller hands it back; a caller never waits for the
// own thread to wake up (when it sleeps in the kernel, the caller waits for it as before).
#pragma once

#include <asio.hpp>
#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dlock/deployment.hpp"
#include "dlock/options.hpp"
#include "dlock/url.hpp"
#include "io/connection.hpp"
#include "notify/notifier.hpp"
#include "renewal/renewal_scheduler.hpp"
#include "scripts/script.hpp"
#include "util/countdown.hpp"
#include "util/sync_wait.hpp"

namespace dlock::detail {

class WaitQueue;
struct AcquireRequest;
struct Node;
struct ScriptVariant;
class ClusterRouter;
class SentinelWatcher;

class ClientCore : public std::enable_shared_from_this<ClientCore>, public Connection::Observer, public LoopDriver {
 public:
  ClientCore(Deployment deployment, ClientOptions options);
  ~ClientCore() override;

  void start();     // starts the loop thread and connects
  void shutdown();  // releases leases (bounded), fails pending work, joins the thread

  // --- any thread ---
  // Sends an encoded command; `done` runs on the loop thread. `script`: the payload is an
  // EVALSHA of it (Command::script).
  void send(std::string payload, ReplyHandler done, const Script* script = nullptr);
  // Runs a script with EVALSHA, retrying once with EVAL after NOSCRIPT (its first use on a
  // connection is an EVAL: Command::script).
  void eval(const Script& s, const std::vector<std::string>& keys, const std::vector<std::string>& args,
            ReplyHandler done);
  // The same with the EVALSHA of `s` already encoded (encode_evalsha_with).
  void eval(const Script& s, std::string evalsha_payload, ReplyHandler done);
  // How long a blocking caller polls for its reply before sleeping (ClientOptions::busy_poll).
  std::chrono::microseconds busy_poll() const noexcept override { return options_.busy_poll; }
  // LoopDriver: runs the loop on the calling thread until `ready` (see the threading note above).
  bool drive_until(const std::atomic<bool>& ready, std::chrono::steady_clock::time_point deadline) override;
  void interrupt() override;
  void count_waiter(int delta) noexcept override { blocked_callers_.fetch_add(delta, std::memory_order_relaxed); }
  // Runs `fn` on the loop thread (posted). Once the loop has ended (after shutdown), runs it on
  // the calling thread instead, as the loop would have (client_loop.cpp): it never stays queued.
  void post(std::function<void()> fn);
  // True on the thread that runs the loop now (the own thread, or a caller running it).
  bool on_loop_thread() const noexcept override;
  bool is_shut_down() const noexcept { return shut_down_.load(); }
  // After is_shut_down(): blocks until the shutdown's step 1 has released the leases still held
  // (or its time is up), so that a Lease::release() made meanwhile on another thread learns
  // whether its key went instead of leaving it to its TTL. Returns at once on any thread that
  // runs an event loop, and when the shutdown releases nothing (it ran on the loop thread).
  void await_held_release() const;
  // The shutdown's step 1 has not finished releasing the held leases (any thread).
  bool held_release_pending() const;
  // True on a thread that runs some Client's event loop (this one's or another's).
  static bool on_a_loop_thread() noexcept;
  // The database number, and Client::address(): the server (standalone), the first seed
  // (Cluster) or the first sentinel with the primary's database (Sentinel). Fixed for the
  // Client's life. Messages use where().
  const ServerAddress& address() const noexcept { return address_; }
  // Where this Client's commands go, for messages: the server, the first Cluster seed, or "the
  // primary 'NAME' of its sentinels" (not a sentinel's address: no lock lives there).
  const std::string& where() const noexcept { return address_display_; }
  // "<kind> '<name>'<qualifier> on <address>", for messages about a lock; built in one
  // allocation, since every acquisition's request carries one (AcquireRequest::what).
  std::string lock_what(std::string_view kind, std::string_view name, std::string_view qualifier = {}) const;
  const Deployment& deployment() const noexcept { return deployment_; }
  // Redis Cluster: keys of one command (script) must share a slot, so a MultiLock over several
  // slots takes them in order; pub/sub is sharded.
  bool cluster_mode() const noexcept { return cluster_mode_; }
  const ClientOptions& options() const noexcept { return options_; }
  // 32 random hex digits, fixed for this Client: the base of per-thread owner identities
  // (ReentrantMutex), unique across processes and Clients.
  const std::string& client_id() const noexcept { return client_id_; }
  // "<host>:<pid>": readable identity embedded in owner tokens.
  const std::string& identity() const noexcept { return identity_; }
  // A fresh owner token: 128 bits from the kernel's CSPRNG as 32 hex digits, then
  // "@<host>:<pid>:<unix ms>", so inspection can tell who holds a lock and since when.
  std::string new_owner_token() const;
  std::size_t active_leases() const noexcept { return active_leases_.load(); }
  // True when the server publishes keyspace events for deletions or expiries
  // (notify-keyspace-events has K and g, x or A): waiters then also listen to their key's
  // keyspace channel, so a foreign release or an expiry wakes them at once.
  bool keyspace_events() const noexcept { return keyspace_events_.load(); }
  // Key of a lock named `name`: prefix + "{" + name + "}".
  std::string lock_key(const std::string& name) const { return options_.key_prefix + "{" + name + "}"; }

  // --- loop thread ---
  asio::io_context& io() noexcept { return io_; }
  // The primaries that hold data (one unless Cluster), and a command for one of them (no
  // redirection handling): for per-node commands such as SCAN or INFO.
  std::vector<ServerAddress> primaries() const;
  // ReplicationAck: scripts whose writes must be acknowledged run on a connection of their own,
  // followed by WAIT on that same connection (WAIT blocks its connection and counts only its
  // writes). On Cluster, one such connection per node; `key` names the node the script ran on.
  void eval_acknowledged(const Script& s, std::string payload, ReplyHandler done);
  void wait_replicas(const ReplicationAck& ack, const std::string& key, std::function<void(Result<long long>)> done);
  void send_to(const ServerAddress& node, std::string payload, ReplyHandler done);
  void send_now(std::string payload, ReplyHandler done, const Script* script = nullptr);
  void eval_now(const Script& s, std::string payload, ReplyHandler done);
  Notifier& notifier() noexcept { return *notifier_; }
  // Cluster's router (nullptr unless Cluster).
  ClusterRouter* cluster_router() noexcept { return cluster_.get(); }
  RenewalScheduler& renewals() noexcept { return *renewals_; }
  // The process-local wait queue of one lock, created on first use.
  std::shared_ptr<WaitQueue> wait_queue(const std::string& key, const AcquireRequest& req);
  void forget_wait_queue(const std::string& key);
  // A wait queue whose last waiter left keeps its subscription for wait_queue_linger, so a
  // process that waits on a lock again soon (a contended lock: every time it releases it) does
  // not unsubscribe and subscribe again each time. Loop thread only.
  void linger_wait_queue(const std::string& key, std::shared_ptr<WaitQueue> queue);
  // Fairness across processes (acquire_op.cpp): this process released `key` and the release's
  // notification reached `notified` subscribers; `round_trip` is what the release took. When some
  // of them are other processes, this process's own tries on `key` hold back for about two round
  // trips, so that a waiter elsewhere can take the lock first. `others_only`: `notified` counts
  // only other Clients' waiters (a kind with a waiters' roll), not this Client's subscription.
  // Loop thread only.
  void note_release(std::string_view key, long long notified, BootClock::duration round_trip,
                    bool others_only = false);
  // Until when this process's tries on `key` hold back (nullopt: they need not). Loop thread only.
  std::optional<BootClock::time_point> courtesy_until(const std::string& key);
  // A release named this Client's waiter as the next one: no holding back for it.
  void clear_courtesy(const std::string& key);
  // Fails every waiting acquisition (shutdown): the WaitQueues' and the hooked ones'. With
  // `drained`, the connections still work: waits leave their places (a Mutex roll's, a FairLock
  // queue's) and `drained` runs once each of those cleanups was answered, so that the releases
  // of the Client's held leases that follow hand no lock to a waiter of this Client, which is
  // going away. Without it (close_all), nothing can be sent any more. Loop thread only.
  void fail_waiters(const Error& why, std::function<void()> drained = {});
  // Waits that do not use a WaitQueue (FairLock) register here so shutdown reaches them at once.
  // The hook gets the reason and, when the wait may still clean up, a callback it must run once
  // it has (empty: end the wait now, nothing can be sent).
  using ShutdownHook = std::function<void(const Error&, std::function<void()> cleaned_up)>;
  std::uint64_t add_shutdown_hook(ShutdownHook fn);
  void remove_shutdown_hook(std::uint64_t id);
  // A cleanup sent by a wait as fail_waiters(why, drained) ends it (a Mutex roll place given
  // back): the returned callback is run when the cleanup was answered, and `drained` waits for
  // it too. Empty at any other time (nothing to report to). Loop thread only.
  std::function<void()> cleanup_started();

  std::atomic<std::size_t> active_leases_{0};

 void on_connection_state(Connection& c, Connection::State s) override;
  void on_error_reply(Connection& c, const Reply& reply) override;

 private:
  void drain();
  void release_held(const std::shared_ptr<std::promise<void>>& released);
  void run_loop();  // the own thread's body: runs the loop whenever no caller does
  void close_loop();  // then: no thread runs it any more (see post)
  void run_after_loop();
  // Runs it while holding it, until a caller asks (false) or it stopped (true); polls from
  // poll_from (now when not given) for busy_poll before it sleeps in the kernel.
  bool run_owned(std::chrono::steady_clock::time_point poll_from);
  // After a quiet hand-back: leaves the loop free until `until`, a caller takes it, or someone
  // else needs it run (see run_loop).
  void leave_loop_free(std::chrono::steady_clock::time_point until);
  bool take_loop();  // a caller's bid for the loop; true when it holds it
  void give_loop_back();
  bool loop_quiet() noexcept;  // a caller holding the loop: nothing but that caller waits on it now
  void close_all();
  // Runs `done` once every command connection has answered what was sent on it so far (one PING
  // behind them, answered in order; again while replies sent more), or `deadline` passed. Loop
  // thread only.
  void settle_in_flight(std::chrono::steady_clock::time_point deadline, std::function<void()> done);
  bool commands_queued();
  // Runs `fn` on a thread of its own that this Client joins at its shutdown (post): false once
  // it did. Any thread.
  bool adopt_helper(std::function<void()> fn);
  void join_helpers();
  void on_primary(Result<ServerAddress> primary);
  // Cluster: the script with PUBLISH turned into SPUBLISH (sharded pub/sub), made once per script.
  const Script& cluster_variant(const Script& s);
  // The script this deployment runs for `s` (on Cluster, its variant, whose SHA1 the EVALSHA
  // `payload` is rewritten to).
  const Script& script_to_run(const Script& s, std::string& payload);
  Connection& ack_connection();

  Deployment deployment_;
  ServerAddress address_;
  std::string address_display_;  // address_.display(), or the Sentinel primary's name: for lock_what()
  const bool cluster_mode_;
  ClientOptions options_;
  std::string identity_;
  std::string client_id_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::promise<void> loop_exited_;
  // Who runs the loop (see the threading note): free, the own thread or a caller.
  enum LoopOwner : int { loop_free = 0, loop_own_thread = 1, loop_caller = 2 };
  std::atomic<int> loop_owner_{loop_free};
  std::atomic<int> loop_wanted_{0};          // callers asking for the loop now
  std::atomic<bool> loop_sleeping_{false};   // the own thread sleeps in the kernel, holding it
  std::atomic<unsigned> loop_handbacks_{0};  // bumped when a caller hands it back (the own thread waits on it)
  std::atomic<bool> handback_quiet_{false};  // loop_quiet() when it was last handed back
  std::atomic<bool> drain_posted_{false};    // submitted_ is not empty (a drain is posted)
  std::atomic<int> blocked_callers_{0};      // callers in a blocking wait (SyncWait) now
  std::atomic<bool> shut_down_{false};
  std::atomic<bool> keyspace_events_{false};
  // After the loop ended (post): posts in progress, the end, and what was posted after it.
  std::atomic<int> posting_{0};
  std::atomic<bool> loop_ended_{false};
  std::mutex after_loop_mu_;
  std::deque<std::function<void()>> after_loop_;
  bool after_loop_running_ = false;  // a thread runs them now
  bool after_loop_open_ = false;     // close_loop took over the queue: from now on posters run theirs
  // Set by shutdown() before shut_down_ (under shutdown_mu_): step 1's end, and its deadline.
  mutable std::mutex shutdown_mu_;
  std::shared_future<void> held_released_;
  std::chrono::steady_clock::time_point held_release_deadline_;
  std::atomic<bool> closed_{false};  // close_all() ran: step 1 is over, whatever it finished
  // Shut down from its own loop thread, which was detached: held by that thread until it ends
  // (under shutdown_mu_).
  std::shared_ptr<ClientCore> keep_alive_;
  // Threads that run an ended Client's work posted from this loop (adopt_helper).
  struct Helper {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::mutex helpers_mu_;
  std::vector<Helper> helpers_;
  bool helpers_joined_ = false;

  std::unique_ptr<Node> primary_;             // standalone and Sentinel
  std::unique_ptr<Node> ack_node_;            // ReplicationAck's own connection, made on first use
  std::unique_ptr<ClusterRouter> cluster_;    // Cluster
  std::unique_ptr<SentinelWatcher> sentinel_;  // Sentinel
  bool primary_known_ = false;                // Sentinel: a sentinel has named the primary
  bool discovery_failed_ = false;              // Sentinel: every sentinel failed to name it
  Error discovery_error_;                      // Sentinel: why no primary is known
  std::mutex variants_mu_;
  std::unordered_map<const Script*, std::unique_ptr<ScriptVariant>> variants_;
  std::unique_ptr<Notifier> notifier_;
  std::unique_ptr<RenewalScheduler> renewals_;
  std::unordered_map<std::string, std::weak_ptr<WaitQueue>> wait_queues_;
  struct Lingering {
    std::shared_ptr<WaitQueue> queue;
    BootClock::time_point until;
  };
  std::unordered_map<std::string, Lingering> lingering_;  // see linger_wait_queue()
  std::unique_ptr<BootTimer> linger_timer_;                // one for all of them, made on first use
  std::unique_ptr<BootTimer> drain_timer_;                 // shutdown: bounds the waits' cleanup
  bool linger_armed_ = false;
  void arm_linger(BootClock::time_point at);
  std::unordered_map<std::string, BootClock::time_point> courtesy_;  // see note_release()
  std::unordered_map<std::uint64_t, ShutdownHook> shutdown_hooks_;
  std::uint64_t next_hook_id_ = 1;
  // fail_waiters(why, drained): the cleanups still unanswered, while the WaitQueues' waits end.
  std::shared_ptr<Countdown> cleanups_;

  std::mutex submit_mu_;
  std::vector<Command> submitted_;
};

}  // namespace dlock::detail
