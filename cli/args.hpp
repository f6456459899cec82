// args.hpp — command-line parsing for the dlock CLI: options, positionals, and the checks that
// turn bad input into usage errors (exit 64).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::cli {

// A bad command line. main() prints it with a pointer to --help and exits 64.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown to end the program at once with `code` after output was written (e.g. --help).
struct ExitNow {
  int code;
};

struct OptionSpec {
  std::string_view name;  // long form, with dashes: "--wait"
  char short_name = 0;    // 'v' for -v, or 0
  bool takes_value = false;
};

struct ParsedArgs {
  std::vector<std::pair<std::string, std::string>> options;  // long name -> value ("" for flags), in order
  std::vector<std::string> positionals;
  std::vector<std::string> rest;  // run: the command and its arguments
  bool rest_started = false;      // "--" was given, or the command began

  bool has(std::string_view name) const;
  // The value of the last occurrence of `name`.
  std::optional<std::string> last(std::string_view name) const;
};

// parse_args()
//
// Accepts "--name value", "--name=value", "-v", and "--" (everything after it is positional).
// With `command_after` = N, the positional after the first N starts the command: it and
// everything after it go to `rest` verbatim (as flock(1) does); so does a "--" after the first
// N positionals. A "--" before them ends the options: "run -- -x -- CMD" names the lock "-x".
// Throws UsageError on an unknown option or a missing value.
ParsedArgs parse_args(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs,
                      std::string_view command, std::optional<std::size_t> command_after = std::nullopt);

// option_given()
//
// True when `name` (a flag of `specs`) is given as an option in `args`, read as parse_args
// would read them but without throwing: an unknown option counts as a flag, an option's value
// is not an option, and nothing after "--" or the start of the command is. For a usage error:
// whether it is to be reported as JSON ("--prefix --json" gives the prefix "--json").
bool option_given(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs, std::string_view name,
                  std::optional<std::size_t> command_after = std::nullopt);

// A duration option through dlock::parse_duration; UsageError names the option on failure.
std::chrono::milliseconds parse_duration_arg(std::string_view option, std::string_view text);
// A lease length (--ttl, --grace): as parse_duration_arg, and at most dlock::max_duration (100
// years), the library's limit for a TTL; longer is a usage error, not a failed acquisition.
std::chrono::milliseconds parse_ttl_arg(std::string_view option, std::string_view text);
// An exit-code option: an integer 0..255.
int parse_exit_code_arg(std::string_view option, std::string_view text);
// The library's lock-name rules (1-512 bytes, no braces, no control characters).
void check_lock_name(std::string_view name);
// Why `name` is no valid lock name (the library's rules), or nullopt. Never throws: for names
// found on the server, where a bad one is data to report, not a usage error.
std::optional<std::string> lock_name_problem(std::string_view name);

}  // namespace dlock::cli
