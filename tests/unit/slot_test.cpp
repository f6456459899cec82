#include "util/slot.hpp"

#include <gtest/gtest.h>

namespace dlock::detail {
namespace {

TEST(SlotTest, Crc16MatchesTheClusterSpecReferenceValue) {
  // The Redis Cluster specification's test vector for CRC16-XMODEM.
  EXPECT_EQ(crc16("123456789"), 0x31C3);
}

TEST(SlotTest, KnownSlotsAgreeWithRedis) {
  // Values as printed by CLUSTER KEYSLOT on Redis 7.
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot(""), 0);
}

TEST(SlotTest, HashTagRules) {
  EXPECT_EQ(hash_tag("dlock:{orders}:fence"), "orders");
  EXPECT_EQ(hash_tag("{user1000}.following"), "user1000");
  EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}");  // empty first tag: whole key
  EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar");
  EXPECT_EQ(hash_tag("no-tag"), "no-tag");
  EXPECT_EQ(hash_tag("open{only"), "open{only");
  EXPECT_EQ(key_slot("dlock:{orders}"), key_slot("other:{orders}:rel"));
}

}  // namespace
}  // namespace dlock::detail
