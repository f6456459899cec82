// jitter_rng(): this thread's generator for jitter (retry delays, reconnect backoff), never for
// identifiers (random_hex.hpp).
//
// Why it is reseeded after fork(): jitter exists so that clients that failed together do not
// retry together. A generator seeded once per thread is copied by fork() with its state, so a
// pre-fork server's workers (or any process forked after the parent had drawn jitter) drew the
// same sequence as their parent and each other, and retried in lockstep. A pthread_atfork child
// handler bumps a generation; a thread's generator reseeds from the kernel when it sees a new
// one (one relaxed load per draw).
#pragma once

#include <random>

namespace dlock::detail {

std::mt19937_64& jitter_rng();

// Uniform in [lo, hi).
double jitter_between(double lo, double hi);

}  // namespace dlock::detail
