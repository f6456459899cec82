// dlock/reply.hpp — a Redis reply as a plain value (RESP2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

class Reply {
 public:
  enum class Type { nil, status, error, integer, string, array };

  Reply() = default;
  static Reply make_nil() { return Reply(); }
  static Reply make_status(std::string s) { Reply r; r.type_ = Type::status; r.str_ = std::move(s); return r; }
  static Reply make_error(std::string s) { Reply r; r.type_ = Type::error; r.str_ = std::move(s); return r; }
  static Reply make_integer(long long v) { Reply r; r.type_ = Type::integer; r.int_ = v; return r; }
  static Reply make_string(std::string s) { Reply r; r.type_ = Type::string; r.str_ = std::move(s); return r; }
  static Reply make_array(std::vector<Reply> e) { Reply r; r.type_ = Type::array; r.elements_ = std::move(e); return r; }

  Type type() const noexcept { return type_; }
  bool is_nil() const noexcept { return type_ == Type::nil; }
  bool is_error() const noexcept { return type_ == Type::error; }
  bool is_integer() const noexcept { return type_ == Type::integer; }
  bool is_string() const noexcept { return type_ == Type::string; }
  bool is_status() const noexcept { return type_ == Type::status; }
  bool is_array() const noexcept { return type_ == Type::array; }

  // Status, error and bulk-string text (empty for other types).
  const std::string& str() const noexcept { return str_; }
  // The integer of an integer reply, or a bulk/status string that holds a decimal integer.
  std::optional<long long> as_integer() const;
  long long integer() const noexcept { return int_; }
  const std::vector<Reply>& elements() const noexcept { return elements_; }
  std::vector<Reply>& elements() noexcept { return elements_; }
  std::size_t size() const noexcept { return elements_.size(); }
  const Reply& operator[](std::size_t i) const { return elements_.at(i); }

  // First word of an error reply ("NOSCRIPT", "WRONGTYPE", "NOAUTH", ...), else empty.
  std::string_view error_prefix() const noexcept;

  // A compact, redis-cli-like rendering for messages and the CLI.
  std::string to_string() const;

 private:
  Type type_ = Type::nil;
  long long int_ = 0;
  std::string str_;
  std::vector<Reply> elements_;
};

}  // namespace dlock
