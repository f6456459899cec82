// json.hpp — a tiny JSON writer for the CLI's --json output. Every string is escaped, and
// bytes that are not valid UTF-8 are written as \u00XX, so the output always parses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

class Json {
 public:
  Json& begin_object();
  Json& end_object();
  Json& begin_array();
  Json& end_array();
  // The name of the next member of the current object.
  Json& key(std::string_view name);

  Json& str(std::string_view v);
  Json& num(long long v);
  Json& num(std::uint64_t v);
  Json& boolean(bool v);
  Json& null();
  // A string, or null when absent.
  Json& opt_str(const std::optional<std::string>& v);
  Json& opt_num(const std::optional<long long>& v);

  // Shorthands for one member: key + value.
  Json& field(std::string_view name, std::string_view v) { return key(name).str(v); }
  Json& field(std::string_view name, const char* v) { return key(name).str(v); }
  Json& field(std::string_view name, const std::string& v) { return key(name).str(v); }
  Json& field(std::string_view name, long long v) { return key(name).num(v); }
  Json& field(std::string_view name, int v) { return key(name).num(static_cast<long long>(v)); }
  Json& field(std::string_view name, std::uint64_t v) { return key(name).num(v); }
  Json& field(std::string_view name, bool v) { return key(name).boolean(v); }

  const std::string& text() const { return out_; }

  // `s` as a quoted, escaped JSON string.
  static std::string quote(std::string_view s);

 private:
  void before_value();

  std::string out_;
  std::vector<bool> first_;  // per open container: no member written yet
  bool after_key_ = false;
};

}  // namespace dlock::cli
