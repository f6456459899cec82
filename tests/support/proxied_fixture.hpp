// ServerFixture plus a fault proxy (support/fault_proxy.hpp) in front of the server and a second
// dlock Client that talks through it (`via_proxy`): the test breaks, pauses or holds back that
// Client's traffic while `client` and `raw` still reach the server directly. Torn down after
// every test, the proxied Client first.
#pragma once

#include <gtest/gtest.h>

#include <optional>

#include "dlock/client.hpp"
#include "support/fault_proxy.hpp"
#include "support/server_fixture.hpp"

namespace dlock::test {

class ProxiedServerFixture : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    proxy.emplace("127.0.0.1", server->port());
    via_proxy.emplace(proxy->url());
    ASSERT_TRUE(via_proxy->ping().ok());
  }
  void TearDown() override {
    via_proxy.reset();
    proxy.reset();
    ServerFixture::TearDown();
  }

  std::optional<FaultProxy> proxy;
  std::optional<dlock::Client> via_proxy;
};

}  // namespace dlock::test
