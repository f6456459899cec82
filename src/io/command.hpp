// A command ready to be written: its RESP encoding and who gets the reply.
#pragma once

#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/reply.hpp"
#include "dlock/result.hpp"

namespace dlock::detail {

using ReplyHandler = std::function<void(Result<Reply>)>;

struct Command {
  std::string payload;  // RESP-encoded, possibly several commands? no: exactly one
  ReplyHandler done;
};

// RESP-encodes one command (binary safe), with hiredis's formatter.
std::string format_command(std::span<const std::string_view> args);
std::string format_command(std::initializer_list<std::string_view> args);
std::string format_command(const std::vector<std::string>& args);

// Maps an error reply to a dlock error code: WRONGTYPE -> wrong_type; NOAUTH, NOPERM,
// WRONGPASS -> auth; script failures -> script; anything else -> server.
std::error_code classify_error_reply(const Reply& reply);

}  // namespace dlock::detail
