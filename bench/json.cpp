#include "json.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace bench {

namespace {

const Json& null_json() {
  static const Json n;
  return n;
}

void escape_to(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  Json document() {
    Json v = value();
    ws();
    if (i_ != t_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error(std::string("JSON: ") + what + " at byte " + std::to_string(i_));
  }
  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t')) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail("unexpected character");
  }
  bool literal(std::string_view word) {
    if (t_.substr(i_, word.size()) == word) {
      i_ += word.size();
      return true;
    }
    return false;
  }

  Json value() {
    ws();
    if (i_ >= t_.size()) fail("unexpected end");
    const char c = t_[i_];
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return Json(string());
    if (literal("true")) return Json(true);
    if (literal("false")) return Json(false);
    if (literal("null")) return Json();
    return number();
  }

  Json object() {
    expect('{');
    Json o = Json::object();
    if (eat('}')) return o;
    do {
      ws();
      std::string key = string();
      expect(':');
      o.set(key, value());
    } while (eat(','));
    expect('}');
    return o;
  }

  Json array() {
    expect('[');
    Json a = Json::array();
    if (eat(']')) return a;
    do {
      a.push(value());
    } while (eat(','));
    expect(']');
    return a;
  }

  std::string string() {
    if (i_ >= t_.size() || t_[i_] != '"') fail("expected a string");
    ++i_;
    std::string out;
    while (i_ < t_.size() && t_[i_] != '"') {
      char c = t_[i_++];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= t_.size()) fail("bad escape");
      c = t_[i_++];
      switch (c) {
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'u': {
          if (i_ + 4 > t_.size()) fail("bad \\u escape");
          const unsigned cp = static_cast<unsigned>(std::strtoul(std::string(t_.substr(i_, 4)).c_str(), nullptr, 16));
          i_ += 4;
          // Enough for what the drivers write (ASCII); other code points become UTF-8.
          if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
          } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          } else {
            out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          }
          break;
        }
        default: out.push_back(c);
      }
    }
    if (i_ >= t_.size()) fail("unterminated string");
    ++i_;
    return out;
  }

  Json number() {
    const std::size_t start = i_;
    while (i_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[i_])) || t_[i_] == '-' || t_[i_] == '+' ||
                              t_[i_] == '.' || t_[i_] == 'e' || t_[i_] == 'E')) {
      ++i_;
    }
    if (start == i_) fail("unexpected character");
    const std::string s(t_.substr(start, i_ - start));
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (end == nullptr || *end != '\0') fail("bad number");
    return Json(d);
  }

  std::string_view t_;
  std::size_t i_ = 0;
};

}  // namespace

double Json::number() const {
  if (type_ != Type::number) throw std::runtime_error("JSON: not a number");
  return num_;
}
const std::string& Json::string() const {
  if (type_ != Type::string) throw std::runtime_error("JSON: not a string");
  return str_;
}
bool Json::boolean() const {
  if (type_ != Type::boolean) throw std::runtime_error("JSON: not a boolean");
  return bool_;
}
const Json::Array& Json::items() const {
  static const Array none;
  return type_ == Type::array ? arr_ : none;
}
const Json::Object& Json::members() const {
  static const Object none;
  return type_ == Type::object ? obj_ : none;
}

Json& Json::set(const std::string& key, Json value) {
  if (type_ == Type::null) type_ = Type::object;
  if (type_ != Type::object) throw std::runtime_error("JSON: set() on a non-object");
  for (auto& [k, v] : obj_) {
    if (k == key) {
      v = std::move(value);
      return v;
    }
  }
  obj_.emplace_back(key, std::move(value));
  return obj_.back().second;
}

const Json& Json::get(const std::string& key) const {
  for (const auto& [k, v] : obj_) {
    if (k == key) return v;
  }
  return null_json();
}

bool Json::has(const std::string& key) const {
  for (const auto& [k, v] : obj_) {
    if (k == key) return true;
  }
  return false;
}

Json& Json::push(Json value) {
  if (type_ == Type::null) type_ = Type::array;
  if (type_ != Type::array) throw std::runtime_error("JSON: push() on a non-array");
  arr_.push_back(std::move(value));
  return arr_.back();
}

double Json::number_or(const std::string& key, double fallback) const {
  const Json& v = get(key);
  return v.is_number() ? v.num_ : fallback;
}

std::string Json::string_or(const std::string& key, const std::string& fallback) const {
  const Json& v = get(key);
  return v.is_string() ? v.str_ : fallback;
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

void Json::dump_to(std::string& out, int indent, int depth) const {
  auto newline = [&](int d) {
    if (indent <= 0) return;
    out.push_back('\n');
    out.append(static_cast<std::size_t>(indent * d), ' ');
  };
  switch (type_) {
    case Type::null: out += "null"; return;
    case Type::boolean: out += bool_ ? "true" : "false"; return;
    case Type::number: {
      if (!std::isfinite(num_)) {
        out += "null";
        return;
      }
      char buf[32];
      if (num_ == std::floor(num_) && std::fabs(num_) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", num_);
      else std::snprintf(buf, sizeof buf, "%.6g", num_);
      out += buf;
      return;
    }
    case Type::string: escape_to(out, str_); return;
    case Type::array: {
      // Arrays of plain numbers stay on one line: they are the per-repeat values.
      bool flat = true;
      for (const auto& v : arr_) flat = flat && (v.type_ == Type::number || v.type_ == Type::string || v.is_null());
      out.push_back('[');
      for (std::size_t i = 0; i < arr_.size(); ++i) {
        if (i > 0) out += flat ? ", " : ",";
        if (!flat) newline(depth + 1);
        arr_[i].dump_to(out, indent, depth + 1);
      }
      if (!flat && !arr_.empty()) newline(depth);
      out.push_back(']');
      return;
    }
    case Type::object: {
      out.push_back('{');
      for (std::size_t i = 0; i < obj_.size(); ++i) {
        if (i > 0) out.push_back(',');
        newline(depth + 1);
        escape_to(out, obj_[i].first);
        out += indent > 0 ? ": " : ":";
        obj_[i].second.dump_to(out, indent, depth + 1);
      }
      if (!obj_.empty()) newline(depth);
      out.push_back('}');
      return;
    }
  }
}

Json Json::parse(std::string_view text) { return Parser(text).document(); }

}  // namespace bench
