// bench/json.hpp — a small JSON value: what dlock-bench writes (--json) and what it reads from
// the peer drivers (--peer-results). Objects keep their insertion order, so output is stable.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bench {

class Json {
 public:
  enum class Type { null, boolean, number, string, array, object };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::boolean), bool_(b) {}
  Json(double d) : type_(Type::number), num_(d) {}
  Json(int i) : type_(Type::number), num_(i) {}
  Json(long i) : type_(Type::number), num_(static_cast<double>(i)) {}
  Json(long long i) : type_(Type::number), num_(static_cast<double>(i)) {}
  Json(unsigned long i) : type_(Type::number), num_(static_cast<double>(i)) {}
  Json(unsigned long long i) : type_(Type::number), num_(static_cast<double>(i)) {}
  Json(const char* s) : type_(Type::string), str_(s) {}
  Json(std::string s) : type_(Type::string), str_(std::move(s)) {}
  Json(std::string_view s) : type_(Type::string), str_(s) {}
  Json(Array a) : type_(Type::array), arr_(std::move(a)) {}

  static Json object() {
    Json j;
    j.type_ = Type::object;
    return j;
  }
  static Json array() {
    Json j;
    j.type_ = Type::array;
    return j;
  }
  template <class T>
  static Json array_of(const std::vector<T>& v) {
    Json j = array();
    for (const auto& x : v) j.push(Json(x));
    return j;
  }

  Type type() const noexcept { return type_; }
  bool is_null() const noexcept { return type_ == Type::null; }
  bool is_number() const noexcept { return type_ == Type::number; }
  bool is_string() const noexcept { return type_ == Type::string; }
  bool is_array() const noexcept { return type_ == Type::array; }
  bool is_object() const noexcept { return type_ == Type::object; }

  double number() const;
  const std::string& string() const;
  bool boolean() const;
  const Array& items() const;
  const Object& members() const;

  // Object access. set() replaces an existing member; get() returns null when absent.
  Json& set(const std::string& key, Json value);
  const Json& get(const std::string& key) const;
  bool has(const std::string& key) const;
  // Array append.
  Json& push(Json value);

  // Convenience: a member's number or string, or a fallback when absent or of another type.
  double number_or(const std::string& key, double fallback) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;

  std::string dump(int indent = 2) const;
  // Throws std::runtime_error with the byte offset on malformed input.
  static Json parse(std::string_view text);

 private:
  void dump_to(std::string& out, int indent, int depth) const;

  Type type_ = Type::null;
  bool bool_ = false;
  double num_ = 0;
  std::string str_;
  Array arr_;
  Object obj_;
};

}  // namespace bench
