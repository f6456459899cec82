#include "kinds.hpp"

#include <sstream>
#include <stdexcept>

#include "options.hpp"

namespace bench {

namespace {

// One adapter per kind: each holds its lock object and forwards acquire() to the right member
// (the lock's own default LeaseOptions, as an application would construct it).
template <class Lock>
class Plain final : public BenchLock {
 public:
  template <class... Args>
  explicit Plain(Args&&... args) : lock_(std::forward<Args>(args)...) {}
  dlock::Result<dlock::Lease> acquire(const dlock::WaitOptions& wait) override { return lock_.acquire(wait); }

 private:
  Lock lock_;
};

class Reader final : public BenchLock {
 public:
  Reader(dlock::Client& c, const std::string& name) : lock_(c, name) {}
  dlock::Result<dlock::Lease> acquire(const dlock::WaitOptions& wait) override { return lock_.acquire_shared(wait); }

 private:
  dlock::SharedMutex lock_;
};

class OnePermit final : public BenchLock {
 public:
  OnePermit(dlock::Client& c, const std::string& name) : sem_(c, name, 1) {}
  dlock::Result<dlock::Lease> acquire(const dlock::WaitOptions& wait) override { return sem_.acquire(1, wait); }

 private:
  dlock::Semaphore sem_;
};

}  // namespace

const std::vector<KindInfo>& scenario5_kinds() {
  static const std::vector<KindInfo> kinds{
      {LockKind::reentrant, "reentrant", "dlock ReentrantMutex", true},
      {LockKind::fair, "fair", "dlock FairLock", true},
      {LockKind::shared_writer, "shared-writer", "dlock SharedMutex (writer)", true},
      {LockKind::shared_reader, "shared-reader", "dlock SharedMutex (reader)", false},
      {LockKind::semaphore, "semaphore", "dlock Semaphore (1 permit)", true},
      {LockKind::multi3, "multi3", "dlock MultiLock (3 names)", true},
      {LockKind::redlock, "redlock", "dlock Redlock (3 nodes)", true},
  };
  return kinds;
}

const KindInfo& kind_info(LockKind kind) {
  static const KindInfo mutex{LockKind::mutex, "mutex", "dlock Mutex", true};
  if (kind == LockKind::mutex) return mutex;
  for (const auto& k : scenario5_kinds()) {
    if (k.kind == kind) return k;
  }
  throw std::logic_error("unknown lock kind");
}

std::vector<std::string> split_urls(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

KindClients::KindClients(LockKind kind, const std::string& url, const std::string& redlock_urls) {
  if (kind == LockKind::redlock) {
    if (redlock_urls.empty()) throw std::runtime_error("Redlock needs --redlock URL,URL,URL");
    owned_ = dlock::Redlock::connect(redlock_urls, client_options());
    stat_urls_ = split_urls(redlock_urls);
  } else {
    owned_.push_back(std::make_unique<dlock::Client>(url, client_options()));
    stat_urls_.push_back(url);
  }
  // Connected before any window opens: a connect inside a window would count against the kind.
  for (auto& c : owned_) {
    if (auto ok = c->ping(); !ok) throw std::runtime_error("dlock client cannot reach the server: " + ok.error().what());
  }
}

std::vector<dlock::Client*> KindClients::clients() const {
  std::vector<dlock::Client*> out;
  for (const auto& c : owned_) out.push_back(c.get());
  return out;
}

std::unique_ptr<BenchLock> make_lock(LockKind kind, const KindClients& clients, const std::string& name) {
  dlock::Client& c = *clients.clients().front();
  switch (kind) {
    case LockKind::mutex: return std::make_unique<Plain<dlock::Mutex>>(c, name);
    case LockKind::reentrant: return std::make_unique<Plain<dlock::ReentrantMutex>>(c, name);
    case LockKind::fair: return std::make_unique<Plain<dlock::FairLock>>(c, name);
    case LockKind::shared_writer: return std::make_unique<Plain<dlock::SharedMutex>>(c, name);
    case LockKind::shared_reader: return std::make_unique<Reader>(c, name);
    case LockKind::semaphore: return std::make_unique<OnePermit>(c, name);
    case LockKind::multi3:
      return std::make_unique<Plain<dlock::MultiLock>>(c, std::vector<std::string>{name + ":a", name + ":b", name + ":c"});
    case LockKind::redlock: return std::make_unique<Plain<dlock::Redlock>>(clients.clients(), name);
  }
  throw std::logic_error("unknown lock kind");
}

}  // namespace bench
