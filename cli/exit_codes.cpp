#include "exit_codes.hpp"

#include "dlock/error.hpp"

namespace dlock::cli {

int exit_code_for(const std::error_code& code, Phase phase) {
  if (!code) return exit_code::ok;
  if (code.category() != dlock::error_category()) return exit_code::server_error;
  switch (static_cast<dlock::errc>(code.value())) {
    case dlock::errc::busy: return exit_code::not_acquired;
    case dlock::errc::timeout: return phase == Phase::acquiring ? exit_code::not_acquired : exit_code::unreachable;
    case dlock::errc::cancelled: return exit_code::not_acquired;
    case dlock::errc::not_owner: return exit_code::not_owner;
    case dlock::errc::lock_lost: return exit_code::lost;
    case dlock::errc::connection: return exit_code::unreachable;
    case dlock::errc::auth: return exit_code::refused;
    case dlock::errc::wrong_type: return exit_code::wrong_type;
    case dlock::errc::invalid_argument: return exit_code::usage;
    case dlock::errc::script:
    case dlock::errc::server:
    case dlock::errc::protocol:
    case dlock::errc::shutdown:
    case dlock::errc::called_from_event_loop:
    case dlock::errc::overloaded:
    case dlock::errc::not_replicated: return exit_code::server_error;
  }
  return exit_code::server_error;
}

std::string_view errc_name(const std::error_code& code) {
  if (!code) return "ok";
  if (code.category() != dlock::error_category()) return "system";
  return dlock::errc_name(static_cast<dlock::errc>(code.value()));
}

std::string_view exit_code_help() {
  return "Exit codes (the same for every command):\n"
         "    0  success (run: the command's own status, 128+N when it died of signal N)\n"
         "    1  leaks: abnormal locks found; unlock --force: the lock was not held\n"
         "   64  usage error (unknown option, bad duration or lock name)\n"
         "   65  the key holds another kind of value (not a dlock mutex)\n"
         "   69  the Redis server cannot be reached (or does not answer, also when --wait\n"
         "       ran out while it did not answer: the lock's state is unknown)\n"
         "   70  run: the lock was lost while the command ran, or the final release found it\n"
         "       no longer ours, or the lease had too little validity left to start the\n"
         "       command, which then did not run (--lost-exit-code changes it)\n"
         "   75  lock not acquired: busy with --no-wait, or --wait ran out\n"
         "       (run: --conflict-exit-code changes it)\n"
         "   76  unexpected server error (script error, OOM, READONLY...)\n"
         "   77  not the owner: release/extend of a lock that is not yours or has expired\n"
         "   78  authentication or ACL refused, or unsafe server configuration (doctor)\n"
         "  126  run: the command could not be executed\n"
         "  127  run: the command was not found\n"
         "  128+N  run: interrupted by signal N while still waiting for the lock\n";
}

}  // namespace dlock::cli
