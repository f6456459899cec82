// bench/shared_region.hpp — one T in anonymous shared memory (mmap MAP_SHARED), visible to
// this process and to every child it forks afterwards. T must be usable across processes:
// plain data and lock-free std::atomic members only.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <new>
#include <stdexcept>
#include <type_traits>

namespace bench {

template <class T>
class SharedRegion {
  static_assert(std::is_trivially_destructible_v<T>, "shared across fork(): no destructor runs");

 public:
  SharedRegion() {
    void* p = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the shared region failed");
    ptr_ = new (p) T;  // default-init: fresh anonymous pages are already zero
  }
  ~SharedRegion() { ::munmap(ptr_, sizeof(T)); }
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  T* operator->() const noexcept { return ptr_; }
  T& operator*() const noexcept { return *ptr_; }

 private:
  T* ptr_ = nullptr;
};

}  // namespace bench
