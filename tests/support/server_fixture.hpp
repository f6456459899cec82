// A test fixture with a fresh redis-server, a dlock Client on it, and a foreign connection that
// acts behind dlock's back. Torn down after every test.
#pragma once

#include <gtest/gtest.h>

#include <optional>

#include "dlock/client.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    server.emplace();
    client.emplace(server->url());
    ASSERT_TRUE(client->ping().ok()) << server->log_tail();
    raw.emplace(*server);
  }
  void TearDown() override {
    raw.reset();
    client.reset();
    server.reset();
  }

  std::optional<RedisServer> server;
  std::optional<dlock::Client> client;
  std::optional<RawConnection> raw;
};

}  // namespace dlock::test
