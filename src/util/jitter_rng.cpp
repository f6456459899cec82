#include "util/jitter_rng.hpp"

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "util/random_hex.hpp"

namespace dlock::detail {
namespace {

std::atomic<unsigned> g_fork_generation{1};

void on_fork_child() noexcept { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

std::mt19937_64 seeded() {
  std::array<std::uint32_t, 8> words{};
  random_bytes(words.data(), sizeof words);
  std::seed_seq seq(words.begin(), words.end());
  return std::mt19937_64(seq);
}

}  // namespace

std::mt19937_64& jitter_rng() {
  static std::once_flag registered;
  std::call_once(registered, [] { ::pthread_atfork(nullptr, nullptr, &on_fork_child); });
  thread_local unsigned generation = 0;
  thread_local std::mt19937_64 rng;
  const unsigned now = g_fork_generation.load(std::memory_order_relaxed);
  if (generation != now) {
    rng = seeded();
    generation = now;
  }
  return rng;
}

double jitter_between(double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(jitter_rng());
}

}  // namespace dlock::detail
