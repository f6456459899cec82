// dlock — the command-line tool: run a command under a distributed lock, take and release
// locks from shell scripts, inspect them, find leaks, force a release, check the server.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "commands.hpp"
#include "help.hpp"

#ifndef DLOCK_CLI_VERSION
#define DLOCK_CLI_VERSION "unknown"
#endif

namespace {

using namespace dlock::cli;

struct CommandEntry {
  const char* name;
  int (*fn)(Context&, const Args&);
};

constexpr CommandEntry kCommands[] = {
    {"run", cmd_run},         {"acquire", cmd_acquire}, {"extend", cmd_extend},
    {"release", cmd_release}, {"status", cmd_status},   {"list", cmd_list},
    {"leaks", cmd_leaks},     {"unlock", cmd_unlock},   {"doctor", cmd_doctor},
};

void print_version(const Context& ctx) {
  if (ctx.json()) {
    Json j = ctx.begin_json();
    j.field("version", DLOCK_CLI_VERSION);
    ctx.print_json(j);
  } else {
    std::printf("dlock %s\n", DLOCK_CLI_VERSION);
  }
}

bool is_command_word(const std::string& word) {
  if (word == "help" || word == "version") return true;
  for (const auto& c : kCommands) {
    if (word == c.name) return true;
  }
  return false;
}

int run_cli(Context& ctx, const std::vector<std::string>& argv) {
  // Global options come before the command word (and are also accepted after it).
  std::size_t i = 0;
  std::vector<std::string> before;
  while (i < argv.size() && argv[i].size() > 1 && argv[i][0] == '-' && argv[i] != "--") {
    before.push_back(argv[i]);
    const bool takes_value = argv[i] == "--redis" || argv[i] == "--redlock" || argv[i] == "--prefix";
    if (takes_value && i + 1 < argv.size()) {
      // `dlock --redis run job -- cmd` (the URL left out) would take "run" as the URL and then
      // call "job" an unknown command: name the real mistake instead.
      const std::string& value = argv[i + 1];
      if (is_command_word(value) && (i + 2 >= argv.size() || !is_command_word(argv[i + 2]))) {
        throw UsageError(argv[i] + " needs a value before the command word '" + value + "' (as in 'dlock " +
                         argv[i] + " VALUE " + value + " ...')");
      }
      before.push_back(argv[++i]);
    }
    ++i;
  }
  auto specs = global_option_specs();
  specs.push_back({"--version", 0, false});
  ParsedArgs globals;
  try {
    globals = parse_args(before, specs, "");
  } catch (const UsageError&) {
    if (option_given(before, specs, "--json")) ctx.globals().json = true;  // reported as JSON too
    throw;
  }
  apply_globals(globals, ctx.globals());
  if (globals.has("--version")) {
    print_version(ctx);
    return exit_code::ok;
  }
  if (globals.has("--help")) {
    std::fputs(main_help().c_str(), stdout);
    return exit_code::ok;
  }
  if (i >= argv.size()) throw UsageError("no command given");
  const std::string command = argv[i];
  std::vector<std::string> rest(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
  if (command == "help") {
    std::fputs((rest.empty() ? main_help() : command_help(rest[0])).c_str(), stdout);
    return exit_code::ok;
  }
  if (command == "version") {
    print_version(ctx);
    return exit_code::ok;
  }
  for (const auto& c : kCommands) {
    if (command == c.name) {
      ctx.set_command(command);
      return c.fn(ctx, rest);
    }
  }
  // Only the global options are known here: a --json among them asks for a JSON report.
  if (command != "--" && option_given(rest, global_option_specs(), "--json")) ctx.globals().json = true;
  throw UsageError("unknown command '" + command + "'");
}

}  // namespace

int main(int argc, char** argv) {
  record_inherited_fds();
  const std::vector<std::string> args(argv + 1, argv + argc);
  Context ctx(default_globals());
  try {
    return run_cli(ctx, args);
  } catch (const ExitNow& e) {
    return e.code;
  } catch (const UsageError& e) {
    // A --json given as an option was applied where the error was found (option_given).
    const std::string hint = ctx.command().empty() ? "dlock --help" : "dlock " + ctx.command() + " --help";
    return ctx.fail(exit_code::usage, "usage", std::string(e.what()) + " (see '" + hint + "')");
  } catch (const std::exception& e) {
    return ctx.fail(exit_code::server_error, "internal", std::string("unexpected error: ") + e.what());
  }
}
