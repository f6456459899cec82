// Unit tests for dlock::detail::StringList (src/renewal/string_list.hpp): the one-allocation list
// that holds a lock's script KEYS and extra ARGV.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "renewal/string_list.hpp"

namespace {

using dlock::detail::StringList;

std::vector<std::string> as_vector(const StringList& l) { return l; }

TEST(StringList, EmptyList) {
  StringList l;
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.size(), 0u);
  EXPECT_EQ(l.begin(), l.end());
  EXPECT_TRUE(as_vector(l).empty());
  EXPECT_TRUE(l.views().empty());
}

TEST(StringList, KeepsOrderAndContent) {
  const std::string key = "dlock:{orders}";
  StringList l{key, key + ":rel", "", "30000"};
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l.front(), "dlock:{orders}");
  EXPECT_EQ(l[1], "dlock:{orders}:rel");
  EXPECT_EQ(l[2], "");
  EXPECT_EQ(l[3], "30000");
  EXPECT_EQ(as_vector(l), (std::vector<std::string>{key, key + ":rel", "", "30000"}));
  std::vector<std::string_view> seen(l.begin(), l.end());
  EXPECT_EQ(seen, l.views());
}

TEST(StringList, PushBackAppends) {
  StringList l;
  l.push_back("a");
  l.push_back(std::string(100, 'x'));  // longer than any small-string buffer
  l.push_back("");
  l.push_back("b");
  EXPECT_EQ(as_vector(l), (std::vector<std::string>{"a", std::string(100, 'x'), "", "b"}));
}

TEST(StringList, BinaryContentSurvives) {
  const std::string odd("a\0b\r\n", 5);
  StringList l{odd};
  EXPECT_EQ(l.front(), std::string_view(odd));
}

TEST(StringList, CopiesAreIndependentAndMovesEmptyTheSource) {
  StringList a{"k1", "k2"};
  StringList b = a;
  b.push_back("k3");
  EXPECT_EQ(as_vector(a), (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(as_vector(b), (std::vector<std::string>{"k1", "k2", "k3"}));
  a = b;
  EXPECT_EQ(as_vector(a), as_vector(b));
  StringList c = std::move(b);
  EXPECT_EQ(c.size(), 3u);
  a = StringList{};
  EXPECT_TRUE(a.empty());
  a = {"one"};
  EXPECT_EQ(as_vector(a), std::vector<std::string>{"one"});
}

}  // namespace
