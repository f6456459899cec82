// Unit tests for dlock::detail::RespReader (src/io/resp_reader.hpp): RESP2 bytes in,
// dlock::Reply values out, with dlock's size limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "io/resp_reader.hpp"

namespace {

using dlock::Reply;
using dlock::Result;
using dlock::detail::ReplyLimits;
using dlock::detail::RespReader;
using Type = dlock::Reply::Type;

// Feeds `bytes` in one piece and returns the one complete reply they hold.
Reply parse_one(std::string_view bytes, ReplyLimits limits = {}) {
  RespReader r(limits);
  auto f = r.feed(bytes.data(), bytes.size());
  EXPECT_TRUE(f.ok()) << f.error().what();
  auto n = r.next();
  EXPECT_TRUE(n.ok()) << n.error().what();
  if (!n.ok() || !n.value().has_value()) {
    ADD_FAILURE() << "no complete reply in: " << bytes;
    return Reply::make_nil();
  }
  Reply out = std::move(*n.value());
  auto rest = r.next();
  EXPECT_TRUE(rest.ok());
  if (rest.ok()) {
    EXPECT_FALSE(rest.value().has_value()) << "more than one reply in: " << bytes;
  }
  return out;
}

// Feeds `bytes` and returns the code next() fails with (success if it does not fail).
std::error_code parse_error(std::string_view bytes, ReplyLimits limits = {}) {
  RespReader r(limits);
  auto f = r.feed(bytes.data(), bytes.size());
  if (!f.ok()) return f.code();
  auto n = r.next();
  if (!n.ok()) {
    EXPECT_FALSE(n.error().message.empty());
    return n.code();
  }
  return {};
}

// ---- every type ------------------------------------------------------------------------------

TEST(RespReader, Status) {
  const Reply r = parse_one("+OK\r\n");
  EXPECT_EQ(r.type(), Type::status);
  EXPECT_TRUE(r.is_status());
  EXPECT_EQ(r.str(), "OK");
}

TEST(RespReader, EmptyStatus) {
  const Reply r = parse_one("+\r\n");
  EXPECT_EQ(r.type(), Type::status);
  EXPECT_EQ(r.str(), "");
}

TEST(RespReader, Error) {
  const Reply r = parse_one("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
  EXPECT_EQ(r.type(), Type::error);
  EXPECT_TRUE(r.is_error());
  EXPECT_EQ(r.str(), "WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r.error_prefix(), "WRONGTYPE");
}

TEST(RespReader, Integer) {
  const Reply r = parse_one(":1234\r\n");
  EXPECT_EQ(r.type(), Type::integer);
  EXPECT_EQ(r.integer(), 1234);
  EXPECT_EQ(parse_one(":-7\r\n").integer(), -7);
  EXPECT_EQ(parse_one(":0\r\n").integer(), 0);
  EXPECT_EQ(parse_one(":9223372036854775807\r\n").integer(), 9223372036854775807LL);
}

TEST(RespReader, BulkString) {
  const Reply r = parse_one("$5\r\nhello\r\n");
  EXPECT_EQ(r.type(), Type::string);
  EXPECT_EQ(r.str(), "hello");
}

TEST(RespReader, EmptyBulkString) {
  const Reply r = parse_one("$0\r\n\r\n");
  EXPECT_EQ(r.type(), Type::string);
  EXPECT_EQ(r.str(), "");
}

TEST(RespReader, BinaryBulkStringKeepsCrLfAndNul) {
  const std::string bytes("$6\r\na\r\n\0\xffz\r\n", 12);
  const Reply r = parse_one(bytes);
  EXPECT_EQ(r.type(), Type::string);
  EXPECT_EQ(r.str(), std::string("a\r\n\0\xffz", 6));
}

TEST(RespReader, NilBulk) {
  const Reply r = parse_one("$-1\r\n");
  EXPECT_EQ(r.type(), Type::nil);
  EXPECT_TRUE(r.is_nil());
}

TEST(RespReader, NilArray) {
  const Reply r = parse_one("*-1\r\n");
  EXPECT_EQ(r.type(), Type::nil);
  EXPECT_TRUE(r.is_nil());
}

TEST(RespReader, EmptyArray) {
  const Reply r = parse_one("*0\r\n");
  EXPECT_EQ(r.type(), Type::array);
  EXPECT_EQ(r.size(), 0u);
}

TEST(RespReader, FlatArrayOfMixedTypes) {
  const Reply r = parse_one("*5\r\n:1\r\n$3\r\nabc\r\n$-1\r\n+OK\r\n-ERR bad\r\n");
  ASSERT_EQ(r.type(), Type::array);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].type(), Type::integer);
  EXPECT_EQ(r[0].integer(), 1);
  EXPECT_EQ(r[1].type(), Type::string);
  EXPECT_EQ(r[1].str(), "abc");
  EXPECT_EQ(r[2].type(), Type::nil);
  EXPECT_EQ(r[3].type(), Type::status);
  EXPECT_EQ(r[3].str(), "OK");
  EXPECT_EQ(r[4].type(), Type::error);
  EXPECT_EQ(r[4].str(), "ERR bad");
}

TEST(RespReader, NestedArrays) {
  // [1, [2, [], ["x", nil]], -1 array, 3]
  const Reply r = parse_one("*4\r\n:1\r\n*3\r\n:2\r\n*0\r\n*2\r\n$1\r\nx\r\n$-1\r\n*-1\r\n:3\r\n");
  ASSERT_EQ(r.type(), Type::array);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].integer(), 1);
  const Reply& inner = r[1];
  ASSERT_EQ(inner.type(), Type::array);
  ASSERT_EQ(inner.size(), 3u);
  EXPECT_EQ(inner[0].integer(), 2);
  EXPECT_EQ(inner[1].type(), Type::array);
  EXPECT_EQ(inner[1].size(), 0u);
  ASSERT_EQ(inner[2].type(), Type::array);
  ASSERT_EQ(inner[2].size(), 2u);
  EXPECT_EQ(inner[2][0].str(), "x");
  EXPECT_EQ(inner[2][1].type(), Type::nil);
  EXPECT_EQ(r[2].type(), Type::nil);
  EXPECT_EQ(r[3].integer(), 3);
  EXPECT_EQ(r.to_string(), "[1, [2, [], [x, (nil)]], (nil), 3]");
}

TEST(RespReader, SevenLevelsOfNestingAccepted) {
  const Reply r = parse_one("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:42\r\n");
  const Reply* p = &r;
  for (int depth = 0; depth < 7; ++depth) {
    ASSERT_EQ(p->type(), Type::array) << "depth " << depth;
    ASSERT_EQ(p->size(), 1u);
    p = &(*p)[0];
  }
  EXPECT_EQ(p->type(), Type::integer);
  EXPECT_EQ(p->integer(), 42);
}

TEST(RespReader, DeeperNestingIsAProtocolError) {
  std::string bytes;
  for (int i = 0; i < 20; ++i) bytes += "*1\r\n";
  bytes += ":1\r\n";
  EXPECT_EQ(parse_error(bytes), dlock::errc::protocol);
}

// ---- framing ---------------------------------------------------------------------------------

TEST(RespReader, NeedsMoreBytesReturnsNullopt) {
  RespReader r;
  auto n = r.next();
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(n.value().has_value());

  ASSERT_TRUE(r.feed("$5\r\nhel", 7).ok());
  n = r.next();
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(n.value().has_value());

  ASSERT_TRUE(r.feed("lo\r\n", 4).ok());
  n = r.next();
  ASSERT_TRUE(n.ok());
  ASSERT_TRUE(n.value().has_value());
  EXPECT_EQ(n.value()->str(), "hello");
}

TEST(RespReader, ByteByByteFeeds) {
  const std::string stream =
      "+OK\r\n"
      "-ERR x y\r\n"
      ":-12\r\n"
      "$4\r\nab\r\n\r\n"
      "$-1\r\n"
      "*-1\r\n"
      "*0\r\n"
      "*2\r\n*2\r\n:1\r\n$1\r\nz\r\n+PONG\r\n";
  RespReader r;
  std::vector<Reply> got;
  for (char c : stream) {
    ASSERT_TRUE(r.feed(&c, 1).ok());
    for (;;) {
      auto n = r.next();
      ASSERT_TRUE(n.ok()) << n.error().what();
      if (!n.value()) break;
      got.push_back(std::move(*n.value()));
    }
  }
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[0].type(), Type::status);
  EXPECT_EQ(got[0].str(), "OK");
  EXPECT_EQ(got[1].type(), Type::error);
  EXPECT_EQ(got[1].str(), "ERR x y");
  EXPECT_EQ(got[2].type(), Type::integer);
  EXPECT_EQ(got[2].integer(), -12);
  EXPECT_EQ(got[3].type(), Type::string);
  EXPECT_EQ(got[3].str(), "ab\r\n");
  EXPECT_EQ(got[4].type(), Type::nil);
  EXPECT_EQ(got[5].type(), Type::nil);
  EXPECT_EQ(got[6].type(), Type::array);
  EXPECT_EQ(got[6].size(), 0u);
  ASSERT_EQ(got[7].type(), Type::array);
  EXPECT_EQ(got[7].to_string(), "[[1, z], PONG]");
}

TEST(RespReader, SeveralRepliesInOneFeed) {
  RespReader r;
  const std::string bytes = ":1\r\n:2\r\n$3\r\nfoo\r\n*1\r\n:3\r\n+OK";
  ASSERT_TRUE(r.feed(bytes.data(), bytes.size()).ok());
  std::vector<std::string> got;
  for (;;) {
    auto n = r.next();
    ASSERT_TRUE(n.ok());
    if (!n.value()) break;
    got.push_back(n.value()->to_string());
  }
  EXPECT_EQ(got, (std::vector<std::string>{"1", "2", "foo", "[3]"}));
  // The partial "+OK" completes with the next feed.
  ASSERT_TRUE(r.feed("\r\n", 2).ok());
  auto n = r.next();
  ASSERT_TRUE(n.ok());
  ASSERT_TRUE(n.value().has_value());
  EXPECT_EQ(n.value()->type(), Type::status);
  EXPECT_EQ(n.value()->str(), "OK");
}

TEST(RespReader, ManyLargeRepliesAcrossSplitFeeds) {
  std::string stream;
  for (int i = 0; i < 200; ++i) {
    const std::string v(static_cast<std::size_t>(i * 7), static_cast<char>('a' + i % 26));
    stream += "$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
  }
  RespReader r;
  int count = 0;
  for (std::size_t off = 0; off < stream.size(); off += 13) {
    const std::size_t len = std::min<std::size_t>(13, stream.size() - off);
    ASSERT_TRUE(r.feed(stream.data() + off, len).ok());
    for (;;) {
      auto n = r.next();
      ASSERT_TRUE(n.ok());
      if (!n.value()) break;
      ASSERT_EQ(n.value()->str(), std::string(static_cast<std::size_t>(count * 7), static_cast<char>('a' + count % 26)));
      ++count;
    }
  }
  EXPECT_EQ(count, 200);
}

// ---- protocol errors -------------------------------------------------------------------------

TEST(RespReader, UnknownTypeByteIsProtocolError) {
  EXPECT_EQ(parse_error("?foo\r\n"), dlock::errc::protocol);
  EXPECT_EQ(parse_error("hello\r\n"), dlock::errc::protocol);
}

TEST(RespReader, ProtocolErrorInsideArray) {
  EXPECT_EQ(parse_error("*2\r\n:1\r\n?x\r\n"), dlock::errc::protocol);
}

TEST(RespReader, StreamStaysBrokenAfterAnError) {
  RespReader r;
  ASSERT_TRUE(r.feed("?foo\r\n", 6).ok());
  auto n = r.next();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.code(), dlock::errc::protocol);
  // Valid bytes afterwards do not resynchronise the stream.
  auto f = r.feed("+OK\r\n", 5);
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(f.code(), dlock::errc::protocol);
  auto again = r.next();
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(again.code(), dlock::errc::protocol);
}

TEST(RespReader, RepliesBeforeABrokenOneAreDelivered) {
  RespReader r;
  const std::string bytes = ":5\r\n?bad\r\n";
  ASSERT_TRUE(r.feed(bytes.data(), bytes.size()).ok());
  auto n = r.next();
  ASSERT_TRUE(n.ok());
  ASSERT_TRUE(n.value().has_value());
  EXPECT_EQ(n.value()->integer(), 5);
  n = r.next();
  EXPECT_FALSE(n.ok());
  EXPECT_EQ(n.code(), dlock::errc::protocol);
}

// ---- limits ----------------------------------------------------------------------------------

TEST(RespReader, DefaultLimits) {
  const ReplyLimits l;
  EXPECT_EQ(l.max_elements, std::size_t{1} << 20);
  EXPECT_EQ(l.max_bulk, std::size_t{512} * 1024 * 1024);
  EXPECT_EQ(l.max_line, std::size_t{1} << 20);
  RespReader r;
  EXPECT_EQ(r.limits().max_elements, l.max_elements);
  EXPECT_EQ(r.limits().max_bulk, l.max_bulk);
}

TEST(RespReader, ArrayAtElementLimitAccepted) {
  ReplyLimits limits;
  limits.max_elements = 10;
  std::string bytes = "*10\r\n";
  for (int i = 0; i < 10; ++i) bytes += ":" + std::to_string(i) + "\r\n";
  const Reply r = parse_one(bytes, limits);
  ASSERT_EQ(r.size(), 10u);
  EXPECT_EQ(r[9].integer(), 9);
}

TEST(RespReader, ArrayOverElementLimitRejectedFromHeader) {
  ReplyLimits limits;
  limits.max_elements = 10;
  // Only the header: the reader must refuse it before any element arrives.
  EXPECT_EQ(parse_error("*11\r\n", limits), dlock::errc::protocol);
}

TEST(RespReader, NestedArrayOverElementLimitRejected) {
  ReplyLimits limits;
  limits.max_elements = 10;
  EXPECT_EQ(parse_error("*2\r\n:1\r\n*11\r\n", limits), dlock::errc::protocol);
}

TEST(RespReader, HugeArrayHeaderRejectedAtOnceWithDefaultLimits) {
  EXPECT_EQ(parse_error("*1000000000\r\n"), dlock::errc::protocol);
  EXPECT_EQ(parse_error("*1048577\r\n"), dlock::errc::protocol);  // max_elements + 1
}

TEST(RespReader, ArrayHeaderBeyondIntRangeRejected) {
  // 2^31 and 2^32 + 1 elements: far beyond max_elements, must not wrap to a small count.
  EXPECT_EQ(parse_error("*2147483648\r\n"), dlock::errc::protocol);
  EXPECT_EQ(parse_error("*4294967297\r\n:1\r\n"), dlock::errc::protocol);
}

TEST(RespReader, BulkAtLimitAccepted) {
  ReplyLimits limits;
  limits.max_bulk = 5;
  EXPECT_EQ(parse_one("$5\r\nhello\r\n", limits).str(), "hello");
}

TEST(RespReader, BulkOverLimitRejected) {
  ReplyLimits limits;
  limits.max_bulk = 5;
  EXPECT_EQ(parse_error("$6\r\nhello!\r\n", limits), dlock::errc::protocol);
}

TEST(RespReader, BulkOverLimitInsideArrayRejected) {
  ReplyLimits limits;
  limits.max_bulk = 5;
  EXPECT_EQ(parse_error("*2\r\n$1\r\na\r\n$6\r\nhello!\r\n", limits), dlock::errc::protocol);
}

TEST(RespReader, BulkHeaderOverLimitRejectedBeforeBodyIsBuffered) {
  // The header alone announces more than max_bulk: waiting for (and buffering) the body is what
  // the limit exists to prevent, so the reader must fail now rather than ask for more bytes.
  ReplyLimits limits;
  limits.max_bulk = 5;
  RespReader r(limits);
  const std::string header = "$1000000000\r\n";
  ASSERT_TRUE(r.feed(header.data(), header.size()).ok());
  const std::string chunk(4096, 'x');
  ASSERT_TRUE(r.feed(chunk.data(), chunk.size()).ok());
  auto n = r.next();
  EXPECT_FALSE(n.ok()) << "a bulk announced at 1e9 bytes with max_bulk=5 is still being buffered";
  if (!n.ok()) {
    EXPECT_EQ(n.code(), dlock::errc::protocol);
  }
}

TEST(RespReader, BulkInsideArrayWithOversizedHeaderRejectedWhileBuffering) {
  ReplyLimits limits;
  limits.max_bulk = 5;
  RespReader r(limits);
  const std::string bytes = "*2\r\n$3\r\nabc\r\n$1000\r\n" + std::string(200, 'y');
  ASSERT_TRUE(r.feed(bytes.data(), bytes.size()).ok());
  auto n = r.next();
  EXPECT_FALSE(n.ok());
  if (!n.ok()) {
    EXPECT_EQ(n.code(), dlock::errc::protocol);
  }
}

// Feeds `bytes` in chunks of `chunk` bytes, calling next() after each as Connection does; returns
// the first error, or success once a reply came.
Result<void> feed_in_chunks(RespReader& r, const std::string& bytes, std::size_t chunk) {
  for (std::size_t at = 0; at < bytes.size(); at += chunk) {
    const std::size_t n = std::min(chunk, bytes.size() - at);
    if (auto f = r.feed(bytes.data() + at, n); !f.ok()) return f.error();
    auto got = r.next();
    if (!got.ok()) return got.error();
    if (got->has_value()) return {};
  }
  return dlock::Error(dlock::errc::timeout, "no reply and no error");
}

TEST(RespReader, EndlessLineIsRejectedOnceOverMaxLine) {
  // hiredis looks for a line's end from its start on every read: without a bound, a server
  // sending one endless "+AAAA..." line would cost time quadratic in its length.
  for (char type : {'+', '-', ':', '*', '$'}) {
    ReplyLimits limits;
    limits.max_line = 1000;
    RespReader r(limits);
    const std::string bytes = std::string(1, type) + std::string(5000, type == '+' || type == '-' ? 'A' : '9');
    auto got = feed_in_chunks(r, bytes, 100);
    ASSERT_FALSE(got.ok()) << type;
    EXPECT_EQ(got.code(), dlock::errc::protocol) << type;
    EXPECT_NE(got.error().what().find("a line of more than 1000 bytes"), std::string::npos) << got.error().what();
  }
}

TEST(RespReader, LineAtMaxLineAndLongerBulkBodiesAreAccepted) {
  ReplyLimits limits;
  limits.max_line = 1000;
  {
    RespReader r(limits);
    EXPECT_TRUE(feed_in_chunks(r, "+" + std::string(997, 'A') + "\r\n", 100).ok());
  }
  {
    // A bulk body is bounded by max_bulk, not max_line; so is one inside an array.
    RespReader r(limits);
    EXPECT_TRUE(feed_in_chunks(r, "*2\r\n:1\r\n$5000\r\n" + std::string(5000, 'b') + "\r\n", 100).ok());
  }
}

TEST(RespReader, BulkNotFollowedByCrLfIsAProtocolError) {
  // A length off by two would otherwise take "XY" for the CRLF and frame ":5" as the next reply.
  RespReader r;
  const std::string bytes = "$3\r\nabcXY:5\r\n";
  ASSERT_TRUE(r.feed(bytes.data(), bytes.size()).ok());
  auto n = r.next();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.code(), dlock::errc::protocol);
  EXPECT_NE(n.error().what().find("not followed by CRLF"), std::string::npos) << n.error().what();
  EXPECT_EQ(parse_error("*2\r\n$1\r\nab\r\n:1\r\n"), dlock::errc::protocol);
}

TEST(RespReader, BulkAtLimitArrivingByteByByteIsNotRejectedEarly) {
  // The buffering cap must leave room for a bulk of exactly max_bulk plus its header and CRLF.
  ReplyLimits limits;
  limits.max_bulk = 100;
  RespReader r(limits);
  const std::string body(100, 'q');
  const std::string bytes = "*1\r\n$100\r\n" + body + "\r\n";
  std::optional<Reply> got;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    ASSERT_TRUE(r.feed(&bytes[i], 1).ok());
    auto n = r.next();
    ASSERT_TRUE(n.ok()) << "at byte " << i << ": " << n.error().what();
    if (n.value()) {
      EXPECT_EQ(i, bytes.size() - 1);
      got = std::move(n.value());
    }
  }
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].str(), body);
}

// ---- the element cap is per reply (found by fuzz/resp_target.cpp) ---------------------------

TEST(RespReader, NestedArraysShareOneElementBudget) {
  ReplyLimits limits;
  limits.max_elements = 10;
  // 2 + 4 + 4 = 10 elements in all: at the cap.
  const Reply r = parse_one("*2\r\n*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n*4\r\n:5\r\n:6\r\n:7\r\n:8\r\n", limits);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1][3].integer(), 8);
  // 2 + 4 + 5 = 11: refused from the second inner header, though every array alone fits.
  EXPECT_EQ(parse_error("*2\r\n*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n*5\r\n", limits), dlock::errc::protocol);
}

TEST(RespReader, ForgedNestedHeadersCannotReserveMoreThanOneReplyBudget) {
  // Two headers, 20 bytes: with a per-array cap they reserved 2 x 2^20 elements (150 MB) and
  // waited for more; up to 7 levels of them, over 500 MB.
  EXPECT_EQ(parse_error("*1048576\r\n*1048576\r\n"), dlock::errc::protocol);
  EXPECT_EQ(parse_error("*524288\r\n*524288\r\n*1\r\n"), dlock::errc::protocol);
}

TEST(RespReader, ElementBudgetIsRenewedForEachReply) {
  ReplyLimits limits;
  limits.max_elements = 4;
  RespReader r(limits);
  const std::string two = "*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n*2\r\n*2\r\n:5\r\n:6\r\n$-1\r\n";
  ASSERT_TRUE(r.feed(two.data(), two.size()).ok());
  auto n = r.next();
  ASSERT_TRUE(n.ok()) << n.error().what();
  ASSERT_TRUE(n.value().has_value());
  EXPECT_EQ(n.value()->size(), 4u);
  n = r.next();
  ASSERT_TRUE(n.ok()) << n.error().what();
  ASSERT_TRUE(n.value().has_value());
  EXPECT_EQ(n.value()->to_string(), "[[5, 6], (nil)]");
}

TEST(RespReader, ElementBudgetSpansFeedsOfOneReply) {
  // A reply that arrives in pieces is charged once: waiting for bytes does not renew the budget.
  ReplyLimits limits;
  limits.max_elements = 4;
  RespReader r(limits);
  const std::string first = "*2\r\n*2\r\n:1\r\n";
  ASSERT_TRUE(r.feed(first.data(), first.size()).ok());
  auto n = r.next();
  ASSERT_TRUE(n.ok()) << n.error().what();
  EXPECT_FALSE(n.value().has_value());
  const std::string second = ":2\r\n*1\r\n";  // 2 + 2 + 1 = 5 elements > 4
  ASSERT_TRUE(r.feed(second.data(), second.size()).ok());
  n = r.next();
  EXPECT_FALSE(n.ok());
  EXPECT_EQ(n.code(), dlock::errc::protocol);
}

}  // namespace
