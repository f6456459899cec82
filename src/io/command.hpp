// A command ready to be written: its RESP encoding and who gets the reply.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/reply.hpp"
#include "dlock/result.hpp"

namespace dlock::detail {

struct Script;

using ReplyHandler = std::function<void(Result<Reply>)>;

struct Command {
  std::string payload;  // RESP-encoded, exactly one command
  ReplyHandler done;
  // How long the reply may take once written; zero: ClientOptions::command_timeout. Only for
  // a command the server legitimately holds back: WAIT blocks for up to its own timeout, and
  // under the plain command_timeout a WAIT longer than that closed its connection as stuck
  // (errc::timeout) while the server was still waiting, instead of answering not_replicated.
  std::chrono::milliseconds timeout{0};
  // Set when `payload` is an EVALSHA of this script. The first time a connection sends it (on
  // each new TCP connection: possibly a new or restarted server), it goes as EVAL with the
  // source instead (Connection::enqueue_write). Why: after NOSCRIPT the EVAL fallback is sent
  // only once that reply is read, so commands sent meanwhile ran before it, and dlock relies on
  // a connection keeping its commands' order (a give-back queued behind the acquisition it
  // undoes: a Redlock node whose acquisition ran after its give-back kept the key until its TTL).
  // A NOSCRIPT answer (SCRIPT FLUSH during the connection's life) starts the first uses over.
  const Script* script = nullptr;
};

// Writes one RESP command (an array of bulk strings, binary safe) into a string allocated once:
//   RespWriter w(count, sum of bulk_size(arg.size()) over the arguments);
//   w.bulk(arg) for each of the `count` arguments; std::move(w).take()
// The sizes given must be those of the arguments then written: they are not checked as it writes.
class RespWriter {
 public:
  static std::size_t bulk_size(std::size_t len) noexcept;
  RespWriter(std::size_t count, std::size_t bulk_bytes);
  void bulk(std::string_view arg) noexcept;
  // One bulk string: `head` followed by `tail` (counted as bulk_size(head.size() + tail.size())).
  void bulk(std::string_view head, std::string_view tail) noexcept;
  std::string take() &&;

 private:
  std::string out_;
  char* at_ = nullptr;
};

// RESP-encodes one command (binary safe).
std::string format_command(std::span<const std::string_view> args);
std::string format_command(std::initializer_list<std::string_view> args);
std::string format_command(const std::vector<std::string>& args);

// Maps an error reply to a dlock error code: WRONGTYPE -> wrong_type; NOAUTH, NOPERM,
// WRONGPASS -> auth; script failures -> script; anything else -> server.
std::error_code classify_error_reply(const Reply& reply);

// True for an error reply with which the server refused a command before running any of it
// (READONLY, LOADING, MASTERDOWN, BUSY, NOSCRIPT, NOAUTH, CLUSTERDOWN, TRYAGAIN, MOVED, ASK,
// CROSSSLOT): a script so refused wrote nothing. False for anything else, a script's own
// runtime error included (it may have written before it failed).
bool refused_before_running(const Reply& reply);

}  // namespace dlock::detail
