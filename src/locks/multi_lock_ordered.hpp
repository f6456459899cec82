// The ordered MultiLock: for sets whose keys span Redis Cluster slots, where no single script
// can reach them all.
//
// The set is split into slot groups (keys of one slot; the names are sorted, and groups are
// ordered by their first name, the same order for every MultiLock). One try takes the groups
// one after the other, each with the atomic multi_acquire script. When a group is busy (or
// fails), every group this try took is released, and the try reports busy only after those
// releases were answered: a MultiLock never waits while holding a part of its set, so two
// MultiLocks over overlapping names cannot deadlock, whatever order their names were given in.
//
// A hold is one LeaseRecord per group ("parts": each renewed by the watchdog with its own
// group's scripts, each counted in Client::active_leases()) under one parent record, which the
// Lease holds: releasing, extending or measuring the Lease acts on every part, and the loss of
// any part loses the Lease (on_lost runs once) and releases the other parts at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "locks/acquire_op.hpp"

namespace dlock {
class MultiLock;
}

namespace dlock::detail {

class ClientCore;

struct OrderedMultiSpec {
  std::string name;  // "a,b,c": for messages and Lease::name()
  // The MultiLock's wait queue (<prefix>multi:{a}{b}...): a give-back announces itself with
  // "released <queue_key>" so that this queue's own waiter does not wake on it.
  std::string queue_key;
  // The lock keys of each slot group, in taking order.
  std::vector<std::vector<std::string>> groups;
  // Every lock key, sorted: the order of the request's channels (Attempt::busy_channel).
  std::vector<std::string> keys;
  // How each group's hold is renewed and released (multi_renew / multi_release on its keys).
  std::vector<std::shared_ptr<const HoldScripts>> holds;
  LeaseOptions lease;
};

// Splits sorted lock keys into slot groups, ordered by their first key.
std::vector<std::vector<std::string>> slot_groups(const std::vector<std::string>& sorted_keys);

// The renewal and release scripts of one group of Mutex-layout keys.
std::shared_ptr<const HoldScripts> multi_hold_scripts(const std::vector<std::string>& keys,
                                                      const std::string& client_id);

AttemptFn ordered_multi_attempt(std::shared_ptr<ClientCore> core, std::shared_ptr<const OrderedMultiSpec> spec);

// For tests: makes `m` take the ordered path even when one script could take its whole set
// (standalone servers have no slots), so the fallback is tested without a Cluster.
struct MultiLockAccess {
  static void force_ordered(MultiLock& m, bool on = true);
  static bool ordered(const MultiLock& m);
};

}  // namespace dlock::detail
