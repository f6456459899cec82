// Running one script on every master of a Redlock at once, and deciding on a majority.
//
// Every node is reached through its own ClientCore, so the commands of one fan-out leave in
// parallel (one pipelined write per node, batched with that node's other traffic) and the
// total latency is that of the slowest node *needed* for a verdict, not the sum over nodes: a
// verdict is taken as soon as the replies so far decide it, and later replies are ignored.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock/reply.hpp"
#include "dlock/result.hpp"
#include "renewal/lease_record.hpp"
#include "scripts/script.hpp"

namespace dlock::detail {

class ClientCore;

// The masters of one Redlock. cores[0] hosts the watchdog of every Redlock lease.
struct RedlockNodes {
  std::vector<std::shared_ptr<ClientCore>> cores;

  std::size_t size() const noexcept { return cores.size(); }
  std::size_t quorum() const noexcept { return cores.size() / 2 + 1; }
  std::string display(std::size_t i) const;
};

// replies[i]: node i's reply, nullopt while it has not answered.
using NodeReplies = std::vector<std::optional<Result<Reply>>>;

// What a node's try whose outcome is unknown (connection error, timeout) leads to.
enum class Resend {
  no,             // the failure is the node's reply (acquisitions, fencing write-backs)
  while_unknown,  // releases: the node's first answer is its reply, and the release is sent to
                  // that node again once it is back (idempotent_call.hpp), even after the
                  // verdict was taken without it: otherwise its key sat out its TTL there
};

// fan_out(nodes, script, keys, args, decided, done, resend, on_answer)
//
// Any thread. Sends the script to every node at once. After each reply, `decided(replies)`
// says whether a verdict can be taken; the first time it does (at the latest when every node
// answered), `done(replies)` runs once, on the loop thread of the node that answered last.
// `on_answer(i, reply)`, when given, runs for every node's first answer, also after the verdict
// (before `done` for the node that decides it).
void fan_out(const RedlockNodes& nodes, const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args, std::function<bool(const NodeReplies&)> decided,
             std::function<void(NodeReplies)> done, Resend resend = Resend::no,
             std::function<void(std::size_t, const Result<Reply>&)> on_answer = {});

// "node 127.0.0.1:7001: connection refused; node ...": the failures among `replies`.
std::string describe_failures(const RedlockNodes& nodes, const NodeReplies& replies);

// The HoldFanout of Redlock leases: renew/release/extend on every node (a release is sent again
// to a node whose outcome is unknown, once it is back: Resend::while_unknown); the verdict is
//   1  when a majority answered >= 1 (renewed, set again, released, already released),
//   0  when so many answered 0 (held by another owner, or not ours) that no majority is left,
//   an error (connection...) otherwise: the watchdog retries it until the validity ends.
class QuorumFanout final : public HoldFanout {
 public:
  explicit QuorumFanout(RedlockNodes nodes) : nodes_(std::move(nodes)) {}
  void run(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args,
           ReplyHandler done) const override;
  void send_to_others(const Script& script, const std::vector<std::string>& keys,
                      const std::vector<std::string>& args) const override;
  // run(), with `on_answer(i, reply)` for every node's first answer (fan_out's).
  void run_watched(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                   ReplyHandler done, std::function<void(std::size_t, const Result<Reply>&)> on_answer) const;

 private:
  RedlockNodes nodes_;
};

}  // namespace dlock::detail
