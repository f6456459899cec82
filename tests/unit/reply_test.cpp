// Unit tests for dlock::Reply (include/dlock/reply.hpp, src/io/reply.cpp) and
// classify_error_reply (src/io/command.hpp).
#include <gtest/gtest.h>

#include <climits>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "io/command.hpp"

namespace {

using dlock::Reply;
using dlock::detail::classify_error_reply;
using Type = dlock::Reply::Type;

// ---- construction ----------------------------------------------------------------------------

TEST(Reply, DefaultIsNil) {
  const Reply r;
  EXPECT_EQ(r.type(), Type::nil);
  EXPECT_TRUE(r.is_nil());
  EXPECT_FALSE(r.is_error());
  EXPECT_FALSE(r.is_integer());
  EXPECT_FALSE(r.is_string());
  EXPECT_FALSE(r.is_status());
  EXPECT_FALSE(r.is_array());
  EXPECT_EQ(r.str(), "");
  EXPECT_EQ(r.size(), 0u);
}

TEST(Reply, FactoriesSetTypeAndValue) {
  EXPECT_EQ(Reply::make_nil().type(), Type::nil);
  const Reply st = Reply::make_status("OK");
  EXPECT_TRUE(st.is_status());
  EXPECT_EQ(st.str(), "OK");
  const Reply er = Reply::make_error("ERR x");
  EXPECT_TRUE(er.is_error());
  EXPECT_EQ(er.str(), "ERR x");
  const Reply in = Reply::make_integer(-5);
  EXPECT_TRUE(in.is_integer());
  EXPECT_EQ(in.integer(), -5);
  const Reply s = Reply::make_string("v");
  EXPECT_TRUE(s.is_string());
  EXPECT_EQ(s.str(), "v");
  const Reply a = Reply::make_array({Reply::make_integer(1), Reply::make_string("b")});
  EXPECT_TRUE(a.is_array());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].integer(), 1);
  EXPECT_EQ(a[1].str(), "b");
  EXPECT_THROW((void)a[2], std::out_of_range);
}

// ---- as_integer ------------------------------------------------------------------------------

TEST(ReplyAsInteger, IntegerReply) {
  EXPECT_EQ(Reply::make_integer(42).as_integer(), std::optional<long long>(42));
  EXPECT_EQ(Reply::make_integer(0).as_integer(), std::optional<long long>(0));
  EXPECT_EQ(Reply::make_integer(-1).as_integer(), std::optional<long long>(-1));
  EXPECT_EQ(Reply::make_integer(LLONG_MIN).as_integer(), std::optional<long long>(LLONG_MIN));
}

TEST(ReplyAsInteger, NumericStrings) {
  EXPECT_EQ(Reply::make_string("123").as_integer(), std::optional<long long>(123));
  EXPECT_EQ(Reply::make_string("-45").as_integer(), std::optional<long long>(-45));
  EXPECT_EQ(Reply::make_string("0").as_integer(), std::optional<long long>(0));
  EXPECT_EQ(Reply::make_status("17").as_integer(), std::optional<long long>(17));
  EXPECT_EQ(Reply::make_string("9223372036854775807").as_integer(),
            std::optional<long long>(9223372036854775807LL));
  EXPECT_EQ(Reply::make_string("-9223372036854775808").as_integer(), std::optional<long long>(LLONG_MIN));
}

TEST(ReplyAsInteger, NonNumericStrings) {
  EXPECT_EQ(Reply::make_string("abc").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_string("12abc").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_string("1.5").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_string(" 1").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_string("1 ").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_string("-").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_string("0x10").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_string(std::string("1\0", 2)).as_integer(), std::nullopt);
}

TEST(ReplyAsInteger, EmptyString) {
  EXPECT_EQ(Reply::make_string("").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_status("").as_integer(), std::nullopt);
}

TEST(ReplyAsInteger, Overflow) {
  EXPECT_EQ(Reply::make_string("9223372036854775808").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_string("-9223372036854775809").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_string("99999999999999999999999").as_integer(), std::nullopt);
}

TEST(ReplyAsInteger, OtherTypesHaveNoInteger) {
  EXPECT_EQ(Reply::make_nil().as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_error("12").as_integer(), std::nullopt);
  EXPECT_EQ(Reply::make_array({Reply::make_integer(1)}).as_integer(), std::nullopt);
}

// ---- error_prefix ----------------------------------------------------------------------------

TEST(ReplyErrorPrefix, FirstWordOfError) {
  EXPECT_EQ(Reply::make_error("NOSCRIPT No matching script. Please use EVAL.").error_prefix(), "NOSCRIPT");
  EXPECT_EQ(Reply::make_error("WRONGTYPE Operation against a key").error_prefix(), "WRONGTYPE");
  EXPECT_EQ(Reply::make_error("ERR unknown command").error_prefix(), "ERR");
}

TEST(ReplyErrorPrefix, SingleWordAndEmptyError) {
  EXPECT_EQ(Reply::make_error("LOADING").error_prefix(), "LOADING");
  EXPECT_EQ(Reply::make_error("").error_prefix(), "");
  EXPECT_EQ(Reply::make_error(" leading").error_prefix(), "");
}

TEST(ReplyErrorPrefix, EmptyForNonErrors) {
  EXPECT_EQ(Reply::make_status("NOSCRIPT x").error_prefix(), "");
  EXPECT_EQ(Reply::make_string("ERR x").error_prefix(), "");
  EXPECT_EQ(Reply::make_nil().error_prefix(), "");
  EXPECT_EQ(Reply::make_integer(1).error_prefix(), "");
}

// ---- to_string -------------------------------------------------------------------------------

TEST(ReplyToString, Scalars) {
  EXPECT_EQ(Reply::make_nil().to_string(), "(nil)");
  EXPECT_EQ(Reply::make_status("OK").to_string(), "OK");
  EXPECT_EQ(Reply::make_error("ERR bad").to_string(), "(error) ERR bad");
  EXPECT_EQ(Reply::make_integer(-12).to_string(), "-12");
  EXPECT_EQ(Reply::make_string("hello").to_string(), "hello");
  EXPECT_EQ(Reply::make_string("").to_string(), "");
}

TEST(ReplyToString, Arrays) {
  EXPECT_EQ(Reply::make_array({}).to_string(), "[]");
  EXPECT_EQ(Reply::make_array({Reply::make_integer(1)}).to_string(), "[1]");
  const Reply nested = Reply::make_array(
      {Reply::make_integer(1), Reply::make_array({Reply::make_string("a"), Reply::make_nil()}),
       Reply::make_error("ERR e"), Reply::make_array({})});
  EXPECT_EQ(nested.to_string(), "[1, [a, (nil)], (error) ERR e, []]");
}

// ---- classify_error_reply --------------------------------------------------------------------

std::error_code classify(const std::string& text) { return classify_error_reply(Reply::make_error(text)); }

TEST(ClassifyErrorReply, WrongType) {
  const std::error_code ec = classify("WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(ec, dlock::errc::wrong_type);
  EXPECT_EQ(ec, std::error_code(dlock::errc::wrong_type));
  EXPECT_EQ(ec.category(), dlock::error_category());
}

TEST(ClassifyErrorReply, AuthErrors) {
  EXPECT_EQ(classify("NOAUTH Authentication required."), dlock::errc::auth);
  EXPECT_EQ(classify("NOPERM this user has no permissions to run the 'eval' command"), dlock::errc::auth);
  EXPECT_EQ(classify("WRONGPASS invalid username-password pair or user is disabled."), dlock::errc::auth);
}

TEST(ClassifyErrorReply, ScriptErrors) {
  // Redis 7 runtime error in a script.
  EXPECT_EQ(classify("ERR user_script:1: Script attempted to access nonexistent global variable 'x' "
                     "script: 0123456789abcdef0123456789abcdef01234567, on @user_script:1."),
            dlock::errc::script);
  // Redis 6 form.
  EXPECT_EQ(classify("ERR Error running script (call to f_0123456789abcdef0123456789abcdef01234567): "
                     "@user_script:3: user_script:3: attempt to compare nil with number"),
            dlock::errc::script);
  // Compile error.
  EXPECT_EQ(classify("ERR Error compiling script (new function): user_script:1: '=' expected near 'x'"),
            dlock::errc::script);
}

TEST(ClassifyErrorReply, LuaErrorCarryingWrongTypeIsWrongType) {
  // Redis 6: redis.call's error wrapped in the script error.
  EXPECT_EQ(classify("ERR Error running script (call to f_0123456789abcdef0123456789abcdef01234567): "
                     "@user_script:2: WRONGTYPE Operation against a key holding the wrong kind of value"),
            dlock::errc::wrong_type);
  // Redis 7: the command's error comes first, with the script named after it.
  EXPECT_EQ(classify("WRONGTYPE Operation against a key holding the wrong kind of value script: "
                     "0123456789abcdef0123456789abcdef01234567, on @user_script:2."),
            dlock::errc::wrong_type);
}

// Regression (found by tests/fault/memory_pressure_test.cpp): at maxmemory with noeviction an
// acquire script's INCR/SET is refused, and Redis 7 puts the OOM first with the script named
// after it. That is the server refusing work (errc::server, as Mutex::acquire documents), not a
// broken script.
TEST(ClassifyErrorReply, ServerRefusalInsideAScriptIsServer) {
  EXPECT_EQ(classify("OOM command not allowed when used memory > 'maxmemory'. script: "
                     "1f0b26457a8572285ae573f7f384f64a1ab44ddf, on @user_script:19."),
            dlock::errc::server);
  EXPECT_EQ(classify("ERR Error running script (call to f_0123456789abcdef0123456789abcdef01234567): "
                     "@user_script:19: OOM command not allowed when used memory > 'maxmemory'."),
            dlock::errc::server);
  EXPECT_EQ(classify("READONLY You can't write against a read only replica. script: "
                     "0123456789abcdef0123456789abcdef01234567, on @user_script:2."),
            dlock::errc::server);
  EXPECT_EQ(classify("OOM command not allowed when used memory > 'maxmemory'."), dlock::errc::server);
}

TEST(ClassifyErrorReply, LuaErrorCarryingNoPermIsAuth) {
  EXPECT_EQ(classify("ERR Error running script (call to f_0123456789abcdef0123456789abcdef01234567): "
                     "@user_script:1: NOPERM this user has no permissions to access one of the keys"),
            dlock::errc::auth);
}

// ACL denials of a command a script runs: the form depends on the Redis version.
TEST(ClassifyErrorReply, Redis70ScriptAclCommandDenialIsAuth) {
  EXPECT_EQ(classify("ERR The user executing the script can't run this command or subcommand script: "
                     "0123456789abcdef0123456789abcdef01234567, on @user_script:1."),
            dlock::errc::auth);
}

TEST(ClassifyErrorReply, Redis70ScriptAclKeyDenialIsAuth) {
  EXPECT_EQ(classify("ERR The user executing the script can't access at least one of the keys mentioned in "
                     "the command arguments script: 0123456789abcdef0123456789abcdef01234567, on @user_script:1."),
            dlock::errc::auth);
}

TEST(ClassifyErrorReply, Redis72ScriptAclCommandDenialIsAuth) {
  EXPECT_EQ(classify("ERR ACL failure in script: User app has no permissions to run the 'set' command script: "
                     "0123456789abcdef0123456789abcdef01234567, on @user_script:1."),
            dlock::errc::auth);
}

TEST(ClassifyErrorReply, Redis72ScriptAclKeyAndChannelDenialIsAuth) {
  EXPECT_EQ(classify("ERR ACL failure in script: No permissions to access a key script: "
                     "0123456789abcdef0123456789abcdef01234567, on @user_script:1."),
            dlock::errc::auth);
  EXPECT_EQ(classify("ERR ACL failure in script: No permissions to access a channel script: "
                     "0123456789abcdef0123456789abcdef01234567, on @user_script:1."),
            dlock::errc::auth);
}

TEST(ClassifyErrorReply, ServerErrors) {
  EXPECT_EQ(classify("OOM command not allowed when used memory > 'maxmemory'."), dlock::errc::server);
  EXPECT_EQ(classify("READONLY You can't write against a read only replica."), dlock::errc::server);
  EXPECT_EQ(classify("LOADING Redis is loading the dataset in memory"), dlock::errc::server);
  EXPECT_EQ(classify("ERR unknown command 'EVALSHA'"), dlock::errc::server);
  EXPECT_EQ(classify("NOSCRIPT No matching script. Please use EVAL."), dlock::errc::server);
  EXPECT_EQ(classify("BUSY Redis is busy running a script."), dlock::errc::server);
  EXPECT_EQ(classify(""), dlock::errc::server);
}

TEST(ClassifyErrorReply, ServerErrorsAreNotOtherCodes) {
  const std::error_code ec = classify("OOM command not allowed when used memory > 'maxmemory'.");
  EXPECT_NE(ec, dlock::errc::script);
  EXPECT_NE(ec, dlock::errc::auth);
  EXPECT_NE(ec, dlock::errc::wrong_type);
  EXPECT_TRUE(static_cast<bool>(ec));
}

// ---- refused_before_running --------------------------------------------------------------------

// Only the prefixes with which the server refuses a command before running any of it: a
// script's runtime error (whatever error it carries inside) may follow a write.
TEST(RefusedBeforeRunning, OnlyRefusalsBeforeTheScriptRan) {
  using dlock::detail::refused_before_running;
  for (const char* refused : {"READONLY You can't write against a read only replica.",
                              "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
                              "LOADING Redis is loading the dataset in memory", "MASTERDOWN Link with MASTER is down",
                              "NOSCRIPT No matching script.", "NOAUTH Authentication required.",
                              "CLUSTERDOWN The cluster is down", "TRYAGAIN Multiple keys request during rehashing of slot",
                              "MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381",
                              "CROSSSLOT Keys in request don't hash to the same slot"}) {
    EXPECT_TRUE(refused_before_running(Reply::make_error(refused))) << refused;
  }
  for (const char* ran : {"ERR user_script:1: Script attempted to access nonexistent global variable",
                          "ERR Error running script (call to f_1234): @user_script:5: READONLY You can't write",
                          "WRONGTYPE Operation against a key holding the wrong kind of value",
                          "OOM command not allowed when used memory > 'maxmemory'.", "ERR unknown command",
                          "NOPERM this user has no permissions to access one of the keys used as arguments"}) {
    EXPECT_FALSE(refused_before_running(Reply::make_error(ran))) << ran;
  }
  EXPECT_FALSE(refused_before_running(Reply::make_integer(1)));
}

}  // namespace

TEST(ErrcName, EveryCodeHasItsEnumeratorName) {
  EXPECT_EQ(dlock::errc_name(dlock::errc::busy), "busy");
  EXPECT_EQ(dlock::errc_name(dlock::errc::not_replicated), "not_replicated");
  EXPECT_EQ(dlock::errc_name(static_cast<dlock::errc>(999)), "unknown");
  for (int v = 1; v <= static_cast<int>(dlock::errc::not_replicated); ++v) {
    EXPECT_NE(dlock::errc_name(static_cast<dlock::errc>(v)), "unknown") << v;
  }
}
