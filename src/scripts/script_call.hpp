// Encoding script calls: EVALSHA first, and the one EVAL fallback after NOSCRIPT (the server
// lost its script cache: SCRIPT FLUSH, a restart, a failover to a replica that never saw it).
#pragma once

#include <charconv>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/command.hpp"
#include "scripts/script.hpp"

namespace dlock::detail {

// EVALSHA of `s`, its keys and arguments given by visitors, written without building a list:
// keys(f) and args(f) call f(head, tail) once for each, in order, where the key or argument is
// `head` followed by `tail` (a lock's key and a suffix: KeyLayout). Each visitor is called twice
// (sizes, then bytes) and must give the same sequence both times. Only the payload is allocated:
// every lock operation's command is built here.
template <class Keys, class Args>
std::string encode_evalsha_with(const Script& s, const Keys& keys, const Args& args) {
  std::size_t nkeys = 0;
  std::size_t nargs = 0;
  std::size_t bytes = 0;
  keys([&](std::string_view head, std::string_view tail) {
    ++nkeys;
    bytes += RespWriter::bulk_size(head.size() + tail.size());
  });
  args([&](std::string_view head, std::string_view tail) {
    ++nargs;
    bytes += RespWriter::bulk_size(head.size() + tail.size());
  });
  char numkeys_buf[20];
  const std::string_view numkeys(
      numkeys_buf, static_cast<std::size_t>(std::to_chars(numkeys_buf, numkeys_buf + sizeof numkeys_buf, nkeys).ptr -
                                            numkeys_buf));
  const std::string_view sha1 = s.sha1;
  bytes += RespWriter::bulk_size(7) + RespWriter::bulk_size(sha1.size()) + RespWriter::bulk_size(numkeys.size());
  RespWriter w(3 + nkeys + nargs, bytes);
  w.bulk("EVALSHA");
  w.bulk(sha1);
  w.bulk(numkeys);
  auto write = [&w](std::string_view head, std::string_view tail) { w.bulk(head, tail); };
  keys(write);
  args(write);
  return std::move(w).take();
}

std::string encode_evalsha(const Script& s, std::span<const std::string_view> keys,
                           std::span<const std::string_view> args);
std::string encode_evalsha(const Script& s, const std::vector<std::string>& keys,
                           const std::vector<std::string>& args);
// The same call as EVAL with the source, derived from an EVALSHA encoding.
std::string evalsha_to_eval(const Script& s, const std::string& evalsha_payload);
// The ACL refused EVAL. A script's first use on a connection is an EVAL (Command::script); a
// deployment that allows only EVALSHA of scripts an operator loaded (SCRIPT LOAD, a hardening
// some run) gets that use again as EVALSHA, and the connection sends EVALSHA from then on.
bool eval_refused(const Reply& r);

}  // namespace dlock::detail
