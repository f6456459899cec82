#include "cluster/slot_map.hpp"

#include <gtest/gtest.h>

namespace dlock::detail {
namespace {

Reply str(std::string s) { return Reply::make_string(std::move(s)); }
Reply num(long long v) { return Reply::make_integer(v); }
Reply arr(std::vector<Reply> v) { return Reply::make_array(std::move(v)); }

Reply range(long long a, long long b, std::string host, long long port) {
  return arr({num(a), num(b), arr({str(std::move(host)), num(port), str("id")}),
              arr({str("127.0.0.1"), num(port + 3), str("replica")})});
}

TEST(SlotMapTest, ParsesThreePrimaries) {
  auto map = SlotMap::parse(arr({range(0, 5460, "127.0.0.1", 7001), range(5461, 10922, "127.0.0.1", 7002),
                                 range(10923, 16383, "", 7003)}),
                            "10.0.0.9");
  ASSERT_TRUE(map.ok()) << map.error().what();
  ASSERT_EQ(map->primaries().size(), 3u);
  EXPECT_EQ(map->primaries()[map->owner(0)].key(), "127.0.0.1:7001");
  EXPECT_EQ(map->primaries()[map->owner(5461)].key(), "127.0.0.1:7002");
  // An empty host means "the node you asked".
  EXPECT_EQ(map->primaries()[map->owner(16383)].key(), "10.0.0.9:7003");
}

TEST(SlotMapTest, OneNodeWithSeveralRangesIsOnePrimary) {
  auto map = SlotMap::parse(arr({range(0, 100, "h", 1), range(101, 16383, "h", 1)}), "h");
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->primaries().size(), 1u);
}

TEST(SlotMapTest, UncoveredSlotsAreAnError) {
  auto map = SlotMap::parse(arr({range(0, 100, "h", 1)}), "h");
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.error().code, errc::server);
  EXPECT_NE(map.error().what().find("slot 101"), std::string::npos);
}

TEST(SlotMapTest, MalformedRepliesAreProtocolErrors) {
  EXPECT_EQ(SlotMap::parse(str("x"), "h").error().code, errc::protocol);
  EXPECT_EQ(SlotMap::parse(arr({arr({num(0)})}), "h").error().code, errc::protocol);
  EXPECT_EQ(SlotMap::parse(arr({range(5, 1, "h", 1)}), "h").error().code, errc::protocol);
  EXPECT_EQ(SlotMap::parse(arr({range(0, 16384, "h", 1)}), "h").error().code, errc::protocol);
  EXPECT_EQ(SlotMap::parse(arr({range(0, 16383, "h", 70000)}), "h").error().code, errc::protocol);
}

TEST(SlotMapTest, ParsesRedirects) {
  auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381", "from");
  ASSERT_TRUE(moved);
  EXPECT_FALSE(moved->ask);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->to.key(), "127.0.0.1:6381");
  auto ask = parse_redirect("ASK 1 ::1:7000", "from");
  ASSERT_TRUE(ask);
  EXPECT_TRUE(ask->ask);
  EXPECT_EQ(ask->to.host, "::1");
  EXPECT_FALSE(parse_redirect("MOVED", "from"));
  EXPECT_FALSE(parse_redirect("MOVED 16384 h:1", "from"));
  EXPECT_FALSE(parse_redirect("MOVED 1 h", "from"));
  EXPECT_FALSE(parse_redirect("ERR x", "from"));
  // An unknown endpoint: the target is on the redirecting node's host.
  EXPECT_FALSE(parse_redirect("MOVED 12182 ?:17003", "10.0.0.7")) << "the target's host is unknown";
  for (const char* text : {"MOVED 12182 :17003", "ASK 12182 :17003"}) {
    auto r = parse_redirect(text, "10.0.0.7");
    ASSERT_TRUE(r) << text;
    EXPECT_EQ(r->to.key(), "10.0.0.7:17003") << text;
  }
}

}  // namespace
}  // namespace dlock::detail
