#include "dlock/error.hpp"

#include <system_error>

namespace dlock {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::busy: return "lock is held by another owner";
      case errc::timeout: return "timed out";
      case errc::cancelled: return "cancelled";
      case errc::not_owner: return "not the owner of the lock";
      case errc::lock_lost: return "lock was lost";
      case errc::connection: return "cannot reach the Redis server";
      case errc::auth: return "authentication or ACL permission refused";
      case errc::wrong_type: return "key holds a value of another type";
      case errc::script: return "Lua script failed on the server";
      case errc::server: return "Redis server error";
      case errc::invalid_argument: return "invalid argument";
      case errc::protocol: return "invalid reply from the server";
      case errc::shutdown: return "client was shut down";
      case errc::called_from_event_loop: return "blocking call made on the client's event-loop thread";
      case errc::overloaded: return "too many commands queued";
      case errc::not_replicated: return "not acknowledged by enough replicas";
    }
    return "unknown dlock error";
  }
};

}  // namespace

std::string_view errc_name(errc e) noexcept {
  switch (e) {
    case errc::busy: return "busy";
    case errc::timeout: return "timeout";
    case errc::cancelled: return "cancelled";
    case errc::not_owner: return "not_owner";
    case errc::lock_lost: return "lock_lost";
    case errc::connection: return "connection";
    case errc::auth: return "auth";
    case errc::wrong_type: return "wrong_type";
    case errc::script: return "script";
    case errc::server: return "server";
    case errc::invalid_argument: return "invalid_argument";
    case errc::protocol: return "protocol";
    case errc::shutdown: return "shutdown";
    case errc::called_from_event_loop: return "called_from_event_loop";
    case errc::overloaded: return "overloaded";
    case errc::not_replicated: return "not_replicated";
  }
  return "unknown";
}

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

void throw_error(std::error_code ec, const std::string& what) {
  throw std::system_error(ec, what);
}

}  // namespace dlock
