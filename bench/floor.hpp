// bench/floor.hpp — scenario 1, the floor: what a lock/unlock pair costs with nothing but a
// blocking hiredis connection (SET k v NX PX, then EVALSHA compare-and-delete: two dependent
// round trips), on 1 connection and on N connections from N threads; and the round-trip time
// of a single command (PING). Plus, for information, the same 1-connection pair loop with a
// client that busy-polls its socket instead of blocking in read(): the floor without the cost of
// waking a sleeping thread (and a halted vCPU), which is what a busy-polling client such as dlock
// (ClientOptions::busy_poll) pays instead.
#pragma once

#include <string>

namespace bench {

struct FloorPairs {
  double pairs_per_second = 0;
  unsigned long long errors = 0;
};

// `connections` threads, each with its own blocking connection and its own key.
FloorPairs floor_pairs(const std::string& url, int connections, double warmup, double duration);

// The 1-connection pair loop on a non-blocking socket: each request is written, then the reply
// is awaited by retrying read() (yielding the CPU between empty reads) until hiredis's reader has
// a whole reply, for up to dlock's default busy-poll time (then it sleeps in poll(), as dlock
// does). Same commands, same token shape, same checks as floor_pairs().
FloorPairs spinning_floor_pairs(const std::string& url, double warmup, double duration);

struct RoundTrip {
  double p50_us = 0;   // median PING round trip
  double mean_us = 0;
  double per_second = 0;
};

RoundTrip floor_round_trip(const std::string& url, double warmup, double duration);

// No Redis: two processes (this one and a forked child) passing one byte back and forth over two
// pipes, each blocking in read() between its turns. What a blocking request and its reply cost
// in hand-overs between threads alone, on this machine, now: on a VM the round trip is much
// longer when the two sides run on different vCPUs that halt while they wait (measured here:
// 67-84 us p50 against 8 us with both pinned to one vCPU). Informational; it tells why a round's
// floor is slow.
RoundTrip handover_round_trip(double warmup, double duration);

}  // namespace bench
