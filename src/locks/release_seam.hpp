#pragma once

#include <atomic>

namespace dlock::detail {

// Tests only. When set, Lease::release() calls it between its check for a Client's shutdown and
// its claim on the lease (LeaseRecord::begin_release), so that a test can start the shutdown in
// exactly that window: the two races Lease::release() handles there (lease.cpp) are otherwise
// a few instructions wide. Null in use; its whole cost is one relaxed load per release.
inline std::atomic<void (*)()> release_claim_seam{nullptr};

}  // namespace dlock::detail
