#include "locks/redlock_fanout.hpp"

#include <mutex>

#include "client_core.hpp"
#include "locks/idempotent_call.hpp"

namespace dlock::detail {

namespace scripts {
extern const Script redlock_release;
}

std::string RedlockNodes::display(std::size_t i) const { return cores[i]->where(); }

namespace {

struct FanState {
  std::mutex mu;
  NodeReplies replies;
  bool finished = false;
  std::function<bool(const NodeReplies&)> decided;
  std::function<void(NodeReplies)> done;
};

bool all_answered(const NodeReplies& replies) {
  for (const auto& r : replies) {
    if (!r) return false;
  }
  return true;
}

}  // namespace

void fan_out(const RedlockNodes& nodes, const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args, std::function<bool(const NodeReplies&)> decided,
             std::function<void(NodeReplies)> done, Resend resend,
             std::function<void(std::size_t, const Result<Reply>&)> on_answer) {
  auto st = std::make_shared<FanState>();
  st->replies.resize(nodes.size());
  st->decided = std::move(decided);
  st->done = std::move(done);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    ReplyHandler on_reply = [st, i, on_answer](Result<Reply> r) {
      if (on_answer) on_answer(i, r);
      NodeReplies snapshot;
      std::function<void(NodeReplies)> finish;
      {
        std::lock_guard lock(st->mu);
        if (st->finished) return;  // a verdict was taken without this node
        st->replies[i] = std::move(r);
        if (!st->decided(st->replies) && !all_answered(st->replies)) return;
        st->finished = true;
        snapshot = st->replies;
        finish = std::move(st->done);
      }
      finish(std::move(snapshot));  // outside the lock: it may start the next fan-out
    };
    const std::shared_ptr<ClientCore>& core = nodes.cores[i];
    if (resend == Resend::no) {
      core->eval(script, keys, args, std::move(on_reply));
      continue;
    }
    send_idempotent(
        core, [core, &script, keys, args](ReplyHandler answered) { core->eval(script, keys, args, std::move(answered)); },
        std::move(on_reply));
  }
}

std::string describe_failures(const RedlockNodes& nodes, const NodeReplies& replies) {
  std::string out;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    std::string why;
    if (!replies[i]) {
      why = "no reply yet";
    } else if (!replies[i]->ok()) {
      why = replies[i]->error().what();
    } else if ((*replies[i])->is_error()) {
      why = (*replies[i])->str();
    } else {
      continue;
    }
    if (!out.empty()) out += "; ";
    out += "node " + nodes.display(i) + ": " + why;
  }
  return out;
}

namespace {

enum class Vote { yes, no, failed, pending };

Vote vote_of(const std::optional<Result<Reply>>& r) {
  if (!r) return Vote::pending;
  if (!r->ok() || !(*r)->is_integer()) return Vote::failed;
  return (*r)->integer() >= 1 ? Vote::yes : Vote::no;
}

struct Tally {
  std::size_t yes = 0, no = 0, failed = 0, pending = 0;
  explicit Tally(const NodeReplies& replies) {
    for (const auto& r : replies) {
      switch (vote_of(r)) {
        case Vote::yes: ++yes; break;
        case Vote::no: ++no; break;
        case Vote::failed: ++failed; break;
        case Vote::pending: ++pending; break;
      }
    }
  }
};

}  // namespace

void QuorumFanout::run(const Script& script, const std::vector<std::string>& keys,
                       const std::vector<std::string>& args, ReplyHandler done) const {
  run_watched(script, keys, args, std::move(done), {});
}

void QuorumFanout::run_watched(const Script& script, const std::vector<std::string>& keys,
                               const std::vector<std::string>& args, ReplyHandler done,
                               std::function<void(std::size_t, const Result<Reply>&)> on_answer) const {
  const std::shared_ptr<ClientCore>& home = nodes_.cores.front();
  if (home->is_shut_down()) return done(Error(errc::shutdown, "client is shut down"));
  const std::size_t n = nodes_.size();
  const std::size_t q = nodes_.quorum();
  fan_out(
      nodes_, script, keys, args,
      [q](const NodeReplies& replies) {
        const Tally t(replies);
        return t.yes >= q || t.yes + t.pending < q;  // a majority has, or can no longer, say yes
      },
      [nodes = nodes_, home, n, q, done = std::move(done)](NodeReplies replies) {
        const Tally t(replies);
        Result<Reply> verdict = Reply::make_integer(1);
        if (t.yes < q) {
          if (t.no > n - q) {
            verdict = Reply::make_integer(0);
          } else {
            // Neither verdict is certain: some nodes could not be asked. The caller retries
            // (renewal) or reports the outcome as unknown (release).
            errc code = errc::connection;
            for (const auto& r : replies) {
              if (r && !r->ok()) {
                code = static_cast<errc>(r->code().value());
                break;
              }
            }
            verdict = Error(code, "only " + std::to_string(t.yes) + " of " + std::to_string(n) + " nodes answered, " +
                                      std::to_string(q) + " needed (" + describe_failures(nodes, replies) + ")");
          }
        }
        home->post([done, verdict = std::move(verdict)]() mutable { done(std::move(verdict)); });
      },
      &script == &scripts::redlock_release ? Resend::while_unknown : Resend::no, std::move(on_answer));
}

void QuorumFanout::send_to_others(const Script& script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args) const {
  // No verdict is awaited; each is sent again while its outcome is unknown, as every Redlock
  // release is (a node shut down meanwhile answers errc::shutdown, which ends that).
  const RedlockNodes others{{nodes_.cores.begin() + 1, nodes_.cores.end()}};
  fan_out(others, script, keys, args, [](const NodeReplies&) { return false; }, [](NodeReplies) {},
          Resend::while_unknown);
}

}  // namespace dlock::detail
