// context.hpp — what every command shares: the global options, the Client (made on first use),
// key names, and how results and errors are printed (text, or one JSON object with --json).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "dlock/client.hpp"
#include "dlock/result.hpp"
#include "exit_codes.hpp"
#include "json.hpp"

namespace dlock::cli {

struct GlobalOptions {
  std::string url;     // --redis, DLOCK_REDIS_URL, redis://127.0.0.1:6379
  std::string prefix;  // --prefix, DLOCK_PREFIX, dlock:
  bool json = false;
  bool verbose = false;
};

// The options every command accepts, before or after its name.
const std::vector<OptionSpec>& global_option_specs();
// Fills url and prefix from the environment and the defaults.
GlobalOptions default_globals();
// Applies the global options found in `parsed` (later ones win).
void apply_globals(const ParsedArgs& parsed, GlobalOptions& g);

class Context {
 public:
  explicit Context(GlobalOptions g) : g_(std::move(g)) {}
  ~Context();

  GlobalOptions& globals() { return g_; }
  bool json() const { return g_.json; }
  bool verbose() const { return g_.verbose; }
  const std::string& command() const { return command_; }
  void set_command(std::string name) { command_ = std::move(name); }

  // Parses the command's arguments: its own `specs` plus the global options (applied here).
  // --help prints the command's help and ends the program with 0.
  ParsedArgs parse(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs,
                   std::optional<std::size_t> command_after = std::nullopt);

  // The Client, connected lazily (it never blocks here). A bad URL or prefix is a UsageError.
  // The password may come from DLOCK_REDIS_PASSWORD (and the ACL user from DLOCK_REDIS_USER).
  dlock::Client& client();
  // Ends without destructors: for `acquire`, whose lease must outlive the process.
  [[noreturn]] static void exit_now(int code);

  std::string key(std::string_view name) const { return g_.prefix + "{" + std::string(name) + "}"; }
  // A SCAN MATCH pattern for lock keys whose name matches the glob `name_glob`.
  std::string key_pattern(std::string_view name_glob) const;
  // The lock name of a key under the prefix ("dlock:{x}" -> "x"); nullopt for other keys.
  std::optional<std::string> name_of_key(std::string_view key) const;
  std::string server() const;

  // Reports a failure (text on stderr, or a JSON object on stdout) and returns its exit code.
  int fail(const dlock::Error& e, Phase phase = Phase::other);
  int fail(int exit_code, std::string_view code_name, const std::string& message);
  // Starts the JSON object every command prints: {"command":..., "ok":true, ...
  Json begin_json(bool ok = true) const;
  // Closes `j`'s object and prints it on stdout (or stderr), one line.
  void print_json(Json& j, bool to_stderr = false) const;
  // A line on stderr for people; suppressed with --json.
  void note(const std::string& line) const;

 private:
  GlobalOptions g_;
  std::string command_;
  std::unique_ptr<dlock::Client> client_;
};

}  // namespace dlock::cli
