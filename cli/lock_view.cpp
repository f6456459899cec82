#include "lock_view.hpp"

#include <charconv>

namespace dlock::cli {

using std::chrono::milliseconds;

std::string shown(std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c > 0x7e) return Json::quote(text);
  }
  return std::string(text);
}

const char* state_name(const dlock::LockInfo& info) {
  if (info.held()) return "held";
  return info.kind == dlock::LockKind::foreign ? "foreign" : "free";
}

std::string kind_name(const dlock::LockInfo& info) {
  if (info.kind == dlock::LockKind::foreign) return info.redis_type;
  return std::string(dlock::to_string(info.kind));
}

const char* mode_name(dlock::LockHolder::Mode mode) {
  switch (mode) {
    case dlock::LockHolder::Mode::read: return "read";
    case dlock::LockHolder::Mode::write: return "write";
    case dlock::LockHolder::Mode::permits: return "permits";
    case dlock::LockHolder::Mode::exclusive: break;
  }
  return "exclusive";
}

std::optional<OwnerInfo> holder_info(const std::string& owner) {
  if (auto info = parse_owner_token(owner)) return info;
  // "<client id>:<owner>@<host>:<pid>" (ReentrantMutex): the part after the last '@'.
  const auto at = owner.rfind('@');
  if (at == std::string::npos) return std::nullopt;
  const std::string_view rest = std::string_view(owner).substr(at + 1);
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  OwnerInfo info;
  info.host = std::string(rest.substr(0, colon));
  // Printed as is (status, list): a host with control characters is no host, but foreign data.
  for (unsigned char c : info.host) {
    if (c <= 0x20 || c > 0x7e) return std::nullopt;
  }
  const std::string_view pid = rest.substr(colon + 1);
  auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), info.pid);
  if (ec != std::errc() || end != pid.data() + pid.size() || pid.empty()) return std::nullopt;
  return info;
}

std::string ttl_text(const std::optional<milliseconds>& ttl) {
  if (!ttl) return "never";
  return ttl->count() > 0 ? human_duration(ttl->count()) : "-";
}

void json_holder_info(Json& j, const std::optional<OwnerInfo>& info) {
  if (!info) {
    j.null();
    return;
  }
  j.begin_object().field("host", info->host).field("pid", info->pid);
  j.key("since_unix_ms").opt_num(info->since_unix_ms);
  j.end_object();
}

void json_holder(Json& j, const dlock::LockHolder& h) {
  j.begin_object().field("owner", h.owner).field("mode", mode_name(h.mode));
  j.key("ttl_ms").opt_num(h.ttl ? std::optional<long long>(h.ttl->count()) : std::nullopt);
  j.field("count", h.count);
  j.key("token");
  if (h.token) j.num(*h.token);
  else j.null();
  j.key("holder");
  json_holder_info(j, holder_info(h.owner));
  j.end_object();
}

long long waiter_count(const dlock::LockInfo& info) {
  long long live = 0;
  // A Mutex's roll lists waiting Clients, which are subscribers too: not counted twice.
  for (const auto& w : info.waiters) live += w.ttl.count() > 0 && w.role != dlock::LockWaiter::Role::roll ? 1 : 0;
  if (info.kind == dlock::LockKind::fair) return live;
  return live + info.subscribers;
}

void json_lock_members(Json& j, const dlock::LockInfo& info) {
  j.field("name", info.name).field("key", info.key).field("state", state_name(info));
  j.field("kind", kind_name(info));
  // The first holder, as single-holder kinds (mutex, fair, reentrant, writer) report it.
  const dlock::LockHolder* first = info.holders.empty() ? nullptr : &info.holders.front();
  j.key("owner").opt_str(first ? std::optional<std::string>(first->owner) : std::nullopt);
  j.key("holder");
  json_holder_info(j, first ? holder_info(first->owner) : std::nullopt);
  j.key("ttl_ms").opt_num(info.key_ttl ? std::optional<long long>(info.key_ttl->count())
                                       : info.held() || info.kind == dlock::LockKind::foreign
                                             ? std::optional<long long>(-1)
                                             : std::nullopt);
  j.key("fencing_counter");
  if (info.fencing_counter) j.num(*info.fencing_counter);
  else j.null();
  j.key("fencing_counter_fault").opt_str(info.fencing_counter_fault);
  j.key("holders").begin_array();
  for (const auto& h : info.holders) json_holder(j, h);
  j.end_array();
  j.key("queue").begin_array();
  for (const auto& w : info.waiters) {
    j.begin_object().field("id", w.id);
    j.field("role", w.role == dlock::LockWaiter::Role::writer_intent ? "writer_intent"
                    : w.role == dlock::LockWaiter::Role::roll        ? "roll"
                                                                     : "fair_queue");
    j.field("ttl_ms", static_cast<long long>(w.ttl.count())).end_object();
  }
  j.end_array();
  j.field("waiters", waiter_count(info)).field("subscribers", info.subscribers);
  j.key("permits_limit").opt_num(info.permits_limit);
}

}  // namespace dlock::cli
