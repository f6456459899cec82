#include "cluster/command_slot.hpp"

#include <gtest/gtest.h>

#include "io/command.hpp"
#include "util/slot.hpp"

namespace dlock::detail {
namespace {

TEST(CommandSlotTest, FirstArgumentIsTheKey) {
  EXPECT_EQ(command_slot(format_command({"GET", "foo"})), key_slot("foo"));
  EXPECT_EQ(command_slot(format_command({"set", "dlock:{a}", "v", "NX"})), key_slot("a"));
  EXPECT_EQ(command_slot(format_command({"SPUBLISH", "dlock:{a}:ch", "released"})), key_slot("a"));
}

TEST(CommandSlotTest, ScriptsUseTheirFirstKey) {
  EXPECT_EQ(command_slot(format_command({"EVALSHA", std::string(40, 'a'), "2", "dlock:{x}", "dlock:{x}:fence", "tok"})),
            key_slot("x"));
  EXPECT_EQ(command_slot(format_command({"eval", "return 1", "1", "bar"})), key_slot("bar"));
  EXPECT_EQ(command_slot(format_command({"EVAL", "return 1", "0", "notakey"})), std::nullopt);
}

TEST(CommandSlotTest, KeylessCommandsGoAnywhere) {
  EXPECT_EQ(command_slot(format_command({"PING"})), std::nullopt);
  EXPECT_EQ(command_slot(format_command({"CLUSTER", "SLOTS"})), std::nullopt);
  EXPECT_EQ(command_slot(format_command({"PUBLISH", "ch", "m"})), std::nullopt);
  EXPECT_EQ(command_slot(format_command({"info", "server"})), std::nullopt);
  EXPECT_EQ(command_slot(format_command({"PUBSUB", "NUMSUB", "ch"})), std::nullopt);
  EXPECT_EQ(command_slot(format_command({"PUBSUB", "SHARDNUMSUB", "dlock:{a}:ch"})), key_slot("a"));
}

TEST(CommandSlotTest, MalformedPayloadsHaveNoSlot) {
  EXPECT_EQ(command_slot(""), std::nullopt);
  EXPECT_EQ(command_slot("PING\r\n"), std::nullopt);
  EXPECT_EQ(command_slot("*2\r\n$3\r\nGET\r\n$10\r\nfoo\r\n"), std::nullopt);  // truncated bulk
  EXPECT_EQ(command_slot("*2\r\n$3\r\nGET\r\n$-1\r\n"), std::nullopt);
  EXPECT_EQ(command_slot("*4\r\n$7\r\nEVALSHA\r\n$1\r\na\r\n$1\r\n1\r\n"), std::nullopt);
}

}  // namespace
}  // namespace dlock::detail

#include "cluster/sharded_scripts.hpp"

namespace dlock::detail {
namespace {

TEST(ShardedScriptsTest, PublishBecomesSpublishExceptTheDoubleQuotedForm) {
  const std::string src =
      "local cluster = false\n"
      "redis.pcall('PUBLISH', ARGV[1], 'released')\n"
      "redis.call('PUBLISH', ARGV[1], 'x')\n"
      "if cluster then redis.pcall(\"PUBLISH\", ARGV[1], '0') end\n";
  const std::string out = to_sharded_pubsub(src);
  EXPECT_EQ(out,
            "local cluster = true\n"
            "redis.pcall('SPUBLISH', ARGV[1], 'released')\n"
            "redis.call('SPUBLISH', ARGV[1], 'x')\n"
            "if cluster then redis.pcall(\"PUBLISH\", ARGV[1], '0') end\n");
  EXPECT_EQ(to_sharded_pubsub("return 1"), "return 1");
}

}  // namespace
}  // namespace dlock::detail
