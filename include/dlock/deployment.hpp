// dlock/deployment.hpp — what kind of Redis deployment a URL names.
//
// Defines:
//   dlock::Deployment            standalone server, Redis Cluster, or a Sentinel-managed primary
//   dlock::parse_deployment_url  the URL forms below
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dlock/result.hpp"
#include "dlock/url.hpp"

namespace dlock {

struct Deployment {
  enum class Kind { standalone, cluster, sentinel };
  Kind kind = Kind::standalone;
  // standalone: the server. cluster: the seed nodes (any one that answers is enough; the rest of
  // the cluster is discovered). sentinel: the sentinels. Credentials, database and TLS settings of
  // the URL are on every entry.
  std::vector<ServerAddress> nodes;
  // sentinel only: the name the sentinels monitor the primary under.
  std::string master_name;

  // The URL without passwords, for messages.
  std::string display() const;
};

// parse_deployment_url()
//
// Accepted forms (everything parse_url accepts is a standalone deployment):
//   redis-cluster://host:port,host:port            seeds of a Redis Cluster (no /db: a cluster has only db 0)
//   rediss-cluster://user:pass@host:port,...?ca=…  the same over TLS (query as for rediss://)
//   redis-sentinel://host:port,host:port/mymaster  sentinels and the monitored primary's name
//   redis-sentinel://:pass@h1:26379,h2:26379/mymaster/2
//                                                  with the primary's password and database
//   rediss-sentinel://…                            over TLS
// The user and password are those of the data nodes (the primary), not of the sentinels.
// Errors: errc::invalid_argument with a message quoting the URL with its password masked.
// Never blocks; does no name resolution.
Result<Deployment> parse_deployment_url(std::string_view url);

}  // namespace dlock
