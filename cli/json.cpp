#include "json.hpp"

namespace dlock::cli {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n = 0;
  unsigned min = 0;
  if (c >= 0xC2 && c <= 0xDF) { n = 2; min = 0x80; }
  else if (c >= 0xE0 && c <= 0xEF) { n = 3; min = 0x800; }
  else if (c >= 0xF0 && c <= 0xF4) { n = 4; min = 0x10000; }
  else return 0;
  if (i + n > s.size()) return 0;
  unsigned cp = c & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string Json::quote(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\u00";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (std::size_t n = utf8_length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    } else {
      out += "\\u00";  // not UTF-8: the byte as the Latin-1 code point
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

void Json::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
  }
}

Json& Json::begin_object() {
  before_value();
  out_.push_back('{');
  first_.push_back(true);
  return *this;
}

Json& Json::end_object() {
  out_.push_back('}');
  if (!first_.empty()) first_.pop_back();
  return *this;
}

Json& Json::begin_array() {
  before_value();
  out_.push_back('[');
  first_.push_back(true);
  return *this;
}

Json& Json::end_array() {
  out_.push_back(']');
  if (!first_.empty()) first_.pop_back();
  return *this;
}

Json& Json::key(std::string_view name) {
  before_value();
  out_ += quote(name);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

Json& Json::str(std::string_view v) {
  before_value();
  out_ += quote(v);
  return *this;
}

Json& Json::num(long long v) {
  before_value();
  out_ += std::to_string(v);
  return *this;
}

Json& Json::num(std::uint64_t v) {
  before_value();
  out_ += std::to_string(v);
  return *this;
}

Json& Json::boolean(bool v) {
  before_value();
  out_ += v ? "true" : "false";
  return *this;
}

Json& Json::null() {
  before_value();
  out_ += "null";
  return *this;
}

Json& Json::opt_str(const std::optional<std::string>& v) { return v ? str(*v) : null(); }
Json& Json::opt_num(const std::optional<long long>& v) { return v ? num(*v) : null(); }

}  // namespace dlock::cli
