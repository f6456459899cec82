// Unit tests for encode_evalsha / evalsha_to_eval (src/scripts/script_call.hpp): the EVALSHA
// payload, and the EVAL fallback derived from it, byte for byte against format_command.
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/reply.hpp"
#include "io/command.hpp"
#include "io/resp_reader.hpp"
#include "scripts/script.hpp"
#include "scripts/script_call.hpp"

namespace {

using dlock::detail::encode_evalsha;
using dlock::detail::evalsha_to_eval;
using dlock::detail::format_command;
using dlock::detail::Script;

constexpr const char* kSha = "0123456789abcdef0123456789abcdef01234567";
// A source with CRLF, a "$" line that looks like RESP, and non-ASCII / binary bytes (no NUL:
// the source is a C string).
constexpr const char* kSource =
    "-- test script\r\n"
    "local k = KEYS[1]\r\n"
    "$40\r\n"
    "return redis.call('GET', k) .. '\xc3\xa9\x01\x7f\xff'\n";

const Script kScript{"test_script", kSource, kSha};

std::vector<std::string_view> views(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

// What the command must be: format_command over the full argument list.
std::string expected(std::string_view verb, std::string_view first, const std::vector<std::string>& keys,
                     const std::vector<std::string>& args) {
  std::vector<std::string> argv{std::string(verb), std::string(first), std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return format_command(argv);
}

void check_call(const Script& s, const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  const std::string sha_payload = encode_evalsha(s, keys, args);
  EXPECT_EQ(sha_payload, expected("EVALSHA", s.sha1, keys, args));

  const auto kv = views(keys);
  const auto av = views(args);
  EXPECT_EQ(encode_evalsha(s, std::span<const std::string_view>(kv), std::span<const std::string_view>(av)),
            sha_payload);

  const std::string eval_payload = evalsha_to_eval(s, sha_payload);
  EXPECT_EQ(eval_payload, expected("EVAL", s.source, keys, args));
}

TEST(ScriptCall, EvalshaNoKeysNoArgsExactBytes) {
  EXPECT_EQ(encode_evalsha(kScript, std::vector<std::string>{}, std::vector<std::string>{}),
            "*3\r\n$7\r\nEVALSHA\r\n$40\r\n0123456789abcdef0123456789abcdef01234567\r\n$1\r\n0\r\n");
}

TEST(ScriptCall, EvalNoKeysNoArgsExactBytes) {
  const Script s{"tiny", "return 1", kSha};
  const std::string sha = encode_evalsha(s, std::vector<std::string>{}, std::vector<std::string>{});
  EXPECT_EQ(evalsha_to_eval(s, sha), "*3\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n0\r\n");
}

TEST(ScriptCall, NoKeysNoArgs) { check_call(kScript, {}, {}); }

TEST(ScriptCall, OneKeyTwoArgs) { check_call(kScript, {"dlock:{orders}"}, {"owner-token-1", "30000"}); }

TEST(ScriptCall, KeysOnly) { check_call(kScript, {"a", "b", "c"}, {}); }

TEST(ScriptCall, ArgsOnly) { check_call(kScript, {}, {"x", "y"}); }

TEST(ScriptCall, BinaryAndEmptyArguments) {
  const std::string bin("\0\r\n$40\r\n\xff", 9);
  check_call(kScript, {bin, ""}, {"", bin, std::string(1, '\0'), "*3\r\n"});
}

TEST(ScriptCall, TwoDigitArgumentCountAndNumkeys) {
  // 3 + 10 keys + 5 args = 18 arguments: "*18" header, numkeys "10".
  std::vector<std::string> keys;
  std::vector<std::string> args;
  for (int i = 0; i < 10; ++i) keys.push_back("key:" + std::to_string(i));
  for (int i = 0; i < 5; ++i) args.push_back("arg" + std::to_string(i));
  check_call(kScript, keys, args);
  const std::string payload = encode_evalsha(kScript, keys, args);
  EXPECT_EQ(payload.substr(0, 5), "*18\r\n");
  EXPECT_NE(payload.find("\r\n$2\r\n10\r\n"), std::string::npos);
}

TEST(ScriptCall, ThreeDigitArgumentCount) {
  std::vector<std::string> args;
  for (int i = 0; i < 120; ++i) args.push_back(std::to_string(i));
  check_call(kScript, {"k"}, args);
}

TEST(ScriptCall, LargeArgument) {
  check_call(kScript, {"k"}, {std::string(100000, 'v')});
}

TEST(ScriptCall, LongSource) {
  const std::string source = "-- " + std::string(70000, '-') + "\nreturn 1\n";
  const Script s{"long", source.c_str(), kSha};
  check_call(s, {"k1", "k2"}, {"a"});
}

TEST(ScriptCall, EvalPayloadParsesAsTheSameCommand) {
  const std::vector<std::string> keys{"dlock:{x}"};
  const std::vector<std::string> args{"tok", "1500"};
  const std::string eval = evalsha_to_eval(kScript, encode_evalsha(kScript, keys, args));
  // A command is an array of bulk strings, which the reply parser reads back just the same.
  dlock::detail::RespReader reader;
  ASSERT_TRUE(reader.feed(eval.data(), eval.size()).ok());
  auto n = reader.next();
  ASSERT_TRUE(n.ok());
  ASSERT_TRUE(n.value().has_value());
  const dlock::Reply& r = *n.value();
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0].str(), "EVAL");
  EXPECT_EQ(r[1].str(), kSource);
  EXPECT_EQ(r[2].str(), "1");
  EXPECT_EQ(r[3].str(), "dlock:{x}");
  EXPECT_EQ(r[4].str(), "tok");
  EXPECT_EQ(r[5].str(), "1500");
  auto rest = reader.next();
  ASSERT_TRUE(rest.ok());
  EXPECT_FALSE(rest.value().has_value());
}

TEST(ScriptCall, EmbeddedScriptsHaveHexShaAndRoundTrip) {
  namespace s = dlock::detail::scripts;
  for (const Script* sc : {&s::mutex_acquire, &s::mutex_release, &s::mutex_renew, &s::fenced_set}) {
    ASSERT_NE(sc->sha1, nullptr);
    ASSERT_NE(sc->source, nullptr);
    ASSERT_NE(sc->name, nullptr);
    const std::string sha = sc->sha1;
    EXPECT_EQ(sha.size(), 40u) << sc->name;
    EXPECT_EQ(sha.find_first_not_of("0123456789abcdef"), std::string::npos) << sc->name;
    EXPECT_GT(std::strlen(sc->source), 0u) << sc->name;
    check_call(*sc, {"dlock:{n}", "dlock:{n}:ch"}, {"owner", "30000"});
  }
}

}  // namespace
