#include <gtest/gtest.h>

#include "dlock/deployment.hpp"

namespace dlock {
namespace {

TEST(DeploymentUrlTest, PlainUrlsAreStandalone) {
  auto d = parse_deployment_url("redis://127.0.0.1:7000/2");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, Deployment::Kind::standalone);
  ASSERT_EQ(d->nodes.size(), 1u);
  EXPECT_EQ(d->nodes[0].db, 2);
}

TEST(DeploymentUrlTest, ClusterSeeds) {
  auto d = parse_deployment_url("redis-cluster://:s3cret@127.0.0.1:7000,localhost:7001,[::1]:7002");
  ASSERT_TRUE(d.ok()) << d.error().what();
  EXPECT_EQ(d->kind, Deployment::Kind::cluster);
  ASSERT_EQ(d->nodes.size(), 3u);
  EXPECT_EQ(d->nodes[1].host, "localhost");
  EXPECT_EQ(d->nodes[1].port, 7001);
  EXPECT_EQ(d->nodes[2].host, "::1");
  EXPECT_EQ(d->nodes[0].password, "s3cret");
  EXPECT_EQ(d->nodes[2].password, "s3cret");
  EXPECT_EQ(d->display().find("s3cret"), std::string::npos);
}

TEST(DeploymentUrlTest, SentinelWithMasterNameAndDb) {
  auto d = parse_deployment_url("redis-sentinel://:pw@127.0.0.1:26379,127.0.0.1:26380/mymaster/3");
  ASSERT_TRUE(d.ok()) << d.error().what();
  EXPECT_EQ(d->kind, Deployment::Kind::sentinel);
  EXPECT_EQ(d->master_name, "mymaster");
  ASSERT_EQ(d->nodes.size(), 2u);
  EXPECT_EQ(d->nodes[1].port, 26380);
  EXPECT_EQ(d->nodes[0].db, 3);
  EXPECT_EQ(d->display(), "sentinel 127.0.0.1:26379,127.0.0.1:26380/mymaster");
}

TEST(DeploymentUrlTest, BadForms) {
  for (const char* url : {"redis-cluster://", "redis-cluster://h:1,,h:2", "redis-cluster://h:1/0",
                          "redis-sentinel://h:26379", "redis-sentinel://h:26379/", "redis-sentinel://h:x/m",
                          "redis-sentinel://h:1/m/notanumber", "redis-cluster://:pw@h:99999"}) {
    auto d = parse_deployment_url(url);
    ASSERT_FALSE(d.ok()) << url;
    EXPECT_EQ(d.error().code, errc::invalid_argument) << url;
  }
  auto masked = parse_deployment_url("redis-cluster://:hunter2@h:99999");
  ASSERT_FALSE(masked.ok());
  EXPECT_EQ(masked.error().what().find("hunter2"), std::string::npos) << masked.error().what();
  // A userinfo without ':' is all secret, as parse_url masks it.
  for (const char* url : {"redis-cluster://hunter2@h:99999", "redis-sentinel://hunter2@h:1", "redis-cluster://al:hunter2@h:1/0",
                          "redis-sentinel://:hun/ter2@h:x/m"}) {
    auto m = parse_deployment_url(url);
    ASSERT_FALSE(m.ok()) << url;
    EXPECT_EQ(m.error().what().find("hunter2"), std::string::npos) << m.error().what();
    EXPECT_EQ(m.error().what().find("ter2"), std::string::npos) << m.error().what();
  }
}

// Scheme names are case-insensitive, as for parse_url; a master name Sentinel could never know
// (a space, a control character) is refused here, not at run time (one with '%' is taken as
// written); a
// redis:// URL with a host list says which URL forms take several hosts.
TEST(DeploymentUrlTest, SchemeCaseMasterNameAndHostLists) {
  auto upper = parse_deployment_url("REDIS-CLUSTER://h:1,h:2");
  ASSERT_TRUE(upper.ok()) << upper.error().what();
  EXPECT_EQ(upper->kind, Deployment::Kind::cluster);
  auto mixed = parse_deployment_url("Redis-Sentinel://h:26379/main");
  ASSERT_TRUE(mixed.ok()) << mixed.error().what();
  EXPECT_EQ(mixed->kind, Deployment::Kind::sentinel);
  for (const char* url : {"redis-sentinel://h:26379/my master", "redis-sentinel://h:26379/m\tx"}) {
    auto d = parse_deployment_url(url);
    ASSERT_FALSE(d.ok()) << url;
    EXPECT_NE(d.error().what().find("primary's name"), std::string::npos) << d.error().what();
  }
  auto percent = parse_deployment_url("redis-sentinel://h:26379/m%20x");
  ASSERT_TRUE(percent.ok()) << percent.error().what();
  EXPECT_EQ(percent->master_name, "m%20x");
  auto list = parse_deployment_url("redis://h:1,h2:2");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.error().what().find("redis-cluster://"), std::string::npos) << list.error().what();
  auto ports = parse_deployment_url("redis://127.0.0.1:6379:1");
  ASSERT_FALSE(ports.ok());
  EXPECT_EQ(ports.error().what().find("IPv6"), std::string::npos) << ports.error().what();
  auto v6 = parse_deployment_url("redis://::1:6379");
  ASSERT_FALSE(v6.ok());
  EXPECT_NE(v6.error().what().find("IPv6"), std::string::npos) << v6.error().what();
  auto scheme = parse_deployment_url("http://h:1");
  ASSERT_FALSE(scheme.ok());
  EXPECT_NE(scheme.error().what().find("redis-sentinel://"), std::string::npos) << scheme.error().what();
}

// Passwords keep parse_url's lenient rules: the userinfo ends at the last '@', so '/', '?' and
// ',' inside it are the password's, not a path, a query or a host list.
TEST(DeploymentUrlTest, PasswordsWithSlashCommaAndQuestionMark) {
  auto s = parse_deployment_url("redis-sentinel://:pa/s?s,w@h1:26379,h2:26380/mymaster/2");
  ASSERT_TRUE(s.ok()) << s.error().what();
  ASSERT_EQ(s->nodes.size(), 2u);
  EXPECT_EQ(s->nodes[0].password, "pa/s?s,w");
  EXPECT_EQ(s->nodes[1].password, "pa/s?s,w");
  EXPECT_EQ(s->master_name, "mymaster");
  EXPECT_EQ(s->nodes[0].db, 2);
  auto c = parse_deployment_url("redis-cluster://u:pa/ss@h1:7000,h2:7001");
  ASSERT_TRUE(c.ok()) << c.error().what();
  EXPECT_EQ(c->nodes[1].user, "u");
  EXPECT_EQ(c->nodes[1].password, "pa/ss");
}

}  // namespace
}  // namespace dlock
