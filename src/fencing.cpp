#include "dlock/fencing.hpp"

#include "client_core.hpp"
#include "dlock/client.hpp"
#include "util/sync_wait.hpp"

namespace dlock {

Result<FencedWrite> fenced_set(Client& client, std::string_view key, std::string_view value, FencingToken token) {
  if (!token) return Error(errc::invalid_argument, "fenced_set: a fencing token must be non-zero");
  // The script compares tokens as Lua numbers (doubles): above 2^53 two tokens can compare
  // equal, and a stale writer's lower one would pass. dlock issues none that large.
  constexpr std::uint64_t max_exact = (std::uint64_t{1} << 53) - 1;
  if (token.value > max_exact) {
    return Error(errc::invalid_argument, "fenced_set: fencing token " + std::to_string(token.value) +
                                             " is above 2^53 - 1, the largest dlock issues and compares exactly");
  }
  auto& core = client.core();
  if (core->on_loop_thread()) return Error(errc::called_from_event_loop, "fenced_set() called on the event-loop thread");
  auto wait = std::make_shared<detail::SyncWait<Result<Reply>>>();
  core->eval(detail::scripts::fenced_set, {std::string(key)}, {std::string(value), std::to_string(token.value)},
             [wait](Result<Reply> r) { wait->set(std::move(r)); });
  Result<Reply> r = wait->wait(*core);
  const std::string where = "fenced write to '" + std::string(key) + "' on " + core->where();
  if (!r.ok()) return Error(r.code(), where + ": " + r.error().what());
  if (r->is_error()) return Error(detail::classify_error_reply(*r), where + ": " + r->str());
  if (!r->is_array() || r->size() != 2 || !(*r)[0].is_integer() || !(*r)[1].is_integer()) {
    return Error(errc::protocol, where + ": unexpected reply " + r->to_string());
  }
  return FencedWrite{(*r)[0].integer() == 1, FencingToken{static_cast<std::uint64_t>((*r)[1].integer())}};
}

Result<std::optional<std::string>> fenced_get(Client& client, std::string_view key) {
  auto r = client.command({"HGET", std::string(key), "value"});
  if (!r.ok()) return r.error();
  if (r->is_nil()) return std::optional<std::string>{};
  return std::optional<std::string>(r->str());
}

}  // namespace dlock
