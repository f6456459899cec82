// dlock/client.hpp — the connection to Redis that every lock uses.
//
// A Client owns one event loop (with a thread of its own) and a small, fixed number of pipelined
// connections per Redis node, plus one subscriber connection per node for release notifications
// and one renewal scheduler (the watchdog) for all the leases it holds. There is no thread, timer or connection
// per lock. Create one Client per process (or per Redis deployment) and share it.
//
// Thread safety: all members may be called from any thread. Callbacks given to the async_*
// members run on the Client's event loop and must not block; a blocking member called from a
// callback fails with errc::called_from_event_loop instead of deadlocking. The loop runs on the
// Client's own thread, or on a thread blocked in one of its calls meanwhile (one thread at a
// time; ClientOptions::callers_run_loop), so a callback may run on either. Once the Client is
// destroyed its loop has ended: a call made then, or one that was still on its way to the loop
// when it ended, is answered at once (errc::shutdown, for one that needed the loop) on the calling
// thread, or on a short-lived thread of dlock's when it came from another Client's callback.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/deployment.hpp"
#include "dlock/options.hpp"
#include "dlock/reply.hpp"
#include "dlock/result.hpp"
#include "dlock/url.hpp"

namespace dlock {

namespace detail {
class ClientCore;
}

class Client {
 public:
  // Client(url, options)
  //
  // Parses the URL (see parse_url) and validates the options; throws std::system_error with
  // errc::invalid_argument when either is bad. Does not block and does not fail when the
  // server is down: connections are opened in the background and re-opened with jittered,
  // capped backoff. Commands sent while a node is unreachable fail fast with errc::connection.
  explicit Client(std::string_view url, ClientOptions options = {});

  // ~Client()
  //
  // Fails pending waits with errc::shutdown, each leaving its place in Redis (a FairLock queue
  // entry, a Mutex waiters' roll entry) so that no release hands a lock to it; then releases
  // the leases this Client still holds; then lets commands already sent (a release made just
  // before, without waiting for it) be answered (an acquisition among them that took a lock
  // gives it back and fails with errc::shutdown); all best effort, together bounded by
  // ClientOptions::shutdown_timeout. A lease whose release finds the key no longer ours is
  // lost: its LeaseEvents::on_lost runs (LossReason::taken), on the event-loop thread, while
  // this destructor waits. Then fails whatever is still pending with errc::shutdown and joins
  // the event-loop thread. Lock objects that outlive the Client fail with errc::shutdown.
  ~Client();

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // command()
  //
  // Sends one command and blocks for its reply. An error reply becomes an Error: WRONGTYPE is
  // errc::wrong_type, NOAUTH/NOPERM/WRONGPASS are errc::auth, others errc::server; transport
  // failures are errc::connection or errc::timeout. Cancellable through `stop`.
  Result<Reply> command(std::vector<std::string> args, std::stop_token stop = {});

  // async_command(): the same without blocking; `done` runs on the event loop (see Client).
  void async_command(std::vector<std::string> args, std::function<void(Result<Reply>)> done);

  // primaries()
  //
  // The nodes that hold the data: the server (standalone), the primary a sentinel named
  // (Sentinel), or every Cluster primary as last discovered (the seeds while the slot map is not
  // known yet). Blocks for one hop to the event loop, never for the network. Not guaranteed
  // current: a failover or a resharding may change it a moment later.
  std::vector<ServerAddress> primaries() const;

  // command_on(): like command(), on one given node (from primaries()) and without Cluster
  // redirection: for per-node commands such as SCAN, INFO, DBSIZE or PUBSUB.
  Result<Reply> command_on(const ServerAddress& node, std::vector<std::string> args, std::stop_token stop = {});

  // Standalone, Cluster or Sentinel, and the URL's nodes (no passwords in display()).
  const Deployment& deployment() const noexcept;

  // ping(): PING, retried until the server answers or `timeout` passes. For start-up checks.
  Result<void> ping(milliseconds timeout = milliseconds{3000});

  // Number of leases this Client currently keeps alive (held and not lost).
  std::size_t active_leases() const;

  const ServerAddress& address() const noexcept;
  const ClientOptions& options() const noexcept;
  // "host:pid" of the process that made this Client (gethostname, "unknown-host" if that
  // fails): every owner token it makes ends in "@" + this (a ReentrantMutex holder's token too),
  // which is how operators, and `dlock run`, tell this process's holds from others'. Not unique
  // across machines that share a host name (containers): never used for ownership itself.
  const std::string& owner_identity() const noexcept;
  // True when called on a thread that runs this Client's event loop now: in its callbacks (the
  // Client's own thread, or a thread blocked in a call of this Client that runs the loop
  // meanwhile; see ClientOptions::callers_run_loop).
  bool on_event_loop_thread() const noexcept;

  // For lock implementations; not part of the stable API.
  const std::shared_ptr<detail::ClientCore>& core() const noexcept { return core_; }

 private:
  std::shared_ptr<detail::ClientCore> core_;
};

}  // namespace dlock
