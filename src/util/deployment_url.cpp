#include <cctype>
#include <string>

#include "dlock/deployment.hpp"

namespace dlock {
namespace {

Error bad(std::string_view url, const std::string& why) {
  // Mask the password as parse_url does (url.cpp): the userinfo ends at the URL's last '@';
  // everything in it after its first ':' is the password, or all of it when it has no ':'.
  std::string shown(url);
  auto scheme_end = shown.find("://");
  auto at = shown.rfind('@');
  if (scheme_end != std::string::npos && at != std::string::npos && at > scheme_end) {
    const std::size_t from = scheme_end + 3;
    auto colon = shown.find(':', from);
    const std::size_t secret = colon != std::string::npos && colon < at ? colon + 1 : from;
    shown.replace(secret, at - secret, "***");
  }
  return Error(errc::invalid_argument, "bad Redis URL '" + shown + "': " + why);
}

}  // namespace

std::string Deployment::display() const {
  std::string out;
  switch (kind) {
    case Kind::standalone: return nodes.empty() ? std::string() : nodes.front().display();
    case Kind::cluster: out = "cluster "; break;
    case Kind::sentinel: out = "sentinel "; break;
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i) out += ',';
    out += nodes[i].display();
  }
  if (kind == Kind::sentinel) out += "/" + master_name;
  return out;
}

Result<Deployment> parse_deployment_url(std::string_view url) {
  const auto sep = url.find("://");
  // Scheme names are case-insensitive (RFC 3986), as parse_url takes them.
  std::string scheme(sep == std::string_view::npos ? std::string_view() : url.substr(0, sep));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  Deployment d;
  std::string node_scheme;
  if (scheme == "redis-cluster" || scheme == "rediss-cluster") {
    d.kind = Deployment::Kind::cluster;
    node_scheme = scheme == "redis-cluster" ? "redis" : "rediss";
  } else if (scheme == "redis-sentinel" || scheme == "rediss-sentinel") {
    d.kind = Deployment::Kind::sentinel;
    node_scheme = scheme == "redis-sentinel" ? "redis" : "rediss";
  } else {
    auto one = parse_url(url);
    if (!one) {
      // parse_url knows the one-server schemes only: name the deployment forms too.
      if (scheme != "redis" && scheme != "rediss" && scheme != "unix") {
        return Error(one.error().code, one.error().what() +
                                           "; a Redis Cluster is redis-cluster://, Sentinel redis-sentinel:// "
                                           "(rediss-cluster://, rediss-sentinel:// over TLS)");
      }
      return one.error();
    }
    d.nodes.push_back(std::move(*one));
    return d;
  }

  std::string_view rest = url.substr(sep + 3);
  // The userinfo first, up to the LAST '@' (as parse_url does): a password may hold '/', '?'
  // or ','; the hosts, path and query never hold '@'.
  std::string_view userinfo;
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = rest.substr(0, at + 1);
    rest = rest.substr(at + 1);
  }
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q);
    rest = rest.substr(0, q);
  }
  std::string_view path;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }

  std::string db_part;
  if (d.kind == Deployment::Kind::cluster) {
    if (!path.empty()) return bad(url, "a cluster URL takes no path (Redis Cluster has only database 0)");
  } else {
    auto slash = path.find('/');
    d.master_name = std::string(path.substr(0, slash));
    if (d.master_name.empty()) return bad(url, "a sentinel URL needs the primary's name: redis-sentinel://host:port/mymaster");
    // Sentinel takes a master name as one word of its config; one with a space or a control
    // character would only fail later, at run time, as "no sentinel could name the primary".
    // (The name is taken as written: no %-escapes are decoded.)
    for (unsigned char c : d.master_name) {
      if (c <= ' ' || c == 0x7f) return bad(url, "the primary's name may not contain spaces or control characters");
    }
    if (slash != std::string_view::npos) db_part = "/" + std::string(path.substr(slash + 1));
  }
  if (rest.empty()) return bad(url, "no host");

  std::size_t start = 0;
  while (start <= rest.size()) {
    auto comma = rest.find(',', start);
    std::string_view host = rest.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (host.empty()) return bad(url, "empty host in the host list");
    std::string one = node_scheme + "://" + std::string(userinfo) + std::string(host) + std::string(query);
    auto parsed = parse_url(one);
    if (!parsed) return bad(url, "host '" + std::string(host) + "': " + parsed.error().what());
    d.nodes.push_back(std::move(*parsed));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (!db_part.empty()) {
    auto with_db = parse_url("redis://h" + db_part);
    if (!with_db) return bad(url, "bad database '" + db_part.substr(1) + "'");
    for (auto& n : d.nodes) n.db = with_db->db;
  }
  return d;
}

}  // namespace dlock
