#include <charconv>

#include "dlock/reply.hpp"

namespace dlock {

std::optional<long long> Reply::as_integer() const {
  if (type_ == Type::integer) return int_;
  if (type_ != Type::string && type_ != Type::status) return std::nullopt;
  long long v = 0;
  const char* end = str_.data() + str_.size();
  auto [p, ec] = std::from_chars(str_.data(), end, v);
  if (ec != std::errc() || p != end || str_.empty()) return std::nullopt;
  return v;
}

std::string_view Reply::error_prefix() const noexcept {
  if (type_ != Type::error) return {};
  std::string_view s = str_;
  return s.substr(0, s.find(' '));
}

std::string Reply::to_string() const {
  switch (type_) {
    case Type::nil: return "(nil)";
    case Type::status: return str_;
    case Type::error: return "(error) " + str_;
    case Type::integer: return std::to_string(int_);
    case Type::string: return str_;
    case Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < elements_.size(); ++i) {
        if (i) out += ", ";
        out += elements_[i].to_string();
      }
      return out + "]";
    }
  }
  return {};
}

}  // namespace dlock
