#include "admin/admin_call.hpp"

#include "client_core.hpp"
#include "io/command.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock {

std::string_view to_string(LockKind kind) noexcept {
  switch (kind) {
    case LockKind::none: return "none";
    case LockKind::mutex: return "mutex";
    case LockKind::reentrant: return "reentrant";
    case LockKind::fair: return "fair";
    case LockKind::rw: return "rw";
    case LockKind::semaphore: return "semaphore";
    case LockKind::foreign: return "foreign";
  }
  return "foreign";
}

namespace detail {

Result<Reply> run_admin_script(Client& client, const Script& script, const std::vector<std::string>& keys,
                               const std::vector<std::string>& args, const std::string& what) {
  const auto& core = client.core();
  if (core->on_loop_thread()) {
    return Error(errc::called_from_event_loop, what + " called on the client's event-loop thread");
  }
  if (core->is_shut_down()) return Error(errc::shutdown, what + ": the client is shut down");
  auto wait = std::make_shared<SyncWait<Result<Reply>>>();
  core->eval(script, keys, args, [wait](Result<Reply> r) { wait->set(std::move(r)); });
  Result<Reply> r = wait->wait(*core);
  if (!r.ok()) return Error(r.code(), what + ": " + r.error().what());
  if (r->is_error()) return Error(admin_error_code(*r), what + ": " + r->str());
  return r;
}

std::error_code admin_error_code(const Reply& error_reply) {
  if (error_reply.str().find("unauthenticated") != std::string::npos) return make_error_code(errc::auth);
  return classify_error_reply(error_reply);
}

Result<std::string> admin_lock_key(const Client& client, std::string_view name) {
  if (auto valid = validate_lock_name(name); !valid) return valid.error();
  return client.core()->lock_key(std::string(name));
}

LockKind lock_kind_from(std::string_view text) noexcept {
  if (text == "none") return LockKind::none;
  if (text == "mutex") return LockKind::mutex;
  if (text == "reentrant") return LockKind::reentrant;
  if (text == "fair") return LockKind::fair;
  if (text == "rw") return LockKind::rw;
  if (text == "semaphore") return LockKind::semaphore;
  return LockKind::foreign;
}

LockHolder::Mode holder_mode_from(std::string_view text) noexcept {
  if (text == "read") return LockHolder::Mode::read;
  if (text == "write") return LockHolder::Mode::write;
  if (text == "permits") return LockHolder::Mode::permits;
  return LockHolder::Mode::exclusive;
}

}  // namespace detail
}  // namespace dlock
