// Unit tests for dlock's RESP command writer (src/io/command.hpp: RespWriter, format_command) and
// the visitor form of the EVALSHA encoding (encode_evalsha_with, KeyLayout/HoldScripts visitors):
// byte for byte against hiredis's own formatter, which dlock used before and no longer calls.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "io/command.hpp"
#include "renewal/lease_record.hpp"
#include "scripts/script_call.hpp"

namespace {

using dlock::detail::encode_evalsha;
using dlock::detail::encode_evalsha_with;
using dlock::detail::format_command;
using dlock::detail::HoldScripts;
using dlock::detail::KeyLayout;
using dlock::detail::RespWriter;
using dlock::detail::Script;

std::string hiredis_format(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* out = nullptr;
  const int n = redisFormatCommandArgv(&out, static_cast<int>(args.size()), argv.data(), lens.data());
  EXPECT_GE(n, 0);
  std::string s(out, static_cast<std::size_t>(n));
  std::free(out);
  return s;
}

void expect_same_as_hiredis(const std::vector<std::string>& args) {
  const std::string want = hiredis_format(args);
  EXPECT_EQ(format_command(args), want);
  std::vector<std::string_view> views(args.begin(), args.end());
  EXPECT_EQ(format_command(std::span<const std::string_view>(views)), want);
}

TEST(RespWriter, ExactBytesOfASmallCommand) {
  EXPECT_EQ(format_command({"GET", "foo"}), "*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n");
  EXPECT_EQ(format_command({"PING"}), "*1\r\n$4\r\nPING\r\n");
}

TEST(RespWriter, EmptyBinaryAndCrlfArguments) {
  expect_same_as_hiredis({"SET", "", std::string("\0\r\n$3\r\n\xff", 9), "*2\r\n", std::string(1, '\0')});
}

TEST(RespWriter, LengthsAcrossDigitBoundaries) {
  // Header lengths of 1 to 6 digits, each on both sides of the boundary.
  for (std::size_t len : {0u, 1u, 9u, 10u, 99u, 100u, 999u, 1000u, 9999u, 10000u, 99999u, 100000u}) {
    SCOPED_TRACE(len);
    expect_same_as_hiredis({"SET", "k", std::string(len, 'x')});
  }
}

TEST(RespWriter, ArgumentCountsAcrossDigitBoundaries) {
  for (std::size_t count : {9u, 10u, 11u, 99u, 100u, 101u, 1000u}) {
    SCOPED_TRACE(count);
    std::vector<std::string> args;
    for (std::size_t i = 0; i < count; ++i) args.push_back(std::to_string(i * 7919));
    expect_same_as_hiredis(args);
  }
}

TEST(RespWriter, RandomCommandsMatchHiredis) {
  std::mt19937 rng(20261203);  // fixed seed: a failure is repeatable
  std::uniform_int_distribution<int> count(1, 30), len(0, 300), byte(0, 255);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> args(static_cast<std::size_t>(count(rng)));
    for (auto& a : args) {
      a.resize(static_cast<std::size_t>(len(rng)));
      for (char& c : a) c = static_cast<char>(byte(rng));
    }
    expect_same_as_hiredis(args);
  }
}

TEST(RespWriter, TwoPieceBulkIsTheConcatenation) {
  const std::string_view key = "dlock:{orders}";
  std::size_t bytes = RespWriter::bulk_size(key.size() + 6) + RespWriter::bulk_size(3) + RespWriter::bulk_size(0);
  RespWriter w(3, bytes);
  w.bulk(key, ":fence");
  w.bulk("", "abc");
  w.bulk("", "");
  EXPECT_EQ(std::move(w).take(), hiredis_format({"dlock:{orders}:fence", "abc", ""}));
}

constexpr const char* kSha = "0123456789abcdef0123456789abcdef01234567";
const Script kScript{"test_script", "return 1", kSha};

TEST(EncodeEvalshaWith, VisitorsGiveTheListsEncoding) {
  const std::vector<std::string> keys{"dlock:{a}", "", std::string(300, 'k')};
  const std::vector<std::string> args{"owner", "30000", std::string("\0\r\n", 3)};
  auto each = [](const std::vector<std::string>& list) {
    return [&list](auto&& f) {
      for (const auto& s : list) f(std::string_view(s), std::string_view());
    };
  };
  EXPECT_EQ(encode_evalsha_with(kScript, each(keys), each(args)), encode_evalsha(kScript, keys, args));
  // The same strings cut in two anywhere.
  auto halves = [](const std::vector<std::string>& list) {
    return [&list](auto&& f) {
      for (const auto& s : list) f(std::string_view(s).substr(0, s.size() / 2), std::string_view(s).substr(s.size() / 2));
    };
  };
  EXPECT_EQ(encode_evalsha_with(kScript, halves(keys), halves(args)), encode_evalsha(kScript, keys, args));
  std::vector<std::string> argv{"EVALSHA", kSha, "3"};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  EXPECT_EQ(encode_evalsha(kScript, keys, args), hiredis_format(argv));
}

// A layout like a lock kind's: keys and arguments derived from the lock's key, and literals.
constexpr KeyLayout::Item kKeys[] = {{""}, {":fence"}, {":waiters"}};
constexpr KeyLayout::Item kExtra[] = {{":ch"}, {"5000", true}};
constexpr KeyLayout kLayout{kKeys, kExtra, kKeys, {}, kKeys, kExtra, ":ch", false};

template <class Visit>
std::vector<std::string> collect(Visit visit) {
  std::vector<std::string> out;
  visit([&](std::string_view head, std::string_view tail) { out.push_back(std::string(head) + std::string(tail)); });
  return out;
}

TEST(EncodeEvalshaWith, HoldScriptsVisitorsMatchTheirLists) {
  HoldScripts laid_out;
  laid_out.layout = &kLayout;
  laid_out.key = "dlock:{orders}";
  EXPECT_EQ(collect([&](auto&& f) { laid_out.visit_release_keys(f); }), laid_out.release_key_list());
  EXPECT_EQ(collect([&](auto&& f) { laid_out.visit_renew_keys(f); }), laid_out.renew_key_list());
  std::vector<std::string> extra;
  laid_out.append_release_extra(extra);
  EXPECT_EQ(collect([&](auto&& f) { laid_out.visit_release_extra(f); }), extra);
  EXPECT_EQ(extra, (std::vector<std::string>{"dlock:{orders}:ch", "5000"}));

  HoldScripts listed;
  listed.release_keys = dlock::detail::StringList({"k1", "k2"});
  listed.release_extra = dlock::detail::StringList({"x"});
  EXPECT_EQ(collect([&](auto&& f) { listed.visit_release_keys(f); }), listed.release_key_list());
  EXPECT_EQ(collect([&](auto&& f) { listed.visit_release_extra(f); }), (std::vector<std::string>{"x"}));
  EXPECT_TRUE(collect([&](auto&& f) { listed.visit_renew_extra(f); }).empty());
}

}  // namespace
