// How long a lock kind that remembers every release (ReentrantMutex's per-take latches,
// SharedMutex's and Semaphore's P{N}:released sets) keeps each one, and how many one set keeps.
//
// Why remember releases at all: Lease::release() sends a release again after a connection error
// or a timeout (idempotent_call.hpp), and a release whose first reply was lost must then report
// "released", not "not held" (a lost lock is reported, never invented; a reentrant take must not
// be decremented twice). Why not for long: each remembered release costs Redis memory until it
// expires (about 170 bytes per set member, measured), one per release: a Semaphore released
// 3,000 times a second kept 90,000 members (15 MB) with the former fixed 30 s, and Redis frees
// a set that expires in one go (4.9 ms for 100,000 members, measured with DEL), stalling every
// client meanwhile. A release only has to be remembered until its retry can have run: the first
// attempt waits up to command_timeout, the retry waits for the reconnect (backoff up to
// reconnect.max, then up to connect_timeout to connect) and then up to its own command_timeout.
// One second more for a server that stalls; at least 2 s. Defaults: 12 s.
//
// A P{N}:released set also keeps only the newest 10,000 releases (rw_release.lua,
// sem_release.lua): that bounds its memory (about 1.7 MB) and the time Redis takes to free it
// when it expires (0.5 ms measured), whatever the release rate.
//
// Mutex, FairLock, MultiLock and Redlock keep one marker per lock (P{N}:rel, the last releaser),
// whatever the release rate, and keep it 30 s.
//
// A retry that finds neither the hold nor its own marker (another owner's release overwrote it,
// or pushed it out of the newest 10,000) reports lock_lost: a false alarm, never a missed loss
// (a key lost in a restart or a failover looks the same from Redis).
#pragma once

#include <algorithm>
#include <chrono>

#include "dlock/options.hpp"

namespace dlock::detail {

inline milliseconds release_memory(const ClientOptions& o) {
  using namespace std::chrono_literals;
  // Each option is at most dlock::max_duration (100 years, validated), so the sum cannot overflow.
  const milliseconds window = 2 * o.command_timeout + o.connect_timeout + o.reconnect.max + 1s;
  return std::clamp<milliseconds>(window, 2s, 24h);
}

}  // namespace dlock::detail
