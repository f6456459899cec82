#include "locks/redlock_attempt.hpp"

#include <algorithm>
#include <optional>

#include "client_core.hpp"
#include "io/command.hpp"
#include "locks/redlock_answers.hpp"

namespace dlock::detail::scripts {
extern const Script redlock_acquire;
extern const Script redlock_fence;
extern const Script redlock_release;
extern const Script redlock_renew;
}  // namespace dlock::detail::scripts

namespace dlock::detail {

namespace {

// How long each release marker (P{N}:rel) lives: as for Mutex.
constexpr milliseconds release_marker_ttl{30000};

enum class NodeVerdict { taken, busy, wrong_type, failed, pending };

NodeVerdict verdict_of(const Result<Reply>& r) {
  if (!r.ok()) return NodeVerdict::failed;
  const Reply& rep = r.value();
  // {-1, type, key}: a key other than the lock key (the fencing counter) holds no dlock value.
  if (!rep.is_array() || rep.size() < 2 || rep.size() > 3 || !rep[0].is_integer()) return NodeVerdict::failed;
  switch (rep[0].integer()) {
    case 1: return rep.size() == 2 && rep[1].is_integer() ? NodeVerdict::taken : NodeVerdict::failed;
    case 0: return rep.size() == 2 ? NodeVerdict::busy : NodeVerdict::failed;
    case -1: return NodeVerdict::wrong_type;
    default: return NodeVerdict::failed;
  }
}

NodeVerdict verdict_of(const std::optional<Result<Reply>>& r) { return r ? verdict_of(*r) : NodeVerdict::pending; }

// What a node's acquire did, for AcquireAnswers.
NodeAnswer answer_of(const Result<Reply>& r) {
  switch (verdict_of(r)) {
    case NodeVerdict::taken: return NodeAnswer::took_with(static_cast<std::uint64_t>(r.value()[1].integer()));
    case NodeVerdict::busy:
    case NodeVerdict::wrong_type: return NodeAnswer::took_nothing();
    case NodeVerdict::failed:
    case NodeVerdict::pending: break;
  }
  return NodeAnswer::not_known();
}

// A Redlock hold's scripts run on every node (QuorumFanout); its release also tells the try's
// AcquireAnswers where it took effect. The hold keeps the AcquireAnswers: a node that answered
// while the hold was releasing waits there for this release's answer, or, should none be sent,
// for the AcquireAnswers to end with the hold (redlock_answers.hpp).
class WatchedRelease final : public HoldFanout {
 public:
  WatchedRelease(std::shared_ptr<const QuorumFanout> all, std::shared_ptr<AcquireAnswers> answers)
      : all_(std::move(all)), answers_(std::move(answers)) {}

  void run(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args,
           ReplyHandler done) const override {
    if (&script != &scripts::redlock_release) return all_->run(script, keys, args, std::move(done));
    answers_->hold_release_sent();
    all_->run_watched(script, keys, args, std::move(done),
                      // Kept until every node answered: a node waiting for its answer is
                      // decided by it, not by the end of the AcquireAnswers.
                      [answers = answers_](std::size_t i, const Result<Reply>& r) {
                        answers->hold_released(i, took_effect(r));
                      });
  }
  // The shutdown's release (ClientCore::release_held): its answers reach no one here.
  void send_to_others(const Script& script, const std::vector<std::string>& keys,
                      const std::vector<std::string>& args) const override {
    all_->send_to_others(script, keys, args);
    if (&script == &scripts::redlock_release) answers_->hold_release_unheard();
  }

 private:
  // redlock_release.lua answered 1 (released) or 2 (released already): it ran after the acquire.
  static bool took_effect(const Result<Reply>& r) {
    return r.ok() && r->is_integer() && (r->integer() == 1 || r->integer() == 2);
  }

  std::shared_ptr<const QuorumFanout> all_;
  std::shared_ptr<AcquireAnswers> answers_;
};

// The token a node granted, if it did.
std::optional<std::uint64_t> granted_token(const Result<Reply>& r) {
  if (verdict_of(r) != NodeVerdict::taken) return std::nullopt;
  return static_cast<std::uint64_t>(r.value()[1].integer());
}

std::size_t count(const NodeReplies& replies, NodeVerdict v) {
  return static_cast<std::size_t>(
      std::count_if(replies.begin(), replies.end(), [v](const auto& r) { return verdict_of(r) == v; }));
}

std::string what(const RedlockSpec& spec) {
  return "Redlock '" + spec.name + "' on " + std::to_string(spec.nodes.size()) + " nodes";
}

// The try counts: check the validity left, then hand out a hold that the watchdog keeps alive.
void grant(const std::shared_ptr<const RedlockSpec>& spec, std::string owner, std::uint64_t token,
           BootClock::time_point sent, const std::shared_ptr<AcquireAnswers>& answers,
           const std::function<void(RedlockTry)>& report) {
  RedlockTry t;
  const LeaseTiming timing = LeaseTiming::from(spec->lease);
  const auto now = BootClock::now();
  if (now >= timing.validity_from(sent)) {
    answers->release();
    const auto took = std::chrono::duration_cast<milliseconds>(now - sent);
    t.error = Error(errc::timeout, "acquiring " + what(*spec) + " took " + std::to_string(took.count()) +
                                       " ms: no validity left of a " + std::to_string(spec->lease.ttl.count()) +
                                       " ms TTL (the TTL is too short for these nodes' latency)");
    return report(std::move(t));
  }
  const std::shared_ptr<ClientCore>& home = spec->nodes.cores.front();
  auto rec = std::make_shared<LeaseRecord>(home, spec->name, std::move(owner), FencingToken{token},
                                           redlock_hold(*spec, token, answers), spec->lease, sent);
  // A node whose acquire is still in flight, answering after this hold was let go, is
  // released then, unless the hold's release is known to have run after its acquire there
  // (its acquire may have landed after the hold's release: redlock_answers.hpp).
  answers->kept(hold_now_of(rec));
  // The watchdog lives on the first node's loop thread: schedule there, then hand over.
  home->post([rec, answers, report]() mutable {
    // The home Client is shut down (this runs after its loop ended, or after its shutdown
    // released the leases it held): a lease handed out now would be kept by nobody. A post
    // always runs (client_loop.cpp), so this one check covers a shutdown at any point before.
    if (rec->core->is_shut_down()) {
      answers->release();
      RedlockTry gone;
      gone.error = Error(errc::shutdown, "client is shut down");
      return report(std::move(gone));
    }
    rec->core->active_leases_.fetch_add(1);
    rec->core->renewals().add(rec);
    RedlockTry ok;
    ok.kind = RedlockTry::Kind::acquired;
    ok.lease = std::move(rec);
    report(std::move(ok));
  });
}

// A majority took the key but fewer than a majority's counters hold the chosen token: write it
// back to every node, and the try counts once a majority confirmed.
void write_back(const std::shared_ptr<const RedlockSpec>& spec, std::string owner, std::uint64_t token,
                BootClock::time_point sent, std::shared_ptr<AcquireAnswers> answers,
                std::function<void(RedlockTry)> report) {
  const std::size_t q = spec->nodes.quorum();
  auto confirmed = [](const NodeReplies& replies) {
    return static_cast<std::size_t>(std::count_if(replies.begin(), replies.end(), [](const auto& r) {
      return r && r->ok() && (*r)->is_integer() && (*r)->integer() == 1;
    }));
  };
  fan_out(
      spec->nodes, scripts::redlock_fence, {spec->key + ":fence"}, {std::to_string(token)},
      [q, confirmed](const NodeReplies& replies) {
        const auto pending = std::count_if(replies.begin(), replies.end(), [](const auto& r) { return !r; });
        return confirmed(replies) >= q || confirmed(replies) + static_cast<std::size_t>(pending) < q;
      },
      [spec, owner = std::move(owner), token, sent, q, confirmed, answers = std::move(answers),
       report = std::move(report)](NodeReplies replies) mutable {
        if (confirmed(replies) < q) {
          answers->release();
          // A node that answered 0 holds something else than a counter there (redlock_fence.lua).
          std::string detail = describe_failures(spec->nodes, replies);
          bool refused = false;
          for (std::size_t i = 0; i < replies.size(); ++i) {
            const auto& r = replies[i];
            if (!r || !r->ok() || !(*r)->is_integer() || (*r)->integer() != 0) continue;
            refused = true;
            detail += std::string(detail.empty() ? "" : "; ") + "node " + spec->nodes.display(i) + ": key '" +
                      spec->key + ":fence' holds no counter";
          }
          RedlockTry t;
          t.error = Error(refused ? errc::wrong_type : errc::connection,
                          "acquiring " + what(*spec) + ": the fencing token reached fewer than " + std::to_string(q) +
                              " nodes (" + detail + ")");
          return report(std::move(t));
        }
        grant(spec, std::move(owner), token, sent, answers, report);
      });
}

}  // namespace

std::shared_ptr<const HoldScripts> redlock_hold(const RedlockSpec& spec, std::uint64_t token,
                                                std::shared_ptr<AcquireAnswers> answers) {
  auto h = std::make_shared<HoldScripts>();
  h->renew = &scripts::redlock_renew;
  h->renew_keys = {spec.key, spec.key + ":rel", spec.key + ":fence"};
  h->renew_extra = {std::to_string(token)};
  h->release = &scripts::redlock_release;
  h->release_keys = {spec.key, spec.key + ":rel"};
  h->release_extra = {spec.key + ":ch", std::to_string(release_marker_ttl.count())};
  if (!answers) h->fanout = spec.fanout;
  else h->fanout = std::make_shared<const WatchedRelease>(spec.fanout, std::move(answers));
  return h;
}

void redlock_try(const std::shared_ptr<const RedlockSpec>& spec, std::function<void(RedlockTry)> report) {
  const std::size_t n = spec->nodes.size();
  const std::size_t q = spec->nodes.quorum();
  std::string owner = spec->nodes.cores.front()->new_owner_token();
  const auto sent = BootClock::now();
  const std::uint64_t hint = spec->max_token->load();
  // Per node, once its acquire was answered: the try's cleanup should it fail, and the fencing
  // catch-up should it count without a write-back round (redlock_answers.hpp).
  auto answers = std::make_shared<AcquireAnswers>(
      n,
      [spec, owner](std::size_t i) {
        fan_out(RedlockNodes{{spec->nodes.cores[i]}}, scripts::redlock_release, {spec->key, spec->key + ":rel"},
                {owner, spec->key + ":ch", std::to_string(release_marker_ttl.count())},
                [](const NodeReplies&) { return false; }, [](NodeReplies) {}, Resend::while_unknown);
      },
      [spec](std::size_t i, std::uint64_t token) {
        fan_out(RedlockNodes{{spec->nodes.cores[i]}}, scripts::redlock_fence, {spec->key + ":fence"},
                {std::to_string(token)}, [](const NodeReplies&) { return false; }, [](NodeReplies) {});
      });
  fan_out(
      spec->nodes, scripts::redlock_acquire, {spec->key, spec->key + ":fence", spec->key + ":rel"},
      {owner, std::to_string(spec->lease.ttl.count()), std::to_string(hint)},
      [q](const NodeReplies& replies) {
        const std::size_t taken = count(replies, NodeVerdict::taken);
        return taken >= q || taken + count(replies, NodeVerdict::pending) < q;
      },
      [spec, owner, sent, n, q, answers, report = std::move(report)](NodeReplies replies) mutable {
        if (count(replies, NodeVerdict::taken) >= q) {
          // The token: the maximum over the nodes that granted the lock.
          std::uint64_t token = 0;
          for (const auto& r : replies) {
            if (r) token = std::max(token, granted_token(*r).value_or(0));
          }
          std::uint64_t seen = spec->max_token->load();
          while (seen < token && !spec->max_token->compare_exchange_weak(seen, token)) {
          }
          // Each granting node's counter now IS the token it answered. When a majority answered
          // the maximum, a majority knows the token already, which is all the awaited write-back
          // establishes (any later majority meets one of them): the try counts at once, a round
          // trip less. That is the usual case, as a node raises its counter by one per grant (a
          // split vote's too): counters part only when nodes grant different numbers of times
          // (one was down or busy, or saw a higher hint). The nodes behind get the token anyway,
          // unawaited (AcquireAnswers::catch_up).
          const auto at_max = std::count_if(replies.begin(), replies.end(),
                                            [token](const auto& r) { return r && granted_token(*r) == token; });
          if (static_cast<std::size_t>(at_max) >= q) {
            answers->catch_up(token);
            return grant(spec, std::move(owner), token, sent, answers, report);
          }
          return write_back(spec, std::move(owner), token, sent, std::move(answers), std::move(report));
        }
        // No majority: undo what this try took, everywhere (a node that has not answered yet
        // as soon as it does: AcquireAnswers).
        answers->release();
        RedlockTry t;
        const std::size_t failed = count(replies, NodeVerdict::failed);
        const std::size_t wrong = count(replies, NodeVerdict::wrong_type);
        if (failed + wrong > n - q) {
          errc code = wrong > 0 ? errc::wrong_type : errc::connection;
          std::string detail = describe_failures(spec->nodes, replies);
          for (std::size_t i = 0; i < n; ++i) {
            const auto v = verdict_of(replies[i]);
            if (v == NodeVerdict::failed && wrong == 0 && replies[i] && !replies[i]->ok()) {
              code = static_cast<errc>(replies[i]->code().value());
              break;
            }
            // An error reply (NOPERM, OOM, a script error) is the server's answer, not a lost
            // connection: its own code (auth, server...), as for the single-server kinds.
            if (v == NodeVerdict::failed && wrong == 0 && replies[i] && replies[i]->value().is_error()) {
              code = static_cast<errc>(classify_error_reply(replies[i]->value()).value());
              break;
            }
            if (v == NodeVerdict::wrong_type) {
              if (!detail.empty()) detail += "; ";
              const Reply& rep = replies[i]->value();
              const std::string& bad_key = rep.size() == 3 && rep[2].is_string() ? rep[2].str() : spec->key;
              detail += "node " + spec->nodes.display(i) + ": key '" + bad_key + "' holds a " + rep[1].str();
            }
          }
          t.error = Error(code, "acquiring " + what(*spec) + ": " + std::to_string(failed + wrong) + " of " +
                                    std::to_string(n) + " nodes failed, so no majority of " + std::to_string(q) +
                                    " can be reached (" + detail + ")");
          return report(std::move(t));
        }
        t.kind = RedlockTry::Kind::busy;
        for (const auto& r : replies) {
          if (verdict_of(r) != NodeVerdict::busy) continue;
          const long long pttl = r->value()[1].integer();
          if (pttl >= 0 && (!t.holder_ttl || milliseconds(pttl) < *t.holder_ttl)) t.holder_ttl = milliseconds(pttl);
        }
        // Taken on some nodes but not a majority: a split vote with another contender.
        t.split = count(replies, NodeVerdict::taken) > 0;
        report(std::move(t));
      },
      Resend::no, [answers](std::size_t i, const Result<Reply>& r) { answers->answered(i, answer_of(r)); });
}

}  // namespace dlock::detail
