// dlock::force_unlock: one script removes every hold of any kind and announces it
// (admin_force_unlock.lua).
#include "admin/admin_call.hpp"
#include "client_core.hpp"

namespace dlock {

namespace detail::scripts {
extern const Script admin_force_unlock;
}

Result<ForceUnlockResult> force_unlock(Client& client, std::string_view name) {
  auto key = detail::admin_lock_key(client, name);
  if (!key) return key.error();
  const std::string& k = *key;
  const std::string what = "force-unlocking lock '" + std::string(name) + "' on " + client.core()->where();
  auto r = detail::run_admin_script(client, detail::scripts::admin_force_unlock,
                                    {k, k + ":queue", k + ":readers", k + ":permits"}, {k + ":ch", k + ":ch:"}, what);
  if (!r) return r.error();
  const Reply& rep = *r;
  if (!rep.is_array() || rep.size() != 3 || !rep[0].is_string() || !rep[1].is_array()) {
    return Error(errc::protocol, what + ": unexpected reply " + rep.to_string());
  }
  ForceUnlockResult out;
  out.kind = detail::lock_kind_from(rep[0].str());
  for (const Reply& h : rep[1].elements()) {
    if (!h.is_array() || h.size() != 3 || !h[2].is_integer()) {
      return Error(errc::protocol, what + ": unexpected reply " + rep.to_string());
    }
    LockHolder holder;
    holder.owner = h[0].str();
    holder.mode = detail::holder_mode_from(h[1].str());
    holder.count = h[2].integer();
    out.removed.push_back(std::move(holder));
  }
  if (rep[2].is_string()) out.woken_head = rep[2].str();
  return out;
}

}  // namespace dlock
