// dlock::release_owned / extend_owned: a Mutex hold released or extended by its owner token,
// with the library's own scripts (mutex_release.lua, mutex_renew.lua).
#include "admin/admin_call.hpp"
#include "client_core.hpp"

namespace dlock {

namespace detail::scripts {
extern const Script mutex_release;
extern const Script mutex_renew;
}  // namespace detail::scripts

namespace {

// How long a release marker lives: a retried release within it is told "already released".
constexpr long long release_marker_ms = 30000;

// After a "not held" answer: is the key there as something else than a Mutex lock?
Result<void> check_is_mutex(Client& client, const std::string& key, const std::string& what) {
  auto type = client.command({"TYPE", key});
  if (!type) return Error(type.code(), what + ": " + type.error().what());
  if (type->str() != "none" && type->str() != "string") {
    return Error(errc::wrong_type, what + ": key '" + key + "' holds a " + type->str() + ", not a dlock mutex");
  }
  return {};
}

}  // namespace

Result<OwnedRelease> release_owned(Client& client, std::string_view name, std::string_view owner) {
  auto key = detail::admin_lock_key(client, name);
  if (!key) return key.error();
  const std::string& k = *key;
  const std::string what = "releasing lock '" + std::string(name) + "' on " + client.core()->where();
  if (owner.empty()) return Error(errc::invalid_argument, what + ": empty owner token");
  auto r = detail::run_admin_script(client, detail::scripts::mutex_release, {k, k + ":rel", k + ":waiters"},
                                    {std::string(owner), k + ":ch", std::to_string(release_marker_ms)}, what);
  if (!r) return r.error();
  if (!r->is_integer()) return Error(errc::protocol, what + ": unexpected reply " + r->to_string());
  if (r->integer() == 1 || r->integer() >= 3) return OwnedRelease::released;
  if (r->integer() == 2) return OwnedRelease::already_released;
  if (auto ok = check_is_mutex(client, k, what); !ok) return ok.error();
  return OwnedRelease::not_held;
}

Result<bool> extend_owned(Client& client, std::string_view name, std::string_view owner, milliseconds ttl) {
  auto key = detail::admin_lock_key(client, name);
  if (!key) return key.error();
  const std::string& k = *key;
  const std::string what = "extending lock '" + std::string(name) + "' on " + client.core()->where();
  if (owner.empty()) return Error(errc::invalid_argument, what + ": empty owner token");
  if (ttl.count() <= 0) return Error(errc::invalid_argument, what + ": the TTL must be positive");
  auto r = detail::run_admin_script(client, detail::scripts::mutex_renew, {k},
                                    {std::string(owner), std::to_string(ttl.count())}, what);
  if (!r) return r.error();
  if (!r->is_integer()) return Error(errc::protocol, what + ": unexpected reply " + r->to_string());
  if (r->integer() == 1) return true;
  if (auto ok = check_is_mutex(client, k, what); !ok) return ok.error();
  return false;
}

}  // namespace dlock
