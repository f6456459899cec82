#include "context.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <system_error>

#include "dlock/redlock.hpp"
#include "help.hpp"
#include "node_fanout.hpp"

namespace dlock::cli {

const std::vector<OptionSpec>& global_option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"--redis", 0, true}, {"--redlock", 0, true}, {"--prefix", 0, true}, {"--json", 0, false},
      {"--verbose", 'v', false}, {"--help", 'h', false},
  };
  return specs;
}

GlobalOptions default_globals() {
  GlobalOptions g;
  const char* url = std::getenv("DLOCK_REDIS_URL");
  g.url = url != nullptr && *url != '\0' ? url : "redis://127.0.0.1:6379";
  const char* prefix = std::getenv("DLOCK_PREFIX");
  g.prefix = prefix != nullptr && *prefix != '\0' ? prefix : "dlock:";
  return g;
}

void apply_globals(const ParsedArgs& parsed, GlobalOptions& g) {
  for (const auto& [name, value] : parsed.options) {
    if (name == "--redis") {
      g.url = value;
      g.redis_given = true;
    }
    else if (name == "--redlock") {
      // Empty would mean "no Redlock" (redlock() tests for a list): `--redlock "$MASTERS"` with
      // the variable unset would quietly take a single-server lock instead.
      if (value.empty()) {
        if (parsed.has("--json")) g.json = true;  // reported as JSON too
        throw UsageError("--redlock needs a list of master URLs (URL,URL,...); it was given an empty value "
                         "(an unset variable?)");
      }
      g.redlock = value;
    }
    else if (name == "--prefix") g.prefix = value;
    else if (name == "--json") g.json = true;
    else if (name == "--verbose") g.verbose = true;
  }
}

Context::~Context() {
  if (settle_) settle_redlock();
}

void Context::settle_redlock() {
  if (!redlock_nodes_.empty()) (void)command_on_all(redlock_nodes_, {"PING"});
}

ParsedArgs Context::parse(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs,
                          std::optional<std::size_t> command_after) {
  std::vector<OptionSpec> all = specs;
  const auto& globals = global_option_specs();
  all.insert(all.end(), globals.begin(), globals.end());
  ParsedArgs parsed;
  try {
    parsed = parse_args(args, all, command_, command_after);
  } catch (const UsageError&) {
    if (option_given(args, all, "--json", command_after)) g_.json = true;  // reported as JSON too
    throw;
  }
  apply_globals(parsed, g_);
  if (parsed.has("--help")) {
    std::fputs(std::string(command_help(command_)).c_str(), stdout);
    throw ExitNow{exit_code::ok};
  }
  return parsed;
}

dlock::ClientOptions Context::client_options() const {
  dlock::ClientOptions o;
  o.client_name = "dlock-cli";
  o.key_prefix = g_.prefix;
  if (const char* pw = std::getenv("DLOCK_REDIS_PASSWORD"); pw != nullptr && *pw != '\0') o.password = pw;
  if (const char* user = std::getenv("DLOCK_REDIS_USER"); user != nullptr && *user != '\0') o.user = user;
  o.replication_ack.replicas = replicas_;
  return o;
}

dlock::Client& Context::client() {
  if (redlock()) return *redlock_nodes().front();
  if (client_) return *client_;
  try {
    client_ = std::make_unique<dlock::Client>(g_.url, client_options());
  } catch (const std::system_error& e) {
    throw UsageError(e.what());
  }
  return *client_;
}

const std::vector<dlock::Client*>& Context::redlock_nodes() {
  if (!redlock_nodes_.empty()) return redlock_nodes_;
  // One of the two would be ignored: say so instead of running against servers the user may
  // not have meant.
  if (g_.redis_given) throw UsageError("--redis and --redlock both name the servers; give one of them");
  try {
    redlock_clients_ = dlock::Redlock::connect(g_.redlock, client_options());
  } catch (const std::system_error& e) {
    throw UsageError(std::string("--redlock: ") + e.what());
  }
  for (const auto& c : redlock_clients_) redlock_nodes_.push_back(c.get());
  return redlock_nodes_;
}

void Context::reject_redlock() const {
  if (!redlock()) return;
  throw UsageError("--redlock works with run, acquire, extend, release and status; for '" + command_ +
                   "' name one server with --redis");
}

void Context::exit_now(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

std::string Context::key_pattern(std::string_view name_glob) const {
  std::string out;
  for (char c : g_.prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out += "{";
  out += name_glob;
  out += "}";
  return out;
}

std::optional<std::string> Context::name_of_key(std::string_view key) const {
  if (key.size() < g_.prefix.size() + 2 || key.substr(0, g_.prefix.size()) != g_.prefix) return std::nullopt;
  std::string_view rest = key.substr(g_.prefix.size());
  if (rest.front() != '{' || rest.back() != '}') return std::nullopt;
  rest = rest.substr(1, rest.size() - 2);
  if (rest.empty() || rest.find_first_of("{}") != std::string_view::npos) return std::nullopt;
  return std::string(rest);
}

std::string Context::server() const {
  if (redlock()) return g_.redlock;
  if (client_) return client_->address().display();
  return g_.url;
}

Json Context::begin_json(bool ok) const {
  Json j;
  j.begin_object().field("command", command_).field("ok", ok);
  return j;
}

void Context::print_json(Json& j, bool to_stderr) const {
  j.end_object();
  std::string line = j.text() + "\n";
  std::fputs(line.c_str(), to_stderr ? stderr : stdout);
  std::fflush(to_stderr ? stderr : stdout);
}

void Context::note(const std::string& line) const {
  if (g_.json) return;
  std::string text = "dlock: " + line + "\n";
  std::fputs(text.c_str(), stderr);
}

int Context::fail(const dlock::Error& e, Phase phase) {
  return fail(exit_code_for(e.code, phase), errc_name(e.code), e.what());
}

int Context::fail(int exit_code, std::string_view code_name, const std::string& message) {
  if (g_.json) {
    Json j = begin_json(false);
    j.field("error", code_name).field("message", message).field("exit_code", exit_code);
    print_json(j, /*to_stderr=*/command_ == "run");  // run's stdout belongs to its command
  } else {
    std::string text = "dlock" + (command_.empty() ? std::string() : " " + command_) + ": " + message + "\n";
    std::fputs(text.c_str(), stderr);
  }
  return exit_code;
}

}  // namespace dlock::cli
