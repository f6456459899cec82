// dlock/result.hpp — Result<T>: a value or a std::error_code with a message.
//
// C++20 has no std::expected; this is the small subset dlock needs. A failed Result carries
// both the code (to branch on) and a human-readable message that names the lock and server.
#pragma once

#include <cassert>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

#include "dlock/error.hpp"

namespace dlock {

// Error: a code plus the message a person should see.
struct Error {
  std::error_code code;
  std::string message;

  Error() = default;
  Error(std::error_code c, std::string m = {}) : code(c), message(std::move(m)) {}
  Error(errc c, std::string m = {}) : code(make_error_code(c)), message(std::move(m)) {}

  explicit operator bool() const noexcept { return static_cast<bool>(code); }
  // "message" when set, else the category's text for the code.
  std::string what() const { return message.empty() ? code.message() : message; }
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) { assert(std::get<Error>(v_).code); }
  Result(errc c, std::string m = {}) : Result(Error(c, std::move(m))) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

  // The error; an empty Error when ok().
  Error error() const { return ok() ? Error{} : std::get<Error>(v_); }
  std::error_code code() const noexcept { return ok() ? std::error_code{} : std::get<Error>(v_).code; }

 private:
  void check() const {
    if (!ok()) throw_error(std::get<Error>(v_).code, std::get<Error>(v_).what());
  }
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : e_(std::move(e)) {}
  Result(errc c, std::string m = {}) : e_(c, std::move(m)) {}
  bool ok() const noexcept { return !e_.code; }
  explicit operator bool() const noexcept { return ok(); }
  void value() const { if (!ok()) throw_error(e_.code, e_.what()); }
  Error error() const { return e_; }
  std::error_code code() const noexcept { return e_.code; }

 private:
  Error e_;
};

}  // namespace dlock
