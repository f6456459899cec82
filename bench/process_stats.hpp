// bench/process_stats.hpp — this process's resident memory and CPU time.
#pragma once

#include <cstdint>

namespace bench {

// Resident set size in bytes, from /proc/self/statm (field 2, in pages).
std::int64_t rss_bytes();

// User + system CPU time of the whole process (all threads) in seconds, from getrusage().
double cpu_seconds();

}  // namespace bench
