// Unit tests for validate_lock_name / validate_prefix (src/util/names.hpp).
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "util/names.hpp"

namespace {

using dlock::detail::max_name_length;
using dlock::detail::validate_lock_name;
using dlock::detail::validate_prefix;

void expect_name_ok(std::string_view name) {
  auto r = validate_lock_name(name);
  EXPECT_TRUE(r.ok()) << "name should be accepted (" << name.size() << " bytes): " << r.error().what();
  EXPECT_EQ(r.code(), std::error_code{});
}

std::string expect_name_rejected(std::string_view name) {
  auto r = validate_lock_name(name);
  EXPECT_FALSE(r.ok()) << "name should be rejected (" << name.size() << " bytes)";
  EXPECT_EQ(r.code(), dlock::errc::invalid_argument);
  EXPECT_FALSE(r.error().message.empty());
  return r.error().message;
}

void expect_prefix_ok(std::string_view prefix) {
  auto r = validate_prefix(prefix);
  EXPECT_TRUE(r.ok()) << "prefix should be accepted: '" << prefix << "': " << r.error().what();
}

std::string expect_prefix_rejected(std::string_view prefix) {
  auto r = validate_prefix(prefix);
  EXPECT_FALSE(r.ok()) << "prefix should be rejected: '" << prefix << "'";
  EXPECT_EQ(r.code(), dlock::errc::invalid_argument);
  EXPECT_FALSE(r.error().message.empty());
  return r.error().message;
}

// ---- lock names ------------------------------------------------------------------------------

TEST(LockName, MaxLengthIs512) { EXPECT_EQ(max_name_length, 512u); }

TEST(LockName, OrdinaryNamesAccepted) {
  expect_name_ok("orders");
  expect_name_ok("a");
  expect_name_ok("orders:eu-west:42");
  expect_name_ok("job/2024-01-01T00:00:00Z");
  expect_name_ok("with space");
  expect_name_ok("~!@#$%^&*()_+-=[]|\\;'\",.<>/?`");
}

TEST(LockName, EmptyRejected) {
  EXPECT_NE(expect_name_rejected("").find("empty"), std::string::npos);
}

TEST(LockName, LengthBoundary) {
  expect_name_ok(std::string(511, 'n'));
  expect_name_ok(std::string(512, 'n'));
  const std::string msg = expect_name_rejected(std::string(513, 'n'));
  EXPECT_NE(msg.find("513"), std::string::npos) << msg;
  expect_name_rejected(std::string(100000, 'n'));
}

TEST(LockName, LengthCountsBytesNotCharacters) {
  // "é" is two bytes in UTF-8: 256 of them are 512 bytes (accepted), 257 are 514 (rejected).
  std::string ok;
  for (int i = 0; i < 256; ++i) ok += "\xc3\xa9";
  expect_name_ok(ok);
  expect_name_rejected(ok + "\xc3\xa9");
}

TEST(LockName, BracesRejected) {
  expect_name_rejected("{");
  expect_name_rejected("}");
  expect_name_rejected("{orders}");
  expect_name_rejected("ord{ers");
  expect_name_rejected("orders}");
  EXPECT_NE(expect_name_rejected("a{b").find("brace"), std::string::npos);
}

TEST(LockName, ControlCharactersRejected) {
  for (int c = 0; c < 0x20; ++c) {
    const std::string name = "ab" + std::string(1, static_cast<char>(c)) + "cd";
    const std::string msg = expect_name_rejected(name);
    EXPECT_NE(msg.find("control"), std::string::npos) << "char " << c << ": " << msg;
  }
  expect_name_rejected(std::string(1, '\0'));
  expect_name_rejected(std::string("x\0y", 3));
  expect_name_rejected("line\r\n");
  expect_name_rejected("\t");
}

TEST(LockName, DelRejected) {
  expect_name_rejected("\x7f");
  expect_name_rejected("abc\x7f");
}

TEST(LockName, PrintableAsciiBoundariesAccepted) {
  expect_name_ok(" ");     // 0x20
  expect_name_ok("~");     // 0x7e
  expect_name_ok("\x80");  // first byte above DEL (a UTF-8 continuation byte): allowed
}

TEST(LockName, Utf8Accepted) {
  expect_name_ok("commandes-\xc3\xa9t\xc3\xa9");      // "commandes-été"
  expect_name_ok("\xe6\xb3\xa8\xe6\x96\x87");          // "注文"
  expect_name_ok("\xf0\x9f\x94\x92-lock");             // "🔒-lock"
  expect_name_ok("\xd0\xb7\xd0\xb0\xd0\xba\xd0\xb0\xd0\xb7");  // "заказ"
}

// ---- key prefixes ----------------------------------------------------------------------------

TEST(KeyPrefix, DefaultAndOrdinaryPrefixesAccepted) {
  expect_prefix_ok("dlock:");
  expect_prefix_ok("myapp:locks:");
  expect_prefix_ok("a");
  expect_prefix_ok("~!@#$%^&*()_+-=[]|\\;'\",.<>/?`");
  expect_prefix_ok("\xc3\xa9t\xc3\xa9:");
}

TEST(KeyPrefix, EmptyPrefixAccepted) { expect_prefix_ok(""); }

TEST(KeyPrefix, LongPrefixAccepted) { expect_prefix_ok(std::string(2000, 'p')); }

TEST(KeyPrefix, BracesRejected) {
  EXPECT_NE(expect_prefix_rejected("{app}:").find("brace"), std::string::npos);
  expect_prefix_rejected("app{");
  expect_prefix_rejected("}");
}

TEST(KeyPrefix, SpaceRejected) {
  expect_prefix_rejected(" ");
  expect_prefix_rejected("my app:");
  expect_prefix_rejected("app: ");
}

TEST(KeyPrefix, ControlCharactersAndDelRejected) {
  for (int c = 0; c < 0x20; ++c) {
    expect_prefix_rejected("app" + std::string(1, static_cast<char>(c)) + ":");
  }
  expect_prefix_rejected(std::string("a\0b", 3));
  expect_prefix_rejected("app\x7f:");
}


// Lease options are checked as they take effect (defaults filled in): a lease that would be lost
// every time, whatever the server does, is an invalid argument.
TEST(LeaseOptionsCheck, ValidityAndRenewalInEffect) {
  using dlock::detail::validate_lease;
  using std::chrono::milliseconds;
  auto with = [](milliseconds ttl, milliseconds renew, milliseconds drift) {
    dlock::LeaseOptions o;
    o.ttl = ttl;
    o.renew_interval = renew;
    o.drift_allowance = drift;
    return o;
  };
  EXPECT_TRUE(validate_lease(dlock::LeaseOptions{}).ok());
  // 4 ms: 2 ms of validity, a renewal after 1 ms. 3 ms: 1 ms of validity, a renewal after 1 ms.
  EXPECT_TRUE(validate_lease(with(milliseconds(4), milliseconds(0), milliseconds(0))).ok());
  EXPECT_FALSE(validate_lease(with(milliseconds(3), milliseconds(0), milliseconds(0))).ok());
  for (auto ttl : {milliseconds(1), milliseconds(2)}) {  // default drift: ttl/100 + 2 ms >= ttl
    auto r = validate_lease(with(ttl, milliseconds(0), milliseconds(0)));
    ASSERT_FALSE(r.ok()) << ttl.count();
    EXPECT_EQ(r.error().code, dlock::errc::invalid_argument);
    EXPECT_NE(r.error().what().find("drift allowance"), std::string::npos) << r.error().what();
  }
  // 30 s TTL, default drift 302 ms: a renewal at 29.8 s comes after the validity's end.
  auto late = validate_lease(with(milliseconds(30000), milliseconds(29800), milliseconds(0)));
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().what().find("renew interval (29800 ms)"), std::string::npos) << late.error().what();
  EXPECT_TRUE(validate_lease(with(milliseconds(30000), milliseconds(29600), milliseconds(0))).ok());
  EXPECT_FALSE(validate_lease(with(milliseconds(30000), milliseconds(15000), milliseconds(20000))).ok());
  EXPECT_FALSE(validate_lease(with(milliseconds(30000), milliseconds(0), milliseconds(20000))).ok());  // ttl/3 = 10 s
  // A fixed lease is never renewed: only its validity counts.
  auto fixed = with(milliseconds(30000), milliseconds(0), milliseconds(25000));
  fixed.mode = dlock::LeaseMode::fixed_ttl;
  EXPECT_TRUE(validate_lease(fixed).ok());
}

}  // namespace
