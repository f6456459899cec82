// fuzz_cli_args — the dlock CLI's argument parsing (cli/args.cpp) on arbitrary command lines.
//
// Input layout: byte 0 picks the option table and the command_after mode; the rest is the
// command line, arguments separated by NUL bytes (as the kernel hands them to main()).
// The option tables are the CLI's own shapes (value options, flags, short flags) plus a table
// read from the input, so that odd option names are tried too.
//
// Properties checked, beyond "does not crash":
//  1. parse_args either returns or throws UsageError with a message; nothing else escapes.
//  2. Every parsed option is one of the table's long names; a flag has no value.
//  3. With command_after = N: at most N positionals, none looks like an option.
//  4. Canonical round trip: the result written back as "--name[=value]"..., then the
//     positionals, then "--" and the rest, parses to the same result.
//  5. parse_exit_code_arg accepts exactly the integers 0-255 (decimal; "-0" is 0);
//     check_lock_name accepts exactly what the library's validate_lock_name accepts;
//     parse_duration_arg accepts exactly what dlock::parse_duration accepts.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "check.hpp"
#include "dlock/duration.hpp"
#include "util/names.hpp"

namespace {

using dlock::cli::OptionSpec;
using dlock::cli::ParsedArgs;
using dlock::cli::UsageError;

// Shaped like cli/cmd_run.cpp's table plus the global options of cli/context.cpp.
const std::vector<OptionSpec> kRunLike = {
    {"--wait", 0, true},        {"--no-wait", 0, false},  {"--ttl", 0, true},
    {"--grace", 0, true},       {"--conflict-exit-code", 0, true},
    {"--redis", 0, true},       {"--prefix", 0, true},    {"--json", 0, false},
    {"--verbose", 'v', false},  {"--help", 'h', false},   {"--force", 'f', false},
};

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += "[" + a + "] ";
  return out;
}

bool same(const ParsedArgs& a, const ParsedArgs& b) {
  return a.options == b.options && a.positionals == b.positionals && a.rest == b.rest &&
         a.rest_started == b.rest_started;
}

const OptionSpec* spec_named(const std::vector<OptionSpec>& specs, std::string_view name) {
  for (const auto& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// A table read from the input: up to 4 names "--<letters>" with a takes_value bit and an
// optional short letter. Names are unique and never hold '=' (the parser splits
// "--name=value" at the first '='), as no real table does.
std::vector<OptionSpec> table_from(std::string_view& in, std::vector<std::string>& storage) {
  std::vector<OptionSpec> specs;
  storage.clear();
  storage.reserve(4);
  while (specs.size() < 4 && in.size() >= 2) {
    const auto flags = static_cast<unsigned char>(in[0]);
    const std::size_t len = 1 + static_cast<unsigned char>(in[1]) % 6;
    in.remove_prefix(2);
    std::string name = "--";
    for (std::size_t i = 0; i < len && !in.empty(); ++i) {
      name += static_cast<char>('a' + static_cast<unsigned char>(in[0]) % 26);
      in.remove_prefix(1);
    }
    if (name.size() == 2) break;  // "--" alone is the separator, never an option
    char short_name = (flags & 2) != 0 ? static_cast<char>('a' + (flags >> 3) % 26) : 0;
    // Like every real table, no two options share a name or a short letter.
    bool clash = false;
    for (const auto& s : specs) {
      clash = clash || s.name == name;
      if (short_name != 0 && s.short_name == short_name) short_name = 0;
    }
    if (clash) continue;
    storage.push_back(std::move(name));
    specs.push_back({storage.back(), short_name, (flags & 1) != 0});
  }
  return specs;
}

void check_parse(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs,
                 std::optional<std::size_t> command_after) {
  ParsedArgs parsed;
  try {
    parsed = dlock::cli::parse_args(args, specs, "run", command_after);
  } catch (const UsageError& e) {
    FUZZ_CHECK(std::string_view(e.what()).size() > 0, joined(args));
    return;
  }
  for (const auto& [name, value] : parsed.options) {
    const OptionSpec* spec = spec_named(specs, name);
    FUZZ_CHECK(spec != nullptr, joined(args) + " option " + name);
    if (!spec->takes_value) FUZZ_CHECK(value.empty(), joined(args) + " flag " + name + "=" + value);
  }
  if (command_after) {
    FUZZ_CHECK(parsed.positionals.size() <= *command_after, joined(args));
    for (const auto& p : parsed.positionals) {
      FUZZ_CHECK(!(p.size() > 1 && p[0] == '-'), joined(args) + " positional " + p);
    }
  } else {
    FUZZ_CHECK(parsed.rest.empty() && !parsed.rest_started, joined(args));
  }

  std::vector<std::string> canonical;
  for (const auto& [name, value] : parsed.options) {
    canonical.push_back(spec_named(specs, name)->takes_value ? name + "=" + value : name);
  }
  if (!command_after) canonical.push_back("--");
  canonical.insert(canonical.end(), parsed.positionals.begin(), parsed.positionals.end());
  if (parsed.rest_started) {
    canonical.push_back("--");
    canonical.insert(canonical.end(), parsed.rest.begin(), parsed.rest.end());
  }
  ParsedArgs again;
  try {
    again = dlock::cli::parse_args(canonical, specs, "run", command_after);
  } catch (const UsageError& e) {
    FUZZ_CHECK(false, joined(args) + " canonical " + joined(canonical) + " rejected: " + e.what());
  }
  FUZZ_CHECK(same(parsed, again), joined(args) + " canonical " + joined(canonical));
}

// "An integer 0..255" as std::from_chars reads integers: an optional '-', then decimal
// digits, leading zeros allowed ("007", "-0").
bool is_exit_code(std::string_view s) {
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  while (s.size() > 1 && s[0] == '0') s.remove_prefix(1);
  if (s.size() > 3) return false;
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return negative ? v == 0 : v <= 255;
}

void check_value_parsers(const std::string& text) {
  bool accepted = true;
  try {
    int code = dlock::cli::parse_exit_code_arg("--lost-exit-code", text);
    FUZZ_CHECK(code >= 0 && code <= 255, "exit code '" + text + "'");
  } catch (const UsageError&) {
    accepted = false;
  }
  FUZZ_CHECK(accepted == is_exit_code(text), "exit code '" + text + "' accepted=" + std::to_string(accepted));

  accepted = true;
  try {
    dlock::cli::check_lock_name(text);
  } catch (const UsageError&) {
    accepted = false;
  }
  FUZZ_CHECK(accepted == dlock::detail::validate_lock_name(text).ok(), "lock name '" + text + "'");

  accepted = true;
  try {
    auto d = dlock::cli::parse_duration_arg("--ttl", text);
    FUZZ_CHECK(d == dlock::parse_duration(text).value(), "duration '" + text + "'");
  } catch (const UsageError& e) {
    accepted = false;
    FUZZ_CHECK(std::string_view(e.what()).rfind("--ttl: ", 0) == 0, e.what());
  }
  FUZZ_CHECK(accepted == dlock::parse_duration(text).ok(), "duration '" + text + "'");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto mode = data[0];
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::vector<std::string> names;
  std::vector<OptionSpec> specs = kRunLike;
  if ((mode & 1) != 0) {
    // Bytes up to the first NUL describe the table; the command line follows.
    auto nul = in.find('\0');
    std::string_view table = in.substr(0, nul);
    in = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
    specs = table_from(table, names);
  }
  std::optional<std::size_t> command_after;
  if ((mode & 2) != 0) command_after = (mode >> 2) % 3;

  std::vector<std::string> args;
  while (!in.empty() && args.size() < 64) {
    auto nul = in.find('\0');
    args.emplace_back(in.substr(0, nul));
    in = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  }

  check_parse(args, specs, command_after);
  for (const auto& a : args) check_value_parsers(a);
  return 0;
}
