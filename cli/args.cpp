#include "args.hpp"

#include <charconv>

#include "dlock/clock.hpp"
#include "dlock/duration.hpp"

namespace dlock::cli {

bool ParsedArgs::has(std::string_view name) const {
  for (const auto& [k, v] : options) {
    if (k == name) return true;
  }
  return false;
}

std::optional<std::string> ParsedArgs::last(std::string_view name) const {
  std::optional<std::string> found;
  for (const auto& [k, v] : options) {
    if (k == name) found = v;
  }
  return found;
}

namespace {

const OptionSpec* find_long(const std::vector<OptionSpec>& specs, std::string_view name) {
  for (const auto& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const OptionSpec* find_short(const std::vector<OptionSpec>& specs, char c) {
  for (const auto& s : specs) {
    if (s.short_name != 0 && s.short_name == c) return &s;
  }
  return nullptr;
}

std::string where(std::string_view command) {
  return command.empty() ? std::string("dlock") : "dlock " + std::string(command);
}

}  // namespace

ParsedArgs parse_args(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs,
                      std::string_view command, std::optional<std::size_t> command_after) {
  ParsedArgs out;
  bool only_positionals = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (out.rest_started) {
      out.rest.push_back(a);
      continue;
    }
    if (a == "--") {
      // With a command to come, "--" starts it once its N positionals were given. Before them
      // it ends the options, as it does for every command, so that a NAME that begins with '-'
      // can be given: "dlock run -- -nightly -- CMD" (the second "--", or the next word,
      // starts the command). A "--" among operands is an operand.
      if (command_after && out.positionals.size() >= *command_after) {
        out.rest_started = true;
        continue;
      }
      if (!only_positionals) {
        only_positionals = true;
        continue;
      }
    }
    const bool looks_like_option = !only_positionals && a.size() > 1 && a[0] == '-';
    if (!looks_like_option) {
      if (command_after && out.positionals.size() >= *command_after) {
        out.rest_started = true;
        out.rest.push_back(a);
      } else {
        out.positionals.push_back(a);
      }
      continue;
    }
    const OptionSpec* spec = nullptr;
    std::optional<std::string> inline_value;
    if (a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      spec = find_long(specs, std::string_view(a).substr(0, eq));
      if (eq != std::string::npos) inline_value = a.substr(eq + 1);
    } else if (a.size() == 2) {
      spec = find_short(specs, a[1]);
    }
    if (spec == nullptr) throw UsageError("unknown option '" + a + "' for '" + where(command) + "'");
    std::string value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        throw UsageError("option '" + std::string(spec->name) + "' needs a value");
      }
    } else if (inline_value) {
      throw UsageError("option '" + std::string(spec->name) + "' takes no value");
    }
    out.options.emplace_back(std::string(spec->name), std::move(value));
  }
  return out;
}

bool option_given(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs, std::string_view name,
                  std::optional<std::size_t> command_after) {
  std::size_t positionals = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return false;
    if (a.size() <= 1 || a[0] != '-') {
      if (command_after && positionals >= *command_after) return false;  // the command begins
      ++positionals;
      continue;
    }
    const OptionSpec* spec = nullptr;
    bool inline_value = false;
    if (a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      spec = find_long(specs, std::string_view(a).substr(0, eq));
      inline_value = eq != std::string::npos;
    } else if (a.size() == 2) {
      spec = find_short(specs, a[1]);
    }
    if (spec == nullptr) continue;
    if (spec->name == name && !inline_value) return true;
    if (spec->takes_value && !inline_value) ++i;  // its value, whatever it looks like
  }
  return false;
}

std::chrono::milliseconds parse_duration_arg(std::string_view option, std::string_view text) {
  auto d = dlock::parse_duration(text);
  if (!d) throw UsageError(std::string(option) + ": " + d.error().what() + " (examples: 250ms, 30s, 5m, 1m30s)");
  return *d;
}

std::chrono::milliseconds parse_ttl_arg(std::string_view option, std::string_view text) {
  const auto d = parse_duration_arg(option, text);
  if (d > dlock::max_duration) {
    throw UsageError(std::string(option) + ": " + std::string(text) + " is longer than 100 years, dlock's limit for a lease");
  }
  return d;
}

int parse_exit_code_arg(std::string_view option, std::string_view text) {
  int v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0 || v > 255) {
    throw UsageError(std::string(option) + ": '" + std::string(text) + "' is not an exit code (0-255)");
  }
  return v;
}

std::optional<std::string> lock_name_problem(std::string_view name) {
  if (name.empty()) return "the lock name must not be empty";
  if (name.size() > 512) return "the lock name is longer than 512 bytes";
  for (unsigned char c : name) {
    if (c == '{' || c == '}') return "lock name '" + std::string(name) + "' contains a brace";
    if (c < 0x20 || c == 0x7f) return "the lock name contains a control character";
  }
  return std::nullopt;
}

void check_lock_name(std::string_view name) {
  if (auto problem = lock_name_problem(name)) throw UsageError(*problem);
}

}  // namespace dlock::cli
