// bench/kinds.hpp — scenario 5: every lock kind behind one interface, so the uncontended and
// contended measurements (uncontended.cpp, contended.cpp) run the same code for each of them as
// for Mutex: same loop, same clocks, same windows, same rounds.
//
//   mutex          dlock::Mutex (scenarios 2 and 3)
//   reentrant      dlock::ReentrantMutex (owner: the calling thread)
//   fair           dlock::FairLock
//   shared-writer  dlock::SharedMutex::acquire()
//   shared-reader  dlock::SharedMutex::acquire_shared() (uncontended only: readers share, so
//                  there is no handoff between them to measure)
//   semaphore      dlock::Semaphore of 1 permit, acquire(1): mutual exclusion, so the contended
//                  handoff means the same as for the locks
//   multi3         dlock::MultiLock over 3 names (one script per acquire/release on a standalone
//                  server)
//   redlock        dlock::Redlock over 3 nodes (--redlock URL,URL,URL: scripts/bench starts 3
//                  more throwaway servers); its commands are counted on all 3 nodes
#pragma once

#include <dlock/dlock.hpp>

#include <memory>
#include <string>
#include <vector>

namespace bench {

enum class LockKind { mutex, reentrant, fair, shared_writer, shared_reader, semaphore, multi3, redlock };

struct KindInfo {
  LockKind kind;
  std::string slug;   // row ids, key names, sample files
  std::string label;  // the table's library column
  bool contended;     // has a contended measurement (readers do not)
};

// Every kind but Mutex, in the order scenario 5 runs them.
const std::vector<KindInfo>& scenario5_kinds();
const KindInfo& kind_info(LockKind kind);

// The Clients one process uses for a kind: one Client on `url`, or for Redlock one per node.
class KindClients {
 public:
  KindClients(LockKind kind, const std::string& url, const std::string& redlock_urls);
  std::vector<dlock::Client*> clients() const;
  // The servers whose INFO commandstats count this kind's commands.
  const std::vector<std::string>& stat_urls() const noexcept { return stat_urls_; }

 private:
  std::vector<std::unique_ptr<dlock::Client>> owned_;
  std::vector<std::string> stat_urls_;
};

// One lock object of a kind; acquire() returns a Lease whose release() gives it back.
class BenchLock {
 public:
  virtual ~BenchLock() = default;
  virtual dlock::Result<dlock::Lease> acquire(const dlock::WaitOptions& wait) = 0;
};

// `name` is the lock's name (a MultiLock takes name:a, name:b, name:c).
std::unique_ptr<BenchLock> make_lock(LockKind kind, const KindClients& clients, const std::string& name);

// The URLs of a comma-separated list.
std::vector<std::string> split_urls(const std::string& list);

}  // namespace bench
