// dlock::inspect: one read-only script takes a consistent snapshot of every key of the name's
// layout (admin_inspect.lua); PUBSUB NUMSUB adds the channel's subscribers (not callable from a
// script).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "admin/admin_call.hpp"
#include "client_core.hpp"
#include "io/command.hpp"
#include "util/sync_wait.hpp"

namespace dlock {

namespace detail::scripts {
extern const Script admin_inspect;
}

namespace {

using std::chrono::milliseconds;

std::optional<std::uint64_t> unsigned_of(const Reply& r) {
  auto v = r.as_integer();
  if (!v || *v < 0) return std::nullopt;
  return static_cast<std::uint64_t>(*v);
}

// A value someone wrote by hand, for a terminal: quoted, bytes outside printable ASCII escaped
// (\xNN), and cut after 40 of them.
std::string quoted(std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == 40) {
      out += "...(" + std::to_string(text.size()) + " bytes)";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + "'";
}

Error malformed(const std::string& what, const Reply& r) {
  return Error(errc::protocol, what + ": unexpected reply " + r.to_string());
}

// Parses admin_inspect.lua's reply for `name`.
Result<LockInfo> parse_info(std::string_view name, const std::string& key, const Reply& rep, const std::string& what) {
  if (!rep.is_array() || rep.size() != 8 || !rep[0].is_string() || !rep[2].is_integer() || !rep[6].is_array() ||
      !rep[7].is_array()) {
    return malformed(what, rep);
  }
  LockInfo info;
  info.name = std::string(name);
  info.key = key;
  info.kind = detail::lock_kind_from(rep[0].str());
  info.redis_type = rep[1].str();
  if (rep[2].integer() >= 0) info.key_ttl = milliseconds(rep[2].integer());
  if (rep[3].is_string()) {
    // As the scripts take a counter (src/scripts/include/counter_of.lua): a decimal whole number
    // up to the last token, 2^53 - 1.
    const std::string& text = rep[3].str();
    const bool digits = !text.empty() && text.size() <= 16 && (text == "0" || text[0] != '0') &&
                        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    const auto v = digits ? unsigned_of(rep[3]) : std::nullopt;
    constexpr std::uint64_t last_token = (std::uint64_t{1} << 53) - 1;
    if (!v || *v > last_token) {
      info.fencing_counter_fault = quoted(text);
    } else {
      info.fencing_counter = v;
      // Readers still take the last token; nothing that counts can follow it.
      if (*v == last_token) info.fencing_counter_fault = quoted(text) + " (the last token)";
    }
  } else if (rep[3].is_array() && rep[3].size() == 1 && rep[3][0].is_string()) {
    info.fencing_counter_fault = "a " + rep[3][0].str();
  }
  if (rep[4].is_string()) info.permits_limit = rep[4].as_integer();
  if (rep[5].is_string()) info.value = rep[5].str();
  for (const Reply& h : rep[6].elements()) {
    if (!h.is_array() || h.size() != 5 || !h[2].is_integer() || !h[3].is_integer()) return malformed(what, rep);
    LockHolder holder;
    holder.owner = h[0].str();
    holder.mode = detail::holder_mode_from(h[1].str());
    if (h[2].integer() >= 0) holder.ttl = milliseconds(h[2].integer());
    holder.count = h[3].integer();
    if (h[4].is_string()) holder.token = unsigned_of(h[4]);
    info.holders.push_back(std::move(holder));
  }
  for (const Reply& w : rep[7].elements()) {
    if (!w.is_array() || w.size() != 3 || !w[2].is_integer()) return malformed(what, rep);
    LockWaiter waiter;
    waiter.id = w[0].str();
    const std::string role = w[1].str();
    waiter.role = role == "writer_intent" ? LockWaiter::Role::writer_intent
                  : role == "roll"        ? LockWaiter::Role::roll
                                          : LockWaiter::Role::fair_queue;
    waiter.ttl = milliseconds(w[2].integer());
    info.waiters.push_back(std::move(waiter));
  }
  return info;
}

// One inspection of several names: the replies, filled on the loop thread; the last one to come
// finishes it and calls `done` (outside the lock: `done` may start another inspection).
struct Batch {
  std::mutex mu;
  std::vector<std::string> names;
  std::vector<std::string> keys;
  std::string address;  // for messages
  std::vector<std::optional<Result<Reply>>> scripts;
  std::vector<std::optional<Result<Reply>>> numsubs;
  std::size_t left = 0;
  std::function<void(Result<std::vector<LockInfo>>)> done;

  void set(std::vector<std::optional<Result<Reply>>>& slot, std::size_t i, Result<Reply> r) {
    {
      std::lock_guard lock(mu);
      slot[i].emplace(std::move(r));
      if (--left != 0) return;
    }
    std::exchange(done, {})(finish());
  }

  Result<std::vector<LockInfo>> finish() {
    std::vector<LockInfo> out;
    out.reserve(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string what = "inspecting lock '" + names[i] + "' on " + address;
      Result<Reply>& r = *scripts[i];
      if (!r.ok()) return Error(r.code(), what + ": " + r.error().what());
      if (r->is_error()) return Error(detail::admin_error_code(*r), what + ": " + r->str());
      auto info = parse_info(names[i], keys[i], *r, what);
      if (!info) return info.error();
      Result<Reply>& subs = *numsubs[i];
      if (!subs.ok()) return Error(subs.code(), what + ": " + subs.error().what());
      if (subs->is_array() && subs->size() == 2) info->subscribers = (*subs)[1].as_integer().value_or(0);
      out.push_back(std::move(*info));
    }
    return out;
  }
};

// Sends every script and PUBSUB NUMSUB at once (they share the connection's writes); `done` runs
// once: on the loop thread with the answers, or at once on this thread for a bad name or a
// client that is shut down.
void start_inspect(Client& client, std::vector<std::string> names, std::function<void(Result<std::vector<LockInfo>>)> done) {
  const auto& core = client.core();
  if (core->is_shut_down()) return done(Error(errc::shutdown, "inspect(): the client is shut down"));
  auto batch = std::make_shared<Batch>();
  batch->keys.reserve(names.size());
  for (const auto& name : names) {
    auto key = detail::admin_lock_key(client, name);
    if (!key) return done(key.error());
    batch->keys.push_back(std::move(*key));
  }
  batch->names = std::move(names);
  batch->address = client.core()->where();
  batch->scripts.resize(batch->names.size());
  batch->numsubs.resize(batch->names.size());
  batch->left = 2 * batch->names.size();
  batch->done = std::move(done);
  if (batch->left == 0) return std::exchange(batch->done, {})(std::vector<LockInfo>{});
  // Read only from here on (finish() reads them too, on the loop thread).
  for (std::size_t i = 0; i < batch->keys.size(); ++i) {
    const std::string& k = batch->keys[i];
    core->eval(detail::scripts::admin_inspect,
               {k, k + ":fence", k + ":queue", k + ":timeouts", k + ":readers", k + ":wintent", k + ":permits",
                k + ":limit", k + ":waiters"},
               {}, [batch, i](Result<Reply> r) { batch->set(batch->scripts, i, std::move(r)); });
    // On Cluster, waiters subscribe with SSUBSCRIBE on the shard of the lock's slot.
    client.async_command({"PUBSUB", core->cluster_mode() ? "SHARDNUMSUB" : "NUMSUB", k + ":ch"},
                         [batch, i](Result<Reply> r) { batch->set(batch->numsubs, i, std::move(r)); });
  }
}

}  // namespace

Result<std::vector<LockInfo>> inspect(Client& client, const std::vector<std::string>& names) {
  const auto& core = client.core();
  if (core->on_loop_thread()) return Error(errc::called_from_event_loop, "inspect() called on the client's event-loop thread");
  auto wait = std::make_shared<detail::SyncWait<Result<std::vector<LockInfo>>>>();
  start_inspect(client, names, [wait](Result<std::vector<LockInfo>> r) { wait->set(std::move(r)); });
  return wait->wait(*core);
}

Result<LockInfo> inspect(Client& client, std::string_view name) {
  auto all = inspect(client, std::vector<std::string>{std::string(name)});
  if (!all) return all.error();
  return std::move(all->front());
}

void async_inspect(Client& client, std::string_view name, std::function<void(Result<LockInfo>)> done) {
  start_inspect(client, {std::string(name)}, [done = std::move(done)](Result<std::vector<LockInfo>> all) {
    if (!all) return done(all.error());
    done(std::move(all->front()));
  });
}

}  // namespace dlock
