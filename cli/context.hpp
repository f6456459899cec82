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
  // --redlock URL,URL,...: independent masters for a Redlock (run, acquire, extend, release,
  // status). Empty: --redis alone names the deployment.
  std::string redlock;
  bool redis_given = false;  // --redis on the command line (with --redlock: a usage error)
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
  ~Context();  // settle_redlock(), then the Clients close

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
  // With --redlock it is the FIRST master's Client (the one whose prefix and watchdog a
  // Redlock uses): for a command that looks at one node.
  dlock::Client& client();
  // --redlock: one Client per master, connected lazily; UsageError on a bad list.
  const std::vector<dlock::Client*>& redlock_nodes();
  bool redlock() const { return !g_.redlock.empty(); }
  // --redlock: one PING round trip to every master. Replies come in order on a connection, so
  // afterwards the commands a Redlock sent without waiting (the release of a failed try, the
  // minority's part of a release or acquisition) have reached their masters; a Client destroyed
  // earlier may drop what it had not written yet. Runs in ~Context too.
  void settle_redlock();
  // A command that sent nothing without awaiting its answer (status): ~Context does not settle.
  void skip_settle() noexcept { settle_ = false; }
  // Commands that do not speak Redlock call this: a UsageError naming those that do.
  void reject_redlock() const;
  // --replicas K (run, acquire): ClientOptions::replication_ack.replicas of the Client, so it
  // must be set before client() is first called.
  void set_replication_ack(unsigned replicas) { replicas_ = replicas; }
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
  dlock::ClientOptions client_options() const;

  GlobalOptions g_;
  std::string command_;
  unsigned replicas_ = 0;
  std::unique_ptr<dlock::Client> client_;
  std::vector<std::unique_ptr<dlock::Client>> redlock_clients_;
  std::vector<dlock::Client*> redlock_nodes_;
  bool settle_ = true;  // skip_settle()
};

}  // namespace dlock::cli
