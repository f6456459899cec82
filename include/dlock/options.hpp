// dlock/options.hpp — typed options for the Client and for leases.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <system_error>

namespace dlock {

using std::chrono::milliseconds;

// Reconnect backoff: capped exponential with full jitter ("decorrelated" retry storms are
// what break a recovering server).
struct BackoffPolicy {
  milliseconds initial{50};
  milliseconds max{2000};
  double multiplier = 2.0;
};

// TLS to the server. A rediss:// URL turns it on and can set every field (see dlock/url.hpp);
// a field set here overrides the URL's.
//
// Verification is on by default and checks both the chain (against ca_file / ca_path, or the
// system's trust store when both are empty) and that the certificate names the server
// (server_name, else the URL's host; an IP literal is matched against the IP addresses in the
// certificate).
struct TlsOptions {
  // Use TLS even with a redis:// URL.
  bool enabled = false;
  // PEM file of the CA certificate(s) the server's certificate must chain to.
  std::string ca_file;
  // Directory of CA certificates named by subject hash (`openssl rehash DIR`).
  std::string ca_path;
  // Client certificate (PEM; may carry its chain) and its unencrypted PEM private key, for
  // servers with `tls-auth-clients yes`. Both or neither.
  std::string cert_file;
  std::string key_file;
  // The name sent as SNI and required in the server's certificate. Empty: the URL's host.
  // Set it when connecting by IP address or through a tunnel to a server whose certificate
  // names its DNS name.
  std::string server_name;
  // WARNING: INSECURE. Accepts ANY server certificate: no chain check, no name check. The
  // connection is then encrypted but not authenticated, so anyone on the network path can
  // impersonate the server, read the traffic and hand out locks. For throwaway test setups
  // only. Cannot be combined with ca_file, ca_path or server_name (that would suggest a
  // verification that does not happen).
  bool insecure_skip_verify = false;
};

// Replication acknowledgement of acquisitions (WAIT).
//
// Redis replicates asynchronously: a lock written to the primary and not yet copied to a replica
// is lost if that replica is promoted, and a second client can then take the "free" lock. With
// `replicas` > 0, every acquisition is followed by WAIT <replicas> <timeout> on a connection of
// its own (WAIT blocks its connection and counts only that connection's writes, so it never
// stalls the shared pipeline or the renewals). When fewer replicas acknowledge in time, the
// acquisition is released again and fails with errc::not_replicated (fail closed).
//
// What it guarantees: when acquire() succeeds, the lock key had reached `replicas` replicas'
// memory. What it does not: WAIT is not consensus. The acknowledged replicas may still not be the
// one Sentinel or Cluster promotes; a replica that acknowledged may restart empty; renewals are
// not acknowledged. It narrows the failover window, it does not close it. Fencing tokens are the
// real protection (fencing.hpp): a token from the lost lock is still lower than the next one.
// WAITAOF (fsync acknowledgement) needs Redis 7.2 and is not used. On Cluster, each node has
// its own acknowledgement connection and WAIT counts that shard's replicas; during a slot
// migration an acknowledged acquisition waits for it to end (within command_timeout).
//
// Blocking: an acknowledged acquisition takes its script's round trip plus up to `timeout` in
// WAIT; that is the only wait errc::not_replicated costs. ClientOptions::command_timeout does not
// cap WAIT (the server legitimately holds its reply for up to `timeout`): WAIT's reply may take
// `timeout` + command_timeout, so any `timeout`, also one longer than command_timeout, ends in
// not_replicated when too few replicas answer. Only a server that does not answer WAIT within
// that sum fails the acquisition with errc::timeout (the acknowledgement connection is then
// closed and reopened, like any connection whose command timed out). Acquisitions of one Client
// share that connection, one WAIT at a time: while replicas are missing, each waits in turn.
struct ReplicationAck {
  // Replicas that must acknowledge each acquisition. 0: off (the default).
  unsigned replicas = 0;
  // How long WAIT may block; the acquisition fails after it. Must be positive when `replicas` is
  // not 0 (Redis reads WAIT's 0 as "forever"): errc::invalid_argument otherwise, thrown by the
  // Client's constructor for ClientOptions::replication_ack, and by the lock's constructor for a
  // LeaseOptions::replication_ack override.
  milliseconds timeout{200};
};

struct ClientOptions {
  // Time to open a TCP/unix connection and finish the TLS handshake and AUTH/SELECT/SETNAME.
  milliseconds connect_timeout{3000};
  // Time a command may wait for its reply. A command that times out closes its connection,
  // because a pipelined reply stream cannot be resynchronised. ReplicationAck's WAIT gets its
  // own timeout on top (see ReplicationAck).
  milliseconds command_timeout{3000};
  // A connection with no command awaiting a reply sends its server a PING this often, timed by
  // command_timeout like any command. A peer that vanished without a reset (its host gone, a NAT
  // or firewall that dropped an idle flow) sends nothing, and an idle connection would never
  // notice: a waiter's subscription would miss every release (its wait then ends only at the
  // holder's TTL), a Sentinel watch every failover, and the next command would pay
  // command_timeout first. So such a connection is found dead within ping_interval +
  // command_timeout, closed and reconnected (subscriptions are made again and their waiters
  // re-check the lock). Also keeps idle flows alive through middleboxes that drop them. One
  // PING per idle connection per interval, none on a connection that has commands in flight.
  // 0 turns it off.
  milliseconds ping_interval{10000};
  // Command connections per node. Commands from all threads are pipelined over these; there is
  // no connection per lock or per thread. The subscriber connection comes on top. All commands
  // of one lock (its keys share the hash tag {N}) take the same connection, chosen by the
  // tag's hash slot, so the server runs them in the order they were sent; locks spread over the
  // connections by name. Only while that connection is down does another carry them. So one
  // hot lock gets one connection's pipeline (and max_queued_commands), and waits for that
  // connection while it reconnects. A try with replication_ack goes on the acknowledgement
  // connection instead (its WAIT must follow it there).
  unsigned connections_per_node = 1;
  // Sent as CLIENT SETNAME, so operators can see dlock clients in CLIENT LIST. Printable ASCII
  // ('!'..'~') only, as Redis requires; no spaces, tabs or other bytes. Empty: no SETNAME.
  std::string client_name = "dlock";
  // Prefix of every key and channel dlock writes. No braces (the lock name is the hash tag).
  std::string key_prefix = "dlock:";
  // Commands queued per connection (awaiting a reply, or waiting for the connection to come up)
  // before new ones fail with errc::overloaded.
  std::size_t max_queued_commands = 100000;
  BackoffPolicy reconnect;
  // Destroying the Client ends its waits (each leaving its queue place), releases the leases it
  // still holds and lets commands already sent be answered, waiting at most this long for all.
  milliseconds shutdown_timeout{2000};
  // Password/user override (e.g. from an environment variable) so it need not appear in a URL.
  std::optional<std::string> user;
  std::optional<std::string> password;
  // TLS settings; merged with those of a rediss:// URL (these win when set).
  TlsOptions tls;
  // For every lock of this Client, unless LeaseOptions::replication_ack says otherwise. Mutex,
  // SharedMutex, Semaphore and MultiLock acquisitions wait for the replicas; FairLock,
  // ReentrantMutex and Redlock cannot, so their constructors refuse replicas > 0
  // (errc::invalid_argument) unless the lock's own LeaseOptions::replication_ack turns it off.
  ReplicationAck replication_ack;
  // Busy polling, to save thread wake-ups: whichever thread runs the Client's event loop (see
  // callers_run_loop) keeps polling for work for this long after its last event before it
  // sleeps in the kernel, and each blocking caller that does not run the loop polls for its
  // reply this long before it sleeps. A sleeping thread costs a wake-up per hand-over (tens
  // of microseconds on a virtual machine, as much as a Redis round trip); see
  // docs/BENCHMARKS.md. The Client's own thread also polls this long for a caller that runs
  // the loop to hand it back, and, when a caller hands it back with nothing else waiting on it
  // (no reply due, no subscription, no other blocked caller; not on Cluster), leaves it free
  // for the rest of this time before taking it, so that the caller's next call (a release after
  // its acquire) takes it at once. Meanwhile timers (renewals) and cancellations wait up to
  // this long; an async command sent from a thread that does not come to run the loop waits
  // a tenth of this time more (10 us at the default), and a blocking call that cannot run it
  // (made from another Client's callback) up to this long. A blocked acquisition stops polling
  // as soon as it has to wait for a release (its try found the lock busy, or another waiter of
  // this process is ahead): that wait has no expected end, and polling through it only slowed
  // the handoff to the next holder. Cost: up to this much CPU after each burst of activity and
  // per blocking call; a Client that sees steady traffic keeps a thread busy, and its blocked
  // callers poll while they wait for replies. Pollers yield their CPU between polls, so they
  // never hold off runnable threads. 0 turns polling off (lowest CPU, highest latency). At
  // most 10 ms.
  std::chrono::microseconds busy_poll{100};
  // A blocking call runs the Client's event loop on the calling thread while it waits, when no
  // other thread is running it at that moment: it writes its own command and sleeps in the
  // kernel on the sockets until the reply, as a plain blocking Redis client does, instead of
  // handing the command to the event-loop thread and being handed the reply back (two thread
  // hand-overs per call; see docs/BENCHMARKS.md). Meanwhile it runs whatever else the loop has
  // to do (other callers' replies, renewals, callbacks), and it hands the loop back when its
  // call returns. So callbacks (on_lost, async completions) run on whichever thread runs the
  // loop — the Client's own thread or a thread blocked in one of this Client's calls — one at a
  // time, never two at once; Client::on_event_loop_thread() is true inside them, and they must
  // not block, as always. false: only the Client's own thread runs the loop.
  bool callers_run_loop = true;
};

// How a lease stays alive.
enum class LeaseMode {
  // Renewed by the Client's watchdog while held (the default): ttl 30 s, renewed every 10 s.
  watchdog,
  // Expires ttl after it was taken; never renewed. The holder is still told when it ends.
  fixed_ttl,
};

// Why a held lease ended without the holder releasing it.
enum class LossReason {
  // Renewal found the key gone or holding another owner's token (deleted, replaced, expired
  // on the server, or force-unlocked).
  taken,
  // The lease's validity ran out on the client's clock without a successful renewal
  // (server unreachable, or fixed-TTL lease reached its end).
  expired,
};

struct LeaseEvents {
  // Runs once, on the Client's event loop, when the lease is lost. Must not block.
  std::function<void(LossReason)> on_lost;
  // Runs on the event loop when renewals have failed long enough that the lease has
  // less than LeaseOptions::at_risk_margin of validity left. A holder should stop writing.
  // Runs again only after a renewal succeeded in between. Must not block.
  std::function<void(milliseconds remaining)> on_at_risk;
};

struct LeaseOptions {
  LeaseMode mode = LeaseMode::watchdog;
  // Time to live of the key in Redis, refreshed by each renewal (watchdog) or fixed. At most
  // max_duration (dlock/clock.hpp, 100 years), like every duration option: longer ones are
  // errc::invalid_argument.
  milliseconds ttl{30000};
  // Watchdog: time between renewals. Zero means ttl / 3.
  milliseconds renew_interval{0};
  // Watchdog: "at risk" when less than this validity is left without a renewal. Zero: ttl / 3.
  milliseconds at_risk_margin{0};
  // Subtracted from every validity to allow for clock-rate drift between client and server
  // and for the time the reply took. Zero means ttl / 100 + 2 ms.
  milliseconds drift_allowance{0};
  // Listen on the lock's channel while held: a forced unlock ("revoked", `dlock unlock
  // --force`) then makes the watchdog check the key at once, so on_lost runs within one round
  // trip instead of at the next renewal. The verdict still comes from the key, never from the
  // message alone. Costs one channel subscription per held lock (shared per process).
  bool listen_for_revocation = false;
  // Overrides ClientOptions::replication_ack for this lock (see ReplicationAck). Applies to
  // Mutex, SharedMutex, Semaphore and MultiLock acquisitions; FairLock, ReentrantMutex and
  // Redlock refuse replicas > 0 (errc::invalid_argument), and ReplicationAck{} here opts them out
  // of a Client-wide setting.
  std::optional<ReplicationAck> replication_ack;
  LeaseEvents events;
};

struct WaitOptions {
  // How long to wait for the lock. nullopt: forever, and so is anything beyond max_duration
  // (dlock/clock.hpp; milliseconds::max() included). Zero: one attempt, no waiting.
  std::optional<milliseconds> timeout;
  // Upper bound on one sleep between attempts when no release notification arrives, jittered
  // by +-20%. This is what lets a waiter notice a release by a client that publishes nothing.
  // Zero or negative means the default (never a polling loop).
  milliseconds recheck_interval{500};
};

}  // namespace dlock
