// StringList: a short, rarely changed list of strings (a script's KEYS or extra ARGV) kept in one
// allocation. A lock object and its leases keep several such lists for as long as they live
// (the watchdog may hold thousands); as std::vector<std::string> each list costs its own buffer
// plus 32 bytes per string and a buffer per string longer than 15 bytes (every key is), which
// made them most of a held Mutex's memory (docs/BENCHMARKS.md, the watchdog memory row).
//
// Reads give std::string_view. The implicit conversion to std::vector<std::string> keeps call
// sites that take vectors (ClientCore::eval, encode_evalsha's vector form) working unchanged.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

class StringList {
 public:
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::string_view;

    const_iterator() = default;
    const_iterator(const StringList* list, std::size_t i) : list_(list), i_(i) {}
    std::string_view operator*() const noexcept { return (*list_)[i_]; }
    const_iterator& operator++() noexcept {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) noexcept {
      const_iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const const_iterator& o) const noexcept { return i_ == o.i_; }

   private:
    const StringList* list_ = nullptr;
    std::size_t i_ = 0;
  };

  StringList() noexcept = default;
  // One allocation for the whole list (push_back rebuilds the block each time: a Semaphore's
  // per-call lists cost an allocation per string that way).
  StringList(std::initializer_list<std::string_view> items) {
    if (items.size() == 0) return;
    std::size_t chars = 0;
    for (std::string_view s : items) chars += s.size();
    const auto n = static_cast<std::uint32_t>(items.size());
    const std::size_t header = sizeof(std::uint32_t) * (n + 1);
    std::unique_ptr<char[]> block(new char[header + chars]);
    std::memcpy(block.get(), &n, sizeof n);
    std::uint32_t end = 0;
    char* out = block.get() + header;
    std::uint32_t i = 0;
    for (std::string_view s : items) {
      if (!s.empty()) std::memcpy(out + end, s.data(), s.size());
      end += static_cast<std::uint32_t>(s.size());
      std::memcpy(block.get() + sizeof(std::uint32_t) * (1 + i++), &end, sizeof end);
    }
    data_ = std::move(block);
  }
  StringList(const StringList& o) : data_(o.data_ ? copy_block(o.data_.get(), o.bytes()) : nullptr) {}
  StringList& operator=(const StringList& o) {
    if (this != &o) data_ = o.data_ ? copy_block(o.data_.get(), o.bytes()) : nullptr;
    return *this;
  }
  StringList(StringList&&) noexcept = default;
  StringList& operator=(StringList&&) noexcept = default;

  // Appends a copy of `s`. Rebuilds the block: meant for building a list once, not for loops
  // over many items.
  void push_back(std::string_view s) {
    const std::uint32_t n = count();
    const std::uint32_t chars = n == 0 ? 0 : end_of(n - 1);
    const std::size_t header = sizeof(std::uint32_t) * (n + 2);
    std::unique_ptr<char[]> block(new char[header + chars + s.size()]);
    const std::uint32_t new_n = n + 1;
    std::memcpy(block.get(), &new_n, sizeof new_n);
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint32_t e = end_of(i);
      std::memcpy(block.get() + sizeof(std::uint32_t) * (1 + i), &e, sizeof e);
    }
    const auto last = static_cast<std::uint32_t>(chars + s.size());
    std::memcpy(block.get() + sizeof(std::uint32_t) * (1 + n), &last, sizeof last);
    if (chars != 0) std::memcpy(block.get() + header, text(), chars);
    if (!s.empty()) std::memcpy(block.get() + header + chars, s.data(), s.size());
    data_ = std::move(block);
  }

  std::size_t size() const noexcept { return count(); }
  bool empty() const noexcept { return count() == 0; }
  std::string_view operator[](std::size_t i) const noexcept {
    const auto idx = static_cast<std::uint32_t>(i);
    const std::uint32_t begin = idx == 0 ? 0 : end_of(idx - 1);
    return std::string_view(text() + begin, end_of(idx) - begin);
  }
  std::string_view front() const noexcept { return (*this)[0]; }
  const_iterator begin() const noexcept { return const_iterator(this, 0); }
  const_iterator end() const noexcept { return const_iterator(this, size()); }

  // For the span form of encode_evalsha; the views point into this list.
  std::vector<std::string_view> views() const { return std::vector<std::string_view>(begin(), end()); }
  operator std::vector<std::string>() const { return std::vector<std::string>(begin(), end()); }

 private:
  // Block layout: count, then the end offset of each string, then the characters back to back.
  std::uint32_t count() const noexcept {
    if (!data_) return 0;
    std::uint32_t n;
    std::memcpy(&n, data_.get(), sizeof n);
    return n;
  }
  std::uint32_t end_of(std::uint32_t i) const noexcept {
    std::uint32_t e;
    std::memcpy(&e, data_.get() + sizeof(std::uint32_t) * (1 + i), sizeof e);
    return e;
  }
  const char* text() const noexcept { return data_.get() + sizeof(std::uint32_t) * (1 + count()); }
  std::size_t bytes() const noexcept {
    const std::uint32_t n = count();
    return sizeof(std::uint32_t) * (1 + n) + (n == 0 ? 0 : end_of(n - 1));
  }
  static std::unique_ptr<char[]> copy_block(const char* from, std::size_t n) {
    std::unique_ptr<char[]> block(new char[n]);
    std::memcpy(block.get(), from, n);
    return block;
  }

  std::unique_ptr<char[]> data_;
};

}  // namespace dlock::detail
