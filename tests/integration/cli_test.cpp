// Integration tests of the `dlock` command-line tool (cli/) against real redis-server processes.
//
// The binary is found next to this test executable's build tree (<exe dir>/../cli/dlock), else
// through $DLOCK_CLI. Every test starts its own server, runs the binary with run_command() (or in
// the background, to signal it), and checks Redis behind its back with a plain hiredis connection.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/cli_binary.hpp"
#include "support/fault_proxy.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/wait.hpp"
#include "support/redis_server.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::CommandResult;
using dlock::test::RawConnection;
using dlock::test::RedisServer;
using dlock::test::RedisServerOptions;
using dlock::test::eventually;
using dlock::test::ms_since;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Env = std::vector<std::pair<std::string, std::string>>;

// ------------------------------------------------------------------------------ helpers

using dlock::test::cli_binary;



std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::string last_line(const std::string& text) {
  auto lines = lines_of(text);
  return lines.empty() ? std::string() : lines.back();
}

// "KEY=value" from `dlock acquire`'s output (the value possibly single-quoted).
std::string shell_var(const std::string& out, const std::string& name) {
  for (const auto& line : lines_of(out)) {
    if (line.rfind(name + "=", 0) != 0) continue;
    std::string v = line.substr(name.size() + 1);
    if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
    return v;
  }
  return {};
}

const std::regex kOwnerToken("^[0-9a-f]{32}@[^:]+:([0-9]+):[0-9]+$");

// ---------------------------------------------------------- a minimal JSON parser (validator)

struct JsonMember;

struct JsonValue {
  enum class Type { null, boolean, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  std::string text;  // string value, or the number as written
  std::vector<JsonValue> items;
  // Not std::pair<std::string, JsonValue>: clang cannot instantiate that pair inside the
  // class that it is a member of (libstdc++'s pair checks JsonValue's constructibility).
  std::vector<JsonMember> members;

  const JsonValue* find(const std::string& key) const;
  const JsonValue& operator[](const std::string& key) const;
  bool is_null() const { return type == Type::null; }
  long long integer() const { return type == Type::number ? std::stoll(text) : -999999; }
  const std::string& str() const { return text; }
};

struct JsonMember {
  std::string first;
  JsonValue second;
};

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

const JsonValue& JsonValue::operator[](const std::string& key) const {
  static const JsonValue missing;
  const JsonValue* v = find(key);
  return v != nullptr ? *v : missing;
}

class JsonParser {
 public:
  // The one JSON value `s` holds (surrounding whitespace allowed), or nullopt.
  static std::optional<JsonValue> parse(const std::string& s) {
    JsonParser p(s);
    JsonValue v;
    p.ws();
    if (!p.value(v, 0)) return std::nullopt;
    p.ws();
    if (p.i_ != s.size()) return std::nullopt;
    return v;
  }

 private:
  explicit JsonParser(const std::string& s) : s_(s) {}
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool lit(const char* w) {
    const std::string word(w);
    if (s_.compare(i_, word.size(), word) != 0) return false;
    i_ += word.size();
    return true;
  }
  bool value(JsonValue& v, int depth) {
    if (depth > 64 || i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v.type = JsonValue::Type::string;
      return string(v.text);
    }
    if (c == 't' || c == 'f') {
      v.type = JsonValue::Type::boolean;
      v.boolean = c == 't';
      return lit(c == 't' ? "true" : "false");
    }
    if (c == 'n') return lit("null");
    return number(v);
  }
  bool number(JsonValue& v) {
    static const std::regex re("^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
    std::smatch m;
    const std::string rest = s_.substr(i_, 64);
    if (!std::regex_search(rest, m, re) || m.length(0) == 0) return false;
    v.type = JsonValue::Type::number;
    v.text = m.str(0);
    i_ += static_cast<std::size_t>(m.length(0));
    return true;
  }
  bool string(std::string& out) {
    ++i_;  // "
    while (i_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          for (int k = 0; k < 4; ++k) {
            if (!std::isxdigit(static_cast<unsigned char>(s_[i_ + k]))) return false;
          }
          const unsigned cp = static_cast<unsigned>(std::stoul(s_.substr(i_, 4), nullptr, 16));
          i_ += 4;
          out.push_back(cp < 0x80 ? static_cast<char>(cp) : '?');  // enough for these tests
          break;
        }
        default: return false;
      }
    }
    return false;
  }
  bool array(JsonValue& v, int depth) {
    v.type = JsonValue::Type::array;
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
    for (;;) {
      JsonValue item;
      ws();
      if (!value(item, depth + 1)) return false;
      v.items.push_back(std::move(item));
      ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == ']') return ++i_, true;
      return false;
    }
  }
  bool object(JsonValue& v, int depth) {
    v.type = JsonValue::Type::object;
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
    for (;;) {
      ws();
      std::string key;
      if (i_ >= s_.size() || s_[i_] != '"' || !string(key)) return false;
      ws();
      if (i_ >= s_.size() || s_[i_] != ':') return false;
      ++i_;
      ws();
      JsonValue member;
      if (!value(member, depth + 1)) return false;
      v.members.push_back({std::move(key), std::move(member)});
      ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == '}') return ++i_, true;
      return false;
    }
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

// Parses `text` as exactly one JSON object, failing the test when it does not parse.
JsonValue parse_json(const std::string& text, const std::string& what) {
  auto v = JsonParser::parse(text);
  EXPECT_TRUE(v.has_value()) << what << ": output is not valid JSON:\n" << text;
  if (!v) return {};
  EXPECT_EQ(v->type, JsonValue::Type::object) << what << ": not a JSON object:\n" << text;
  return *v;
}

// ------------------------------------------------------------------------------ fixture

// Runs the CLI in the background (to signal it), its output going to files.
class BackgroundCli {
 public:
  BackgroundCli(const std::vector<std::string>& argv, const Env& env, const std::string& out, const std::string& err)
      : out_(out), err_(err) {
    auto prep = std::make_shared<Prepared>();
    prep->argv = argv;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string entry(*e);
      const std::string name = entry.substr(0, entry.find('='));
      bool overridden = false;
      for (const auto& [k, v] : env) overridden = overridden || k == name;
      if (!overridden) prep->env.push_back(entry);
    }
    for (const auto& [k, v] : env) prep->env.push_back(k + "=" + v);
    for (auto& a : prep->argv) prep->cargv.push_back(a.data());
    prep->cargv.push_back(nullptr);
    for (auto& e : prep->env) prep->cenv.push_back(e.data());
    prep->cenv.push_back(nullptr);
    child_ = std::make_unique<ChildProcess>([prep, out, err]() -> int {
      dlock::test::detail::reset_signals();
      const int in_fd = ::open("/dev/null", O_RDONLY);
      const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (in_fd < 0 || out_fd < 0 || err_fd < 0) return 125;
      ::dup2(in_fd, STDIN_FILENO);
      ::dup2(out_fd, STDOUT_FILENO);
      ::dup2(err_fd, STDERR_FILENO);
      dlock::test::detail::close_fds_from(3);
      ::execve(prep->cargv[0], prep->cargv.data(), prep->cenv.data());
      return 127;
    });
  }

  ChildProcess& process() { return *child_; }
  std::string out() const { return read_file(out_); }
  std::string err() const { return read_file(err_); }

 private:
  struct Prepared {
    std::vector<std::string> argv, env;
    std::vector<char*> cargv, cenv;
  };
  std::string out_, err_;
  std::unique_ptr<ChildProcess> child_;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = cli_binary();
    if (binary_.empty()) GTEST_SKIP() << "the dlock CLI is not built (no <build>/cli/dlock, no $DLOCK_CLI)";
    char tmpl[] = "/tmp/dlock-cli-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    server.emplace(server_options());
    raw.emplace(*server);
  }
  void TearDown() override {
    background_.clear();
    raw.reset();
    server.reset();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }
  virtual RedisServerOptions server_options() { return {}; }

  // The environment every run gets: nothing inherited from the caller's DLOCK_* variables.
  Env env_with(const Env& extra) const {
    Env env = {{"DLOCK_REDIS_URL", ""}, {"DLOCK_PREFIX", ""}, {"DLOCK_OWNER", ""},
               {"DLOCK_REDIS_PASSWORD", ""}, {"DLOCK_REDIS_USER", ""}};
    for (const auto& [k, v] : extra) {
      bool replaced = false;
      for (auto& [ek, ev] : env) {
        if (ek == k) {
          ev = v;
          replaced = true;
        }
      }
      if (!replaced) env.emplace_back(k, v);
    }
    return env;
  }

  std::vector<std::string> argv_for(const std::vector<std::string>& args, bool with_url = true) const {
    std::vector<std::string> argv{binary_};
    if (with_url) {
      argv.push_back("--redis");
      argv.push_back(server->url());
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // Runs `dlock --redis <server> args...` and waits for it.
  CommandResult dlock(const std::vector<std::string>& args, const Env& env = {}, bool with_url = true) {
    return dlock::test::run_command(argv_for(args, with_url), env_with(env), 30s);
  }

  BackgroundCli& background(const std::vector<std::string>& args, const Env& env = {}) {
    const std::string n = std::to_string(background_.size());
    background_.push_back(std::make_unique<BackgroundCli>(argv_for(args), env_with(env), path("bg" + n + ".out"),
                                                          path("bg" + n + ".err")));
    return *background_.back();
  }

  std::string path(const std::string& file) const { return dir_ + "/" + file; }
  ChildProcess& background_process(std::size_t i) { return background_.at(i)->process(); }
  std::string background_err(std::size_t i) const { return background_.at(i)->err(); }
  static std::string key(const std::string& name) { return "dlock:{" + name + "}"; }
  static std::string foreign_token() { return "0123456789abcdef0123456789abcdef@otherhost:4242:1700000000000"; }
  void hold_foreign(const std::string& name, int ttl_ms = 30000) {
    ASSERT_EQ(raw->cmd({"SET", key(name), foreign_token(), "PX", std::to_string(ttl_ms)}), "OK");
  }
  long long subscribers(const std::string& name) {
    auto r = raw->cmd_array({"PUBSUB", "NUMSUB", key(name) + ":ch"});
    return r.size() == 2 ? std::stoll(r[1]) : -1;
  }
  // A `dlock run NAME` started through `proxy` waits for NAME, held by a foreign owner: once it
  // has subscribed and tried, the proxy holds every reply and the foreign hold is deleted, so
  // that dlock's next try (within its 500 ms recheck) takes the lock with its answer held back.
  // Returns the owner that try set; empty (and a failed expectation) when it never came.
  std::string take_with_reply_held(const std::string& name, dlock::test::FaultProxy& proxy, BackgroundCli& bg) {
    EXPECT_TRUE(eventually([&] { return subscribers(name) == 1; }, 5s)) << "the waiter never subscribed\n" << bg.err();
    std::this_thread::sleep_for(200ms);  // its first try's "busy" is in: the next try comes by itself
    proxy.hold_replies();
    raw->cmd({"DEL", key(name)});
    std::string owner;
    const bool taken = eventually([&] {
      owner = raw->cmd({"GET", key(name)});
      return owner != "(nil)";
    }, 5s);
    EXPECT_TRUE(taken) << "the waiter did not take the free lock\n" << bg.err();
    return taken ? owner : std::string();
  }
  static std::string describe(const CommandResult& r) {
    return "exit " + std::to_string(r.exit_code) + "\n--- stdout ---\n" + r.out + "\n--- stderr ---\n" + r.err;
  }

  std::optional<RedisServer> server;
  std::optional<RawConnection> raw;
  const std::string& binary() const { return binary_; }

 private:
  std::string binary_;
  std::string dir_;
  std::vector<std::unique_ptr<BackgroundCli>> background_;
};

// ------------------------------------------------------------------ usage and exit codes

TEST_F(CliTest, UsageErrorsExit64) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"run"},
      {"run", "x"},
      {"run", "x", "--wait", "5x", "--", "true"},
      {"run", "x", "--ttl", "-3s", "--", "true"},
      {"run", "x", "--grace", "40s", "--", "true"},             // grace not shorter than the 30s TTL
      {"run", "x", "--ttl", "2s", "--grace", "2s", "--", "true"},
      {"run", "x", "--lost-exit-code", "300", "--", "true"},
      {"run", "a{b}", "--", "true"},
      {"acquire", "x"},                                           // --ttl is required
      {"acquire", "x", "--ttl", "1.5ms"},                        // finer than a millisecond
      {"release", "x"},                                           // no OWNER, no DLOCK_OWNER
      {"unlock", "x"},                                            // --force is required
      {"status"},
      {"status", "--bogus", "x"},
      {"list", "a", "b"},
      {"run", "x", "--kind", "bogus", "--", "true"},
      {"run", "x", "--kind", "mutex", "--read", "--", "true"},   // --read is for rw
      {"run", "x", "--kind", "fair", "--permits", "2", "--", "true"},
      {"run", "x", "--permits", "0", "--", "true"},
      {"run", "x", "--permits", "2", "--take", "3", "--", "true"},  // could never be granted
      {"run", "x", "--read", "--take", "1", "--", "true"},
      {"run", "never-made", "--kind", "semaphore", "--", "true"},  // no size stored, none given
      {"acquire", "x", "--ttl", "5s", "--kind", "rw"},            // acquire is for mutexes
      {"acquire", "x", "--ttl", "1000000h"},                      // beyond 100 years: not exit 76
      {"run", "x", "--ttl", "1000000h", "--", "true"},
      {"extend", "x", foreign_token(), "--ttl", "1000000h"},
      {"acquire", "x", "--ttl", "2ms"},                           // the drift allowance eats it
      {"acquire", "x", "--ttl", "5s", "--wait", "1s", "--no-wait"},  // which one was meant?
      {"run", "x", "--no-wait", "--wait", "2s", "--", "true"},
  };
  for (const auto& args : bad) {
    auto r = dlock(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 64) << "dlock " << joined << "\n" << describe(r);
    EXPECT_FALSE(r.err.empty()) << "dlock " << joined << " said nothing";
  }
  auto bad_url = dlock({"--redis", "http://nope", "status", "x"}, {}, /*with_url=*/false);
  EXPECT_EQ(bad_url.exit_code, 64) << describe(bad_url);
  // A global option's value left out: the command word is not taken for the URL (that said
  // "unknown command 'job'"); a prefix that happens to be a command word still works.
  auto no_url = dlock({"--redis", "run", "job", "--", "true"}, {}, /*with_url=*/false);
  EXPECT_EQ(no_url.exit_code, 64) << describe(no_url);
  EXPECT_NE(no_url.err.find("--redis needs a value before the command word 'run'"), std::string::npos)
      << describe(no_url);
  auto no_prefix = dlock({"--prefix", "list"});
  EXPECT_NE(no_prefix.err.find("--prefix needs a value before the command word 'list'"), std::string::npos)
      << describe(no_prefix);
  auto word_as_prefix = dlock({"--prefix", "run", "status", "job"});
  EXPECT_EQ(word_as_prefix.exit_code, 0) << describe(word_as_prefix);
  // A TTL too short for the default grace names it as the default, and the way out.
  auto default_grace = dlock({"run", "x", "--ttl", "5s", "--", "true"});
  EXPECT_EQ(default_grace.exit_code, 64) << describe(default_grace);
  EXPECT_NE(default_grace.err.find("the default --grace 5s must be shorter than --ttl 5s"), std::string::npos)
      << describe(default_grace);
  EXPECT_EQ(dlock({"run", "x", "--ttl", "6400ms", "--", "true"}).exit_code, 0) << "the help says 6.4s fits";
  // A TTL with no room even for --grace 0 is named as the problem, with the least that works
  // (it said "--grace 0s must be shorter than --ttl 100ms (at most 0s)"); that least works.
  auto short_ttl = dlock({"run", "x", "--ttl", "100ms", "--grace", "0", "--", "true"});
  EXPECT_EQ(short_ttl.exit_code, 64) << describe(short_ttl);
  const std::regex least("--ttl 100ms is too short for dlock run: at least ([0-9]+ms)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(short_ttl.err, m, least)) << describe(short_ttl);
  // Accepted: no usage error. Not required to exit 0: a lease that short leaves the renewals
  // 50 ms, which a sanitizer build on a busy machine overran once (exit 70, "could not be
  // renewed": local CI, TSan).
  auto at_least = dlock({"run", "x", "--ttl", m[1].str(), "--grace", "0", "--", "true"});
  EXPECT_NE(at_least.exit_code, 64) << describe(at_least);
  EXPECT_EQ(at_least.err.find("too short"), std::string::npos) << describe(at_least);
  if (at_least.exit_code != 0) {
    EXPECT_NE(at_least.err.find("could not be renewed"), std::string::npos) << describe(at_least);
  }
}

// `--redlock ""` (as from `--redlock "$MASTERS"` with the variable unset) meant "no Redlock": the
// command quietly took a single-server lock on $DLOCK_REDIS_URL, and even the conflict with
// --redis went unnoticed. Now an empty list is a usage error.
TEST_F(CliTest, EmptyRedlockListIsAUsageError) {
  auto run = dlock({"--redlock", "", "run", "emptyR", "--", "sh", "-c", "echo ran"}, {{"DLOCK_REDIS_URL", server->url()}},
                   /*with_url=*/false);
  EXPECT_EQ(run.exit_code, 64) << describe(run);
  EXPECT_EQ(run.out.find("ran"), std::string::npos) << describe(run);
  EXPECT_NE(run.err.find("--redlock needs a list of master URLs"), std::string::npos) << describe(run);
  auto with_redis = dlock({"--redlock", "", "status", "x"});  // --redis given too
  EXPECT_EQ(with_redis.exit_code, 64) << describe(with_redis);
  auto json = dlock({"--redlock", "", "--json", "status", "x"});
  EXPECT_EQ(json.exit_code, 64) << describe(json);
  EXPECT_EQ(parse_json(last_line(json.out.empty() ? json.err : json.out), "usage --json")["exit_code"].integer(), 64);
}

TEST_F(CliTest, HelpAndVersion) {
  auto help = dlock({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Exit codes"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("75"), std::string::npos);
  for (const char* cmd : {"run", "acquire", "extend", "release", "status", "list", "leaks", "unlock", "doctor"}) {
    auto r = dlock({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find(std::string("dlock ") + cmd), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Exit codes"), std::string::npos) << cmd;
  }
  auto version = dlock({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("dlock ", 0), 0u) << version.out;
}

TEST_F(CliTest, WrongTypeKeyExits65) {
  raw->cmd({"HSET", key("h"), "field", "value"});
  EXPECT_EQ(dlock({"run", "h", "--no-wait", "--", "true"}).exit_code, 65);
  EXPECT_EQ(dlock({"acquire", "h", "--ttl", "1s", "--no-wait"}).exit_code, 65);
  EXPECT_EQ(dlock({"release", "h", foreign_token()}).exit_code, 65);
  EXPECT_EQ(dlock({"extend", "h", foreign_token(), "--ttl", "5s"}).exit_code, 65);
  EXPECT_EQ(dlock({"unlock", "--force", "h"}).exit_code, 65);
  EXPECT_EQ(raw->cmd({"HGET", key("h"), "field"}), "value") << "a command touched a key of another type";
  auto status = dlock({"--json", "status", "h"});
  EXPECT_EQ(status.exit_code, 0) << describe(status);
  EXPECT_EQ(parse_json(status.out, "status")["kind"].str(), "hash");
}

TEST_F(CliTest, UnreachableServerExits69) {
  server->kill();
  EXPECT_EQ(dlock({"status", "x"}).exit_code, 69);
  EXPECT_EQ(dlock({"run", "x", "--", "true"}).exit_code, 69);
  EXPECT_EQ(dlock({"acquire", "x", "--ttl", "5s"}).exit_code, 69);
  EXPECT_EQ(dlock({"list"}).exit_code, 69);
  auto json = dlock({"--json", "doctor"});
  EXPECT_EQ(json.exit_code, 69);
  EXPECT_EQ(parse_json(json.out, "doctor unreachable")["error"].str(), "connection");
}

TEST_F(CliTest, BusyLockExits75) {
  hold_foreign("busy");
  auto no_wait = dlock({"run", "busy", "--no-wait", "--", "true"});
  EXPECT_EQ(no_wait.exit_code, 75) << describe(no_wait);
  EXPECT_EQ(dlock({"run", "busy", "--wait", "0", "--", "true"}).exit_code, 75);
  EXPECT_EQ(dlock({"run", "busy", "--no-wait", "--conflict-exit-code", "9", "--", "true"}).exit_code, 9);
  EXPECT_EQ(dlock({"acquire", "busy", "--ttl", "5s", "--no-wait"}).exit_code, 75);

  const auto t0 = SteadyClock::now();
  auto timed = dlock({"run", "busy", "--wait", "300ms", "--", "true"});
  const auto took = ms_since(t0);
  EXPECT_EQ(timed.exit_code, 75) << describe(timed);
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 3000ms);
  EXPECT_EQ(raw->cmd({"GET", key("busy")}), foreign_token());
}

TEST_F(CliTest, UnexpectedServerErrorExits76) {
  raw->cmd({"CONFIG", "SET", "maxmemory", "1"});  // every write is refused with OOM
  auto r = dlock({"acquire", "oom", "--ttl", "5s"});
  raw->cmd({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(r.exit_code, 76) << describe(r);
}

TEST_F(CliTest, ReleaseByNonOwnerExits77) {
  auto acquired = dlock({"acquire", "mine", "--ttl", "30s"});
  ASSERT_EQ(acquired.exit_code, 0) << describe(acquired);
  const std::string owner = shell_var(acquired.out, "DLOCK_OWNER");
  EXPECT_EQ(dlock({"release", "mine", foreign_token()}).exit_code, 77);
  EXPECT_EQ(dlock({"release", "mine"}, {{"DLOCK_OWNER", foreign_token()}}).exit_code, 77);
  EXPECT_EQ(dlock({"extend", "mine", foreign_token(), "--ttl", "60s"}).exit_code, 77);
  EXPECT_EQ(dlock({"release", "free", owner}).exit_code, 77) << "a lock that is not held";
  EXPECT_EQ(raw->cmd({"GET", key("mine")}), owner) << "a non-owner's release removed the lock";
}

class CliAuthTest : public CliTest {
 protected:
  RedisServerOptions server_options() override {
    RedisServerOptions o;
    o.extra_args = {"--requirepass", "s3cret"};
    return o;
  }
};

TEST_F(CliAuthTest, RefusedAuthenticationExits78) {
  EXPECT_EQ(dlock({"status", "x"}).exit_code, 78) << "no password";
  auto wrong = dlock({"status", "x"}, {{"DLOCK_REDIS_PASSWORD", "wrong"}});
  EXPECT_EQ(wrong.exit_code, 78) << describe(wrong);
  EXPECT_EQ(dlock({"run", "x", "--", "true"}, {{"DLOCK_REDIS_PASSWORD", "wrong"}}).exit_code, 78);
  auto right = dlock({"run", "x", "--", "true"}, {{"DLOCK_REDIS_PASSWORD", "s3cret"}});
  EXPECT_EQ(right.exit_code, 0) << describe(right);
}

TEST_F(CliTest, CommandThatCannotRunExits126Or127) {
  EXPECT_EQ(dlock({"run", "x", "--", "/nonexistent/program"}).exit_code, 127);
  EXPECT_EQ(dlock({"run", "x", "--", "no-such-command-dlock-test"}).exit_code, 127);
  // A file without an execute bit (root too may only run files that have one).
  const std::string plain = path("not-executable");
  std::ofstream(plain) << "echo ran\n";
  ASSERT_EQ(::chmod(plain.c_str(), 0644), 0);
  auto not_exec = dlock({"run", "x", "--", plain});
  EXPECT_EQ(not_exec.exit_code, 126) << describe(not_exec);
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("x")}), 0);
}

// The state letter of /proc/<pid>/stat ('T': stopped), or 0 when it cannot be read.
char process_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '\0' : stat[paren + 2];
}

// Ctrl-Z stops the command and dlock with it, watchdog included. On `fg` after the lease ran out
// (and another client took the lock), the command is killed, never continued: it was continued
// first and only stopped once dlock looked at the lease again. Run on a pseudo-terminal, where
// dlock hands the terminal to the command and handles its stop as a job.
TEST_F(CliTest, CommandStoppedPastItsLeaseIsKilledNotContinued) {
  const std::vector<std::string> args =
      argv_for({"--json", "run", "tstp", "--ttl", "3s", "--grace", "1s", "--", "sleep", "30"});
  std::vector<char*> cargv;
  for (const auto& a : args) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    ::unsetenv("DLOCK_REDIS_URL");
    ::unsetenv("DLOCK_PREFIX");
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  std::string output;
  auto drain = [&] {  // the pty's output; never blocks
    char buf[4096];
    for (;;) {
      pollfd p{master, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) return;
      output.append(buf, static_cast<std::size_t>(n));
    }
  };
  struct Reap {  // whatever happens, nothing is left running
    pid_t pid;
    int fd;
    ~Reap() {
      if (pid > 0 && ::kill(pid, 0) == 0) {  // never kill(-1, ...): that is every process
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
      ::close(fd);
    }
  } reap{pid, master};
  ASSERT_TRUE(eventually([&] { drain(); return raw->cmd_int({"EXISTS", key("tstp")}) == 1; }, 10s)) << output;
  std::this_thread::sleep_for(300ms);  // the command runs, in the terminal's foreground
  ASSERT_EQ(::write(master, "\x1a", 1), 1);  // Ctrl-Z
  ASSERT_TRUE(eventually([&] { drain(); return process_state(pid) == 'T'; }, 5s)) << "dlock did not stop\n" << output;
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", key("tstp")}) == 0; }, 10s)) << "the lease did not end";
  auto other = dlock({"acquire", "tstp", "--ttl", "30s"});
  ASSERT_EQ(other.exit_code, 0) << describe(other);
  ASSERT_EQ(::kill(pid, SIGCONT), 0);  // `fg`
  int status = 0;
  ASSERT_TRUE(eventually([&] { drain(); return ::waitpid(pid, &status, WNOHANG) == pid; }, 10s)) << output;
  reap.pid = -1;
  drain();
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 70) << output;
  EXPECT_NE(output.find("killed instead of continued"), std::string::npos) << output;
}

// A stop of dlock (SIGTSTP without a terminal) stops dlock, and so its lease renewal, only once
// every process of the command's group is stopped. The command here ignores SIGTSTP (as does its
// `sleep`, which inherits the ignored disposition): it used to run on, writing, while the
// stopped dlock let the lease expire and a second `dlock run` took the lock. Now it is either
// stopped (SIGSTOP) or dlock keeps the lock: never two holders while the first command runs.
TEST_F(CliTest, StopOfDlockNeverLeavesTheCommandRunningUnrenewed) {
  const std::string log = path("ticks");
  auto& first = background({"run", "tstp2", "--ttl", "1s", "--grace", "300ms", "--", "sh", "-c",
                            "trap '' TSTP; while :; do date +%s%N >> " + log + "; sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return read_file(log).size() > 40; }, 10s)) << first.err();
  first.process().signal(SIGTSTP);
  std::this_thread::sleep_for(2500ms);  // well past the TTL: a stopped dlock's lease has expired
  const std::size_t before = read_file(log).size();
  auto second = dlock({"run", "--no-wait", "tstp2", "--", "true"});
  std::this_thread::sleep_for(300ms);
  const std::size_t after = read_file(log).size();
  if (second.exit_code == 0) {
    EXPECT_EQ(before, after) << "a second holder got the lock while the first command still ran\n" << first.err();
  } else {
    EXPECT_EQ(second.exit_code, 75) << describe(second);
  }
  first.process().signal(SIGCONT);
  if (second.exit_code != 0) first.process().signal(SIGTERM);  // it runs on, still holding the lock
  const auto code = first.process().wait_for(10s);
  ASSERT_TRUE(code.has_value()) << first.err();
  const std::string err = first.err();
  if (second.exit_code == 0) {
    // Stopped past its lease: killed on continue, never continued.
    EXPECT_EQ(*code, 70) << err;
    EXPECT_NE(err.find("killed instead of continued: it was stopped, and dlock with it"), std::string::npos) << err;
    const std::size_t ended = read_file(log).size();
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(read_file(log).size(), ended) << "the command ran on after dlock exited";
  }
}

// A script without a "#!" line runs under /bin/sh, as with execvp(3), env(1) and flock(1) (it
// failed with "Exec format error", 126).
TEST_F(CliTest, ScriptWithoutAnInterpreterLineRunsUnderSh) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dlock-noshebang-" + std::to_string(::getpid()) + ".sh")).string();
  {
    std::ofstream f(path);
    f << "echo \"ran $# $1 $DLOCK_NAME\"\nexit 3\n";
  }
  ASSERT_EQ(::chmod(path.c_str(), 0700), 0);
  auto r = dlock({"run", "noshebang", "--", path, "arg1"});
  std::filesystem::remove(path);
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_EQ(r.out, "ran 1 arg1 noshebang\n") << describe(r);
}

// ----------------------------------------------------------------------------------- run

TEST_F(CliTest, RunGivesTheCommandItsEnvironmentAndStatus) {
  auto r = dlock({"run", "job", "--",
                  "sh", "-c", "printf '%s\\n%s\\n%s\\n' \"$DLOCK_NAME\" \"$DLOCK_FENCING_TOKEN\" \"$DLOCK_OWNER\"; exit 42"});
  EXPECT_EQ(r.exit_code, 42) << describe(r);
  auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0], "job");
  EXPECT_EQ(lines[1], raw->cmd({"GET", key("job") + ":fence"})) << "the token is the one the counter issued";
  EXPECT_TRUE(std::regex_match(lines[2], kOwnerToken)) << lines[2];
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("job")}), 0) << "released when the command exited";
  EXPECT_EQ(raw->cmd({"GET", key("job") + ":rel"}), lines[2]) << "released through the Mutex layout";

  auto next = dlock({"run", "job", "--", "sh", "-c", "echo $DLOCK_FENCING_TOKEN"});
  EXPECT_GT(std::stoull(next.out), std::stoull(lines[1])) << "fencing tokens increase";

  EXPECT_EQ(dlock({"run", "job", "--", "sh", "-c", "kill -9 $$"}).exit_code, 137) << "128+signal";
  EXPECT_EQ(dlock({"run", "job", "true"}).exit_code, 0) << "the command without --";
}

// A NAME that begins with '-' reads as an option; after a first "--" it is the NAME, and the
// second "--" (or the next word) starts the command. The command's own "--" stays its own.
TEST_F(CliTest, RunTakesANameThatBeginsWithADashAfterDashDash) {
  auto r = dlock({"run", "--ttl", "10s", "--", "-nightly", "--", "sh", "-c", "echo \"$DLOCK_NAME\" \"$@\"", "sh", "--",
                  "x"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "-nightly -- x\n") << describe(r);
  EXPECT_EQ(raw->cmd({"GET", key("-nightly") + ":rel"}).empty(), false) << "released under its own key";
  EXPECT_NE(raw->cmd({"GET", key("-nightly") + ":fence"}), "(nil)") << "the lock was taken under '-nightly'";

  auto without_second = dlock({"run", "--", "-nightly", "sh", "-c", "echo \"$DLOCK_NAME\""});
  EXPECT_EQ(without_second.exit_code, 0) << describe(without_second);
  EXPECT_EQ(without_second.out, "-nightly\n") << describe(without_second);

  // Without "--" it is an option, unknown: a usage error, not a lock named "-nightly".
  auto as_option = dlock({"run", "-nightly", "--", "true"});
  EXPECT_EQ(as_option.exit_code, 64) << describe(as_option);
  // A NAME and no command.
  auto no_command = dlock({"run", "--", "-nightly", "--"});
  EXPECT_EQ(no_command.exit_code, 64) << describe(no_command);
  // The familiar form is unchanged: NAME, then "--" starts the command even when it has a "--".
  auto familiar = dlock({"run", "job", "--", "sh", "-c", "echo \"$DLOCK_NAME\" \"$@\"", "sh", "--", "y"});
  EXPECT_EQ(familiar.exit_code, 0) << describe(familiar);
  EXPECT_EQ(familiar.out, "job -- y\n") << describe(familiar);
}

TEST_F(CliTest, RunStopsTheCommandWhenTheKeyIsDeleted) {
  auto& bg = background({"run", "victim", "--ttl", "2s", "--grace", "500ms", "--",
                         "sh", "-c", "echo $$ > " + path("pid") + "; trap 'exit 9' TERM; while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return !read_file(path("pid")).empty(); }, 5s)) << bg.err();
  const pid_t pid = std::stoi(read_file(path("pid")));
  raw->cmd({"DEL", key("victim")});
  const auto t0 = SteadyClock::now();
  auto code = bg.process().wait_for(5s);
  ASSERT_TRUE(code.has_value()) << "dlock run did not stop after its key was deleted\n" << bg.err();
  EXPECT_EQ(*code, 70) << bg.err();
  EXPECT_LT(ms_since(t0), 2000ms) << "noticed at the next renewal (every ~640 ms here)";
  EXPECT_EQ(::kill(pid, 0), -1) << "the command is still running";
  EXPECT_NE(bg.err().find("taken away"), std::string::npos) << bg.err();
}

// With a 30 s TTL the next renewal is 10 s away: only the revocation message can stop the
// command within 2 s of `dlock unlock --force`.
TEST_F(CliTest, RunStopsTheCommandAtOnceOnForcedUnlock) {
  auto& bg = background({"run", "revoked", "--ttl", "30s", "--grace", "500ms", "--",
                         "sh", "-c", "echo $$ > " + path("pid") + "; while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return !read_file(path("pid")).empty(); }, 5s)) << bg.err();
  ASSERT_TRUE(eventually([&] { return raw->cmd_array({"PUBSUB", "NUMSUB", key("revoked") + ":ch"}).at(1) == "1"; }, 5s))
      << "dlock run does not listen for revocations";
  const auto t0 = SteadyClock::now();
  auto unlocked = dlock({"unlock", "--force", "revoked"});
  EXPECT_EQ(unlocked.exit_code, 0) << describe(unlocked);
  auto code = bg.process().wait_for(5s);
  ASSERT_TRUE(code.has_value()) << "dlock run did not stop after a forced unlock\n" << bg.err();
  EXPECT_EQ(*code, 70) << bg.err();
  EXPECT_LT(ms_since(t0), 2000ms);
}

TEST_F(CliTest, RunKillsACommandIgnoringSigtermWhenTheKeyIsReplaced) {
  auto& bg = background({"--json", "run", "victim", "--ttl", "2s", "--grace", "300ms", "--lost-exit-code", "33", "--",
                         "sh", "-c", "trap '' TERM; echo $$ > " + path("pid") + "; while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return !read_file(path("pid")).empty(); }, 5s)) << bg.err();
  const pid_t pid = std::stoi(read_file(path("pid")));
  raw->cmd({"SET", key("victim"), foreign_token(), "PX", "30000"});
  auto code = bg.process().wait_for(5s);
  ASSERT_TRUE(code.has_value()) << bg.err();
  EXPECT_EQ(*code, 33) << bg.err();
  EXPECT_EQ(::kill(pid, 0), -1) << "SIGKILL after the grace";
  auto outcome = parse_json(last_line(bg.err()), "run --json outcome");
  EXPECT_EQ(outcome["outcome"].str(), "lost");
  EXPECT_EQ(outcome["exit_code"].integer(), 33);
  EXPECT_EQ(raw->cmd({"GET", key("victim")}), foreign_token()) << "dlock must not touch the new holder's key";
}

TEST_F(CliTest, RunStopsTheCommandBeforeAnUnrenewableLeaseEnds) {
  auto& bg = background({"run", "frozen", "--ttl", "2s", "--grace", "500ms", "--",
                         "sh", "-c", "echo $$ > " + path("pid") + "; trap 'exit 9' TERM; while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return !read_file(path("pid")).empty(); }, 5s)) << bg.err();
  server->pause();  // renewals get no answer from here on
  const auto paused = SteadyClock::now();
  auto code = bg.process().wait_for(5s);
  const auto took = ms_since(paused);
  server->resume();
  ASSERT_TRUE(code.has_value()) << bg.err();
  EXPECT_EQ(*code, 70) << bg.err();
  EXPECT_LT(took, 2000ms) << "the command must stop before the 2s lease can end";
  EXPECT_NE(bg.err().find("no renewal"), std::string::npos) << bg.err();
  EXPECT_NE(bg.err().find("could not be renewed (it exited with status 9)"), std::string::npos) << bg.err();
}

// A lease's validity counts from the acquire's send, so an acquisition answered late comes back
// with less of it. dlock run started the command on such a lease all the same, only for
// supervise() to tell it to stop at once. Here the reply to the acquire that takes the lock is
// held by a fault proxy for 1.3 s of the 2 s TTL (1.98 s of validity): about 0.68 s is left,
// below --grace + margin (1.2 s). Later replies are delayed 0.6 s each way, so the watchdog's
// renewal, which dlock waits for, cannot restore the lease before its validity ends. The command
// must not start; exit 70.
TEST_F(CliTest, RunDoesNotStartTheCommandOnALeaseAnsweredTooLate) {
  hold_foreign("late", 60000);
  dlock::test::FaultProxy proxy(server->host(), server->port());
  BackgroundCli bg({binary(), "--redis", proxy.url(), "--json", "run", "late", "--wait", "30s", "--ttl", "2s",
                    "--grace", "1s", "--", "touch", path("ran")},
                   env_with({}), path("late.out"), path("late.err"));
  const std::string owner = take_with_reply_held("late", proxy, bg);
  ASSERT_FALSE(owner.empty());
  std::this_thread::sleep_for(1300ms);  // real time: the answer comes this late
  proxy.delay(600ms);
  auto code = bg.process().wait_for(10s);
  ASSERT_TRUE(code.has_value()) << bg.err();
  EXPECT_EQ(*code, 70) << bg.err();
  const JsonValue outcome = parse_json(last_line(bg.err()), "late lease outcome");
  EXPECT_EQ(outcome["outcome"].str(), "lost") << bg.err();
  EXPECT_TRUE(outcome["status"].is_null()) << "the command was started\n" << bg.err();
  EXPECT_EQ(outcome["owner"].str(), owner) << bg.err();
  EXPECT_NE(outcome["message"].str().find("the command was not started"), std::string::npos) << bg.err();
  EXPECT_FALSE(file_exists(path("ran"))) << "the command ran on a lease that was nearly over";
}

// The same late answer, but the link is fast again afterwards (a FairLock handover's lease is
// short the same way when the waiter's last try was long ago): dlock renews the lease once
// (extend to its TTL), and with its full validity back the command runs.
TEST_F(CliTest, RunStartsTheCommandWhenOneRenewalRestoresALateLease) {
  hold_foreign("late-ok", 60000);
  dlock::test::FaultProxy proxy(server->host(), server->port());
  BackgroundCli bg({binary(), "--redis", proxy.url(), "--json", "run", "late-ok", "--wait", "30s", "--ttl", "2s",
                    "--grace", "1s", "--", "touch", path("ran")},
                   env_with({}), path("late-ok.out"), path("late-ok.err"));
  ASSERT_FALSE(take_with_reply_held("late-ok", proxy, bg).empty());
  std::this_thread::sleep_for(1300ms);
  proxy.pass();
  auto code = bg.process().wait_for(10s);
  ASSERT_TRUE(code.has_value()) << bg.err();
  EXPECT_EQ(*code, 0) << bg.err();
  EXPECT_TRUE(file_exists(path("ran"))) << bg.err();
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("late-ok")}), 0) << "not released after the command";
}

// A link slow for good: every round trip takes 0.6 s (0.3 s each way), so the 2 s lease comes
// back with about 1.38 s of validity, below --grace + margin (1.5 s + 0.2 s), and so does every
// renewal, each answered well within the validity it was sent in: the lease stays held but never
// has room for the command. dlock run waits for a renewal for at most the validity it had left
// on entry, then gives the lock back: exit 70, the command not started. (Its wait had no bound:
// it waited for as long as the renewals kept the lease held, here for ever.)
TEST_F(CliTest, RunGivesUpOnALeaseWhoseRenewalsAllComeBackShort) {
  dlock::test::FaultProxy proxy(server->host(), server->port());
  proxy.delay(300ms);
  BackgroundCli bg({binary(), "--redis", proxy.url(), "--json", "run", "slow-link", "--ttl", "2s", "--grace", "1500ms",
                    "--", "touch", path("ran")},
                   env_with({}), path("slow-link.out"), path("slow-link.err"));
  auto code = bg.process().wait_for(dlock::test::scaled(20s));
  ASSERT_TRUE(code.has_value()) << "still waiting for a renewal that leaves room\n" << bg.err();
  EXPECT_EQ(*code, 70) << bg.err();
  const JsonValue outcome = parse_json(last_line(bg.err()), "slow link outcome");
  EXPECT_EQ(outcome["outcome"].str(), "lost") << bg.err();
  EXPECT_TRUE(outcome["status"].is_null()) << "the command was started\n" << bg.err();
  EXPECT_NE(outcome["message"].str().find("no renewal restored more in time"), std::string::npos) << bg.err();
  EXPECT_FALSE(file_exists(path("ran"))) << "the command ran on a lease with no room for its grace";
  EXPECT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", key("slow-link")}) == 0; }, 5s))
      << "the lock was not given back";
}

// Renewals that fail long enough put the command at risk (SIGTERM) and that stands, exit 70,
// even when they recover and the command, ignoring the signal, finishes by itself; but the
// message says what happened. It said "the command was stopped because the lock could not be
// renewed" of a command that was not stopped, on a lock that was renewed.
TEST_F(CliTest, RunSaysWhenRenewalsRecoveredAfterTheCommandWasToldToStop) {
  auto& bg = background({"run", "recovers", "--ttl", "3s", "--grace", "1s", "--",
                         "sh", "-c", "trap 'touch " + path("told") + "' TERM; touch " + path("ready") +
                                         "; while [ ! -e " + path("done") + " ]; do sleep 0.05; done; exit 5"});
  ASSERT_TRUE(eventually([&] { return file_exists(path("ready")); }, 5s)) << bg.err();
  server->pause();  // renewals get no answer until the command was told to stop
  const bool told = eventually([&] { return file_exists(path("told")); }, 3s);
  server->resume();
  ASSERT_TRUE(told) << "no SIGTERM while renewals failed\n" << bg.err();
  // The renewal that waited out the pause is answered: the key has its full TTL again.
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"PTTL", key("recovers")}) > 2000; }, 3s)) << bg.err();
  std::ofstream(path("done")) << "";
  auto code = bg.process().wait_for(5s);
  ASSERT_TRUE(code.has_value()) << bg.err();
  EXPECT_EQ(*code, 70) << bg.err();
  EXPECT_NE(bg.err().find("told to stop because lock 'recovers' could not be renewed (it exited with status 5); "
                          "renewals recovered after that"),
            std::string::npos)
      << bg.err();
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("recovers")}), 0) << "the recovered lock was not released";
}

TEST_F(CliTest, RunForwardsSigtermToTheCommand) {
  auto& bg = background({"run", "fwd", "--",
                         "sh", "-c", "trap 'echo TERM > " + path("got") + "; exit 3' TERM; touch " + path("ready") +
                                         "; while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return file_exists(path("ready")); }, 5s)) << bg.err();
  bg.process().signal(SIGTERM);
  auto code = bg.process().wait_for(5s);
  ASSERT_TRUE(code.has_value()) << bg.err();
  EXPECT_EQ(*code, 3) << "the command's own status passes through\n" << bg.err();
  EXPECT_EQ(read_file(path("got")), "TERM\n");
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("fwd")}), 0);
}

// A forwarded signal reaches a stopped command: dlock continues the group after it, as a
// shell's `kill %job` does. It was sent SIGCONT only when the command's first process had
// exited; a command stopped by SIGSTOP (in a terminal, SIGTTIN) kept the signal pending and the
// lock renewed for ever.
TEST_F(CliTest, AForwardedSignalEndsAStoppedCommand) {
  auto& bg = background({"run", "stopped", "--", "sh", "-c",
                         "echo $$ > " + path("pid") + "; kill -STOP $$; echo resumed > " + path("resumed")});
  ASSERT_TRUE(eventually([&] { return !read_file(path("pid")).empty(); }, 5s)) << bg.err();
  const pid_t pid = std::stoi(read_file(path("pid")));
  ASSERT_TRUE(eventually([&] { return process_state(pid) == 'T'; }, 5s)) << "the command did not stop";
  bg.process().signal(SIGTERM);
  auto code = bg.process().wait_for(10s);
  ASSERT_TRUE(code.has_value()) << "dlock still waits for a stopped command it forwarded SIGTERM to\n" << bg.err();
  EXPECT_EQ(*code, 143) << bg.err();
  EXPECT_FALSE(file_exists(path("resumed"))) << "the command ran on instead of ending by SIGTERM";
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("stopped")}), 0);
}

// The command gets the descriptors dlock was started with and none of its own: no Redis
// socket, no signalfd or epoll instance. The child closes everything but the inherited ones;
// it closed a list taken just before fork(), which missed a socket the Client's thread opened
// after it (a few runs in a hundred), so this runs the command a number of times.
TEST_F(CliTest, TheCommandGetsNoneOfDlocksOwnDescriptors) {
  for (int i = 0; i < 25; ++i) {
    auto r = dlock({"run", "fds" + std::to_string(i), "--", "ls", "-l", "/proc/self/fd"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    for (const auto& line : lines_of(r.out)) {
      EXPECT_EQ(line.find("socket:"), std::string::npos) << "run " << i << ": " << line;
      EXPECT_EQ(line.find("anon_inode:"), std::string::npos) << "run " << i << ": " << line;
    }
    if (::testing::Test::HasFailure()) break;
  }
}

// The command has finished and the release hangs on a silent server: SIGTERM ends dlock at once
// (the key expires at its TTL). The signal waited for the release to give up (8 s here).
TEST_F(CliTest, SigtermWhileTheReleaseHangsEndsDlockAtOnce) {
  auto& bg = background({"run", "hung-release", "--", "sh", "-c",
                         "touch " + path("ready") + "; while [ ! -e " + path("go") + " ]; do sleep 0.02; done"});
  ASSERT_TRUE(eventually([&] { return file_exists(path("ready")); }, 5s)) << bg.err();
  server->pause();
  std::ofstream(path("go")) << "go\n";  // the command ends; its release gets no answer
  std::this_thread::sleep_for(300ms);
  ASSERT_FALSE(bg.process().wait_for(0ms).has_value()) << "returned without a release answer\n" << bg.err();
  const auto t0 = SteadyClock::now();
  bg.process().signal(SIGTERM);
  auto code = bg.process().wait_for(5s);
  server->resume();
  ASSERT_TRUE(code.has_value()) << "SIGTERM was not heard while the release hung\n" << bg.err();
  EXPECT_LT(ms_since(t0), 1000ms) << bg.err();
  EXPECT_EQ(*code, 128 + SIGTERM) << bg.err();
  EXPECT_NE(bg.err().find("while releasing"), std::string::npos) << bg.err();
}

TEST_F(CliTest, SigtermWhileWaitingLeavesNoLock) {
  hold_foreign("contended");
  auto& bg = background({"--json", "run", "contended", "--wait", "30s", "--", "touch", path("ran")});
  ASSERT_TRUE(eventually([&] { return subscribers("contended") == 1; }, 5s)) << "the waiter never subscribed";
  bg.process().signal(SIGTERM);
  auto code = bg.process().wait_for(3s);
  ASSERT_TRUE(code.has_value()) << "the wait was not abandoned";
  EXPECT_EQ(*code, 128 + SIGTERM);
  auto outcome = parse_json(last_line(bg.err()), "interrupted outcome");
  EXPECT_EQ(outcome["outcome"].str(), "interrupted");
  EXPECT_EQ(raw->cmd({"GET", key("contended")}), foreign_token());
  EXPECT_TRUE(eventually([&] { return subscribers("contended") == 0; }, 2s));
  raw->cmd({"DEL", key("contended")});
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("contended")}), 0) << "a lock was left behind";
  EXPECT_FALSE(file_exists(path("ran")));
}

// A SIGTERM while the server is silent: the settling round trips after the cancelled wait (they
// make sure a try in flight that took the lock was given back) get no answer, so dlock cannot
// say that nothing is held, and says so. Before, it claimed "nothing is held", and it waited a
// command timeout (3 s) for each of them on top of the cancelled try's own.
TEST_F(CliTest, SigtermWhileWaitingOnASilentServerDoesNotClaimNothingIsHeld) {
  hold_foreign("silent-wait");
  auto& bg = background({"--json", "run", "silent-wait", "--wait", "60s", "--", "touch", path("ran")});
  ASSERT_TRUE(eventually([&] { return subscribers("silent-wait") == 1; }, 5s)) << "the waiter never subscribed";
  server->pause();
  std::this_thread::sleep_for(700ms);  // its recheck (every 500 ms) is sent, and hangs
  const auto t0 = SteadyClock::now();
  bg.process().signal(SIGTERM);
  auto code = bg.process().wait_for(15s);
  const auto took = ms_since(t0);
  server->resume();
  ASSERT_TRUE(code.has_value()) << "SIGTERM was not heard\n" << bg.err();
  EXPECT_EQ(*code, 128 + SIGTERM) << bg.err();
  // The cancelled try's command timeout (3 s), then at most a second for the settling.
  EXPECT_LT(took, dlock::test::scaled(6000ms)) << bg.err();
  auto outcome = parse_json(last_line(bg.err()), "interrupted outcome");
  EXPECT_EQ(outcome["outcome"].str(), "interrupted");
  EXPECT_EQ(outcome["message"].str().find("nothing is held"), std::string::npos) << bg.err();
  EXPECT_NE(outcome["message"].str().find("may have taken the lock"), std::string::npos) << bg.err();
  EXPECT_FALSE(file_exists(path("ran")));
}

// A signal and a release arriving together: whichever wins, nothing stays locked.
TEST_F(CliTest, SigtermRacingTheReleaseLeavesNoLock) {
  for (int i = 0; i < 4; ++i) {
    const std::string name = "race" + std::to_string(i);
    hold_foreign(name);
    auto& bg = background({"run", name, "--wait", "30s", "--", "sleep", "5"});
    ASSERT_TRUE(eventually([&] { return subscribers(name) == 1; }, 5s)) << bg.err();
    raw->cmd({"DEL", key(name)});
    raw->cmd({"PUBLISH", key(name) + ":ch", "released"});
    if (i % 2 == 1) std::this_thread::sleep_for(milliseconds(i));
    bg.process().signal(SIGTERM);
    auto code = bg.process().wait_for(5s);
    ASSERT_TRUE(code.has_value()) << bg.err();
    EXPECT_EQ(*code, 128 + SIGTERM) << "interrupted while waiting, or the forwarded signal ended sleep\n" << bg.err();
    EXPECT_EQ(raw->cmd_int({"EXISTS", key(name)}), 0) << "a lock was left behind (iteration " << i << ")";
  }
}

// If dlock dies, its command dies with it: the first process by PR_SET_PDEATHSIG, the rest of
// its process group (here a background job) by the guard. The background job outlived dlock's
// kill -9 and ran on without the lock.
TEST_F(CliTest, CommandDiesWithDlock) {
  auto& bg = background({"run", "orphan", "--", "sh", "-c",
                         "sleep 300 & echo $! > " + path("bgpid") + "; echo $$ > " + path("pid") +
                             "; while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return !read_file(path("pid")).empty(); }, 5s)) << bg.err();
  const std::string proc = "/proc/" + std::to_string(std::stoi(read_file(path("pid")))) + "/stat";
  const std::string bg_proc = "/proc/" + std::to_string(std::stoi(read_file(path("bgpid")))) + "/stat";
  bg.process().signal(SIGKILL);
  EXPECT_EQ(bg.process().wait_for(3s), std::optional<int>(128 + SIGKILL));
  // Gone, or a zombie waiting for init to reap it.
  auto dead = [&](const std::string& stat_file) {
    return [&, stat_file] {
      const std::string stat = read_file(stat_file);
      const auto close = stat.rfind(')');
      return stat.empty() || (close != std::string::npos && stat.compare(close + 2, 1, "Z") == 0);
    };
  };
  EXPECT_TRUE(eventually(dead(proc), 2s)) << "the command outlived dlock";
  EXPECT_TRUE(eventually(dead(bg_proc), 2s)) << "the command's background job outlived dlock";
}

// A kill of dlock's whole process group (kill -9 %job, timeout -s KILL) does not take the guard
// with it: the guard lives in a group of its own, and kills the command's background job.
TEST_F(CliTest, KillingDlocksWholeGroupStillKillsTheCommandsJob) {
  std::vector<std::string> argv = argv_for({"run", "group-kill", "--", "sh", "-c",
                                            "sleep 300 & echo $! > " + path("bgpid") + "; echo $$ > " + path("pid") +
                                                "; while :; do sleep 0.05; done"});
  argv.insert(argv.begin(), "/usr/bin/setsid");  // dlock leads a group of its own, as in a shell's job
  BackgroundCli bg(argv, env_with({}), path("gk.out"), path("gk.err"));
  ASSERT_TRUE(eventually([&] { return !read_file(path("pid")).empty() && !read_file(path("bgpid")).empty(); }, 5s))
      << bg.err();
  const std::string bg_proc = "/proc/" + std::to_string(std::stoi(read_file(path("bgpid")))) + "/stat";
  ASSERT_TRUE(eventually([&] { return ::getpgid(bg.process().pid()) == bg.process().pid(); }, 2s));
  ASSERT_EQ(::kill(-bg.process().pid(), SIGKILL), 0);
  EXPECT_EQ(bg.process().wait_for(3s), std::optional<int>(128 + SIGKILL));
  auto dead = [&] {
    const std::string stat = read_file(bg_proc);
    const auto close = stat.rfind(')');
    return stat.empty() || (close != std::string::npos && stat.compare(close + 2, 1, "Z") == 0);
  };
  EXPECT_TRUE(eventually(dead, 3s)) << "the command's background job outlived dlock's group";
}

// A leftover of the command that is stopped (here by the command itself; in a terminal, SIGTTIN)
// is treated as the kernel treats an orphaned group's: SIGHUP and SIGCONT. It held the lock for
// ever, deaf to forwarded signals.
TEST_F(CliTest, StoppedLeftoverOfTheCommandDoesNotHoldTheLockForEver) {
  auto& bg = background({"run", "stopped-left", "--", "sh", "-c", "sleep 300 & kill -STOP $!; exit 4"});
  auto code = bg.process().wait_for(10s);
  ASSERT_TRUE(code.has_value()) << "dlock still waits for a stopped leftover\n" << bg.err();
  EXPECT_EQ(*code, 4) << bg.err();
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("stopped-left")}), 0);
}

// The command is over when its process group is: a job it started in the background keeps the
// lock held until it exits (as with flock(1)). dlock released the lock as soon as the first
// process exited, with the job still running.
TEST_F(CliTest, RunHoldsTheLockUntilTheCommandsBackgroundJobsExit) {
  const auto t0 = SteadyClock::now();
  auto& bg = background({"-v", "run", "bg-job", "--", "sh", "-c",
                         "(sleep 1.5; echo done > " + path("job") + ") >/dev/null 2>&1 & exit 7"});
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", key("bg-job")}) == 1; }, 5s)) << bg.err();
  std::this_thread::sleep_for(500ms);  // the sh has exited; its job sleeps on
  auto during = dlock({"run", "bg-job", "--no-wait", "--", "true"});
  EXPECT_EQ(during.exit_code, 75) << "the lock was released while the command's job still ran\n" << describe(during);
  auto code = bg.process().wait_for(10s);
  ASSERT_TRUE(code.has_value()) << bg.err();
  EXPECT_EQ(*code, 7) << "the first process's status\n" << bg.err();
  EXPECT_EQ(read_file(path("job")), "done\n") << "dlock returned before the job ended";
  EXPECT_GE(ms_since(t0), 1500ms);
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("bg-job")}), 0) << "not released after the job";
  EXPECT_NE(bg.err().find("stays held until the processes it left running"), std::string::npos) << bg.err();
}

// ------------------------------------------------------------------ acquire / extend / release

TEST_F(CliTest, AcquireLeavesTheLockHeldAndReleaseFreesIt) {
  auto r = dlock({"acquire", "shell", "--ttl", "30s"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string owner = shell_var(r.out, "DLOCK_OWNER");
  const std::string token = shell_var(r.out, "DLOCK_FENCING_TOKEN");
  EXPECT_TRUE(std::regex_match(owner, kOwnerToken)) << r.out;
  EXPECT_EQ(token, raw->cmd({"GET", key("shell") + ":fence"}));
  // The process has exited: the lock must still be held, with its fixed TTL.
  EXPECT_EQ(raw->cmd({"GET", key("shell")}), owner);
  const long long pttl = raw->cmd_int({"PTTL", key("shell")});
  EXPECT_GT(pttl, 25000);
  EXPECT_LE(pttl, 30000);
  EXPECT_EQ(dlock({"run", "shell", "--no-wait", "--", "true"}).exit_code, 75);

  auto released = dlock({"release", "shell", owner});
  EXPECT_EQ(released.exit_code, 0) << describe(released);
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("shell")}), 0);
  EXPECT_EQ(raw->cmd({"GET", key("shell") + ":rel"}), owner);
  EXPECT_EQ(dlock({"release", "shell", owner}).exit_code, 0) << "a repeated release is harmless";
}

// "--prefix ''" is the empty prefix (a library Client with key_prefix ""), not the default;
// an empty DLOCK_PREFIX is unset, as every empty DLOCK_* variable is.
TEST_F(CliTest, EmptyPrefixOptionNamesKeysWithoutAPrefix) {
  auto r = dlock({"--prefix", "", "acquire", "bare", "--ttl", "30s"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(raw->cmd({"GET", "{bare}"}), shell_var(r.out, "DLOCK_OWNER"));
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("bare")}), 0);
  auto status = dlock({"--prefix", "", "--json", "status", "bare"});
  EXPECT_EQ(status.exit_code, 0) << describe(status);
  EXPECT_NE(status.out.find("\"held\""), std::string::npos) << status.out;
  auto with_env = dlock({"acquire", "bare", "--ttl", "30s", "--no-wait"}, {{"DLOCK_PREFIX", ""}});
  EXPECT_EQ(with_env.exit_code, 0) << describe(with_env);
  EXPECT_EQ(raw->cmd({"GET", key("bare")}), shell_var(with_env.out, "DLOCK_OWNER"));
}

TEST_F(CliTest, ExtendSetsANewTtlForTheOwner) {
  auto r = dlock({"--json", "acquire", "ext", "--ttl", "3s"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto j = parse_json(r.out, "acquire --json");
  const std::string owner = j["owner"].str();
  EXPECT_EQ(j["fencing_token"].text, raw->cmd({"GET", key("ext") + ":fence"}));
  EXPECT_EQ(j["ttl_ms"].integer(), 3000);
  // The validity left on the client: less the drift allowance (3000 / 100 + 2 ms) and the round trip.
  EXPECT_LE(j["valid_ms"].integer(), 3000 - 32);
  EXPECT_GT(j["valid_ms"].integer(), 2000);
  auto extended = dlock({"extend", "ext", "--ttl", "60s"}, {{"DLOCK_OWNER", owner}});
  EXPECT_EQ(extended.exit_code, 0) << describe(extended);
  EXPECT_GT(raw->cmd_int({"PTTL", key("ext")}), 50000);
  EXPECT_EQ(dlock({"extend", "ext", "--ttl", "1s"}, {{"DLOCK_OWNER", foreign_token()}}).exit_code, 77);
  EXPECT_EQ(dlock({"release", "ext"}, {{"DLOCK_OWNER", owner}}).exit_code, 0);
}

// A server that accepts connections but does not answer: the acquire's command times out long
// before the wait would. That is no busy lock: exit 69, never the conflict code (which a job
// runner may have set to 0, "someone else runs it").
TEST_F(CliTest, SilentServerIsUnreachableNotAConflict) {
  server->pause();
  auto r = dlock({"run", "silent", "--wait", "60s", "--conflict-exit-code", "0", "--", "true"});
  auto once = dlock({"run", "silent", "--no-wait", "--", "true"});
  // A wait that runs out while its try is still unanswered: the same (it was 75, turned into 0).
  auto short_wait = dlock({"run", "silent", "--wait", "500ms", "--conflict-exit-code", "0", "--", "true"});
  server->resume();
  EXPECT_EQ(r.exit_code, 69) << describe(r);
  EXPECT_EQ(once.exit_code, 69) << describe(once);
  EXPECT_EQ(short_wait.exit_code, 69) << describe(short_wait);
}

// A server that stalls through the end of a wait and answers again just after it: a free lock
// is not reported as taken (it was 75, which --conflict-exit-code 0 turns into success, for
// stalls of 0.8-1.2 s after a 300 ms wait), nor as unreachable (69, "the server stalled"): one
// more try, awaited as --no-wait's, takes it. A held one is still a conflict.
TEST_F(CliTest, StallThroughTheEndOfAWaitIsAConflictOnlyWhenTheLockIsTaken) {
  ASSERT_EQ(dlock({"acquire", "stall-held", "--ttl", "60s"}).exit_code, 0);
  ASSERT_EQ(raw->cmd({"CLIENT", "PAUSE", "1000", "ALL"}), "OK");
  auto free_lock = dlock({"run", "stall-free", "--wait", "300ms", "--", "touch", path("ran-free")});
  ASSERT_EQ(raw->cmd({"CLIENT", "PAUSE", "1000", "ALL"}), "OK");
  auto held = dlock({"run", "stall-held", "--wait", "300ms", "--", "true"});
  // A ReentrantMutex's holder token ends with the process's identity, and its hash keeps a
  // ':fence' field: neither is another holder.
  ASSERT_EQ(raw->cmd({"CLIENT", "PAUSE", "1000", "ALL"}), "OK");
  auto free_reentrant =
      dlock({"run", "stall-re", "--kind", "reentrant", "--wait", "300ms", "--", "touch", path("ran-re")});
  EXPECT_EQ(free_lock.exit_code, 0) << describe(free_lock);
  EXPECT_TRUE(file_exists(path("ran-free"))) << "the command did not run under the lock";
  EXPECT_EQ(held.exit_code, 75) << describe(held);
  EXPECT_EQ(free_reentrant.exit_code, 0) << describe(free_reentrant);
  EXPECT_TRUE(file_exists(path("ran-re"))) << "the command did not run under the lock";
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("stall-free")}), 0);
}

// A wait shorter than a round trip ends with its try still in flight; on a free lock that try
// was abandoned and dlock exited 69 ("the server stalled"), where --no-wait takes the lock.
TEST_F(CliTest, AWaitShorterThanARoundTripStillTakesAFreeLock) {
  for (const char* wait : {"1ms", "2ms"}) {
    auto r = dlock({"run", std::string("short-") + wait, "--wait", wait, "--", "true"});
    EXPECT_EQ(r.exit_code, 0) << "--wait " << wait << "\n" << describe(r);
    auto a = dlock({"acquire", std::string("short-acq-") + wait, "--wait", wait, "--ttl", "30s"});
    EXPECT_EQ(a.exit_code, 0) << "--wait " << wait << "\n" << describe(a);
  }
  hold_foreign("short-busy");
  auto busy = dlock({"run", "short-busy", "--wait", "1ms", "--", "true"});
  EXPECT_EQ(busy.exit_code, 75) << describe(busy);
}

// The README's shell example, run by a real shell: eval exports the owner, so the extend and
// release that follow (processes of their own) find it without being given it.
TEST_F(CliTest, AcquireEvaluatedByAShellHandsTheOwnerToLaterCommands) {
  const std::string script =
      "unset DLOCK_OWNER DLOCK_FENCING_TOKEN\n"
      "lease=$(\"$0\" --redis \"$1\" acquire shellish --ttl 30s) || exit\n"
      "eval \"$lease\" || exit 90\n"
      "test -n \"$DLOCK_FENCING_TOKEN\" || exit 91\n"
      "\"$0\" --redis \"$1\" extend shellish --ttl 60s || exit 92\n"
      "\"$0\" --redis \"$1\" release shellish || exit 93\n";
  auto r = dlock::test::run_command({"/bin/sh", "-c", script, binary(), server->url()}, env_with({}), 30s);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(raw->cmd({"EXISTS", key("shellish")}), "0") << "not released";

  // And a failed acquisition stops it, with acquire's status (eval "$(...)" alone went on: an
  // eval of nothing succeeds).
  hold_foreign("shellish");
  const std::string stops =
      "lease=$(\"$0\" --redis \"$1\" acquire shellish --ttl 30s --no-wait) || exit\n"
      "eval \"$lease\"\n"
      "echo went-on\n";
  auto busy = dlock::test::run_command({"/bin/sh", "-c", stops, binary(), server->url()}, env_with({}), 30s);
  EXPECT_EQ(busy.exit_code, 75) << busy.out << busy.err;
  EXPECT_EQ(busy.out.find("went-on"), std::string::npos) << busy.out;
}

// ------------------------------------------------------------------ inspection and repair

TEST_F(CliTest, StatusShowsHolderTtlTokenAndWaiters) {
  auto free_status = dlock({"--json", "status", "s"});
  EXPECT_EQ(free_status.exit_code, 0);
  EXPECT_EQ(parse_json(free_status.out, "status free")["state"].str(), "free");
  // A key dlock did not write is not free: acquisitions fail on it (exit 65).
  ASSERT_EQ(raw->cmd_int({"HSET", key("junk"), "a", "b"}), 1);
  auto junk = dlock({"status", "junk"});
  EXPECT_EQ(junk.exit_code, 0) << describe(junk);
  EXPECT_NE(junk.out.find("state    foreign"), std::string::npos) << junk.out;
  EXPECT_EQ(parse_json(dlock({"--json", "status", "junk"}).out, "status junk")["state"].str(), "foreign");
  EXPECT_EQ(dlock({"run", "--no-wait", "junk", "--", "true"}).exit_code, 65);

  auto acquired = dlock({"acquire", "s", "--ttl", "30s"});
  ASSERT_EQ(acquired.exit_code, 0);
  const std::string owner = shell_var(acquired.out, "DLOCK_OWNER");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(owner, m, kOwnerToken));
  auto& waiter = background({"run", "s", "--wait", "30s", "--", "true"});
  ASSERT_TRUE(eventually([&] { return subscribers("s") == 1; }, 5s)) << waiter.err();

  auto held = dlock({"--json", "status", "s"});
  ASSERT_EQ(held.exit_code, 0) << describe(held);
  auto j = parse_json(held.out, "status held");
  EXPECT_EQ(j["state"].str(), "held");
  EXPECT_EQ(j["kind"].str(), "mutex");
  EXPECT_EQ(j["owner"].str(), owner);
  EXPECT_EQ(j["holder"]["pid"].integer(), std::stoll(m[1].str()));
  EXPECT_GT(j["ttl_ms"].integer(), 20000);
  EXPECT_EQ(j["fencing_counter"].text, shell_var(acquired.out, "DLOCK_FENCING_TOKEN"));
  EXPECT_EQ(j["waiters"].integer(), 1);
  // The waiting process's Client has its place on the lock's roll, listed in the queue (and
  // not counted twice in "waiters").
  ASSERT_TRUE(eventually([&] { return parse_json(dlock({"--json", "status", "s"}).out, "status")["queue"].items.size() == 1; }, 5s));
  auto placed = parse_json(dlock({"--json", "status", "s"}).out, "status placed");
  EXPECT_EQ(placed["queue"].items[0]["role"].str(), "roll");
  EXPECT_GT(placed["queue"].items[0]["ttl_ms"].integer(), 0);
  EXPECT_EQ(placed["waiters"].integer(), 1);

  auto text = dlock({"status", "s"});
  EXPECT_NE(text.out.find("roll     1. client "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("held"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("pid " + m[1].str()), std::string::npos) << text.out;
  waiter.process().signal(SIGTERM);
  EXPECT_EQ(waiter.process().wait_for(3s), std::optional<int>(128 + SIGTERM));
}

// With -v and no terminal, a wait prints one status line naming the holder (its host and pid,
// from the owner token) and when its lease ends, and prints again only when the holder changes.
TEST_F(CliTest, VerboseWaitPrintsTheHolderOnce) {
  auto acquired = dlock({"acquire", "shown", "--ttl", "30s"});
  ASSERT_EQ(acquired.exit_code, 0) << describe(acquired);
  std::smatch m;
  const std::string owner = shell_var(acquired.out, "DLOCK_OWNER");
  ASSERT_TRUE(std::regex_match(owner, m, kOwnerToken));
  auto waited = dlock({"-v", "run", "shown", "--wait", "2500ms", "--", "true"});
  EXPECT_EQ(waited.exit_code, 75) << describe(waited);
  const std::string line = "dlock: waiting for mutex lock 'shown': held by ";
  const auto at = waited.err.find(line);
  ASSERT_NE(at, std::string::npos) << waited.err;
  EXPECT_EQ(waited.err.find(line, at + 1), std::string::npos) << "printed again for the same holder\n" << waited.err;
  const std::string shown = waited.err.substr(at, waited.err.find('\n', at) - at);
  EXPECT_NE(shown.find(":" + m[1].str() + " for "), std::string::npos) << shown;
  EXPECT_NE(shown.find(", expires in "), std::string::npos) << shown;
}

TEST_F(CliTest, ListFindsThousandsOfLocks) {
  constexpr int kLocks = 3000;
  // Lock keys with companions (counters, markers) and unrelated keys, written server-side.
  raw->cmd({"EVAL",
            "for i = 1, tonumber(ARGV[1]) do\n"
            "  local k = 'dlock:{lock' .. i .. '}'\n"
            "  redis.call('SET', k, '0123456789abcdef0123456789abcdef@host' .. i .. ':' .. i .. ':1700000000000', 'PX', 600000)\n"
            "  redis.call('SET', k .. ':fence', i)\n"
            "  redis.call('SET', k .. ':rel', 'x', 'PX', 600000)\n"
            "  redis.call('SET', 'other:' .. i, 'y')\n"
            "end\n"
            "return 1",
            "0", std::to_string(kLocks)});
  auto r = dlock({"--json", "list"});
  ASSERT_EQ(r.exit_code, 0) << describe(r).substr(0, 2000);
  auto j = parse_json(r.out, "list --json");
  EXPECT_EQ(j["count"].integer(), kLocks);
  ASSERT_EQ(j["locks"].items.size(), static_cast<std::size_t>(kLocks));
  std::set<std::string> names;
  for (const auto& l : j["locks"].items) names.insert(l["name"].str());
  EXPECT_EQ(names.size(), static_cast<std::size_t>(kLocks));
  EXPECT_TRUE(names.count("lock1") && names.count("lock3000"));

  auto text = dlock({"list"});
  EXPECT_EQ(lines_of(text.out).size(), static_cast<std::size_t>(kLocks) + 1) << "a header and one line per lock";
  auto subset = dlock({"--json", "list", "lock1*"});
  EXPECT_EQ(parse_json(subset.out, "list PATTERN")["count"].integer(), 1 + 10 + 100 + 1000);
}

TEST_F(CliTest, LeaksFindsKeysWithoutExpiry) {
  auto acquired = dlock({"acquire", "fine", "--ttl", "30s"});
  ASSERT_EQ(acquired.exit_code, 0);
  auto clean = dlock({"leaks"});
  EXPECT_EQ(clean.exit_code, 0) << describe(clean);

  raw->cmd({"SET", key("forever"), foreign_token()});  // no TTL
  auto found = dlock({"leaks"});
  EXPECT_EQ(found.exit_code, 1) << describe(found);
  EXPECT_NE(found.out.find("forever"), std::string::npos) << found.out;
  EXPECT_EQ(found.out.find("fine"), std::string::npos) << found.out;
  auto j = parse_json(dlock({"--json", "leaks"}).out, "leaks --json");
  EXPECT_EQ(j["count"].integer(), 1);
  EXPECT_EQ(j["leaks"].items.at(0)["name"].str(), "forever");
  EXPECT_EQ(raw->cmd({"GET", key("forever")}), foreign_token()) << "leaks reports, never deletes";

  raw->cmd({"DEL", key("forever")});
  raw->cmd({"SET", key("alien"), "not-a-token", "PX", "30000"});
  EXPECT_EQ(dlock({"leaks"}).exit_code, 1) << "a value that is no owner token";
  raw->cmd({"DEL", key("alien")});
  EXPECT_EQ(dlock({"leaks"}).exit_code, 0);

  // A fencing counter that is no counter, under a free name: every acquisition of it fails.
  raw->cmd({"SET", key("fenced") + ":fence", "-5"});
  auto counter = dlock({"leaks"});
  EXPECT_EQ(counter.exit_code, 1) << describe(counter);
  EXPECT_NE(counter.out.find("fenced"), std::string::npos) << counter.out;
  EXPECT_NE(counter.out.find("'-5', which gives no next token"), std::string::npos) << counter.out;
  auto cj = parse_json(dlock({"--json", "leaks"}).out, "leaks --json");
  ASSERT_EQ(cj["count"].integer(), 1);
  EXPECT_EQ(cj["leaks"].items.at(0)["fencing_counter_fault"].str(), "'-5'");
  auto status = dlock({"status", "fenced"});
  EXPECT_NE(status.out.find("holds '-5', which gives no next token"), std::string::npos) << describe(status);
  EXPECT_EQ(raw->cmd({"GET", key("fenced") + ":fence"}), "-5") << "leaks reports, never repairs";
  raw->cmd({"DEL", key("fenced") + ":fence"});
  EXPECT_EQ(dlock({"leaks"}).exit_code, 0);
}

// A key under the prefix whose name no lock can have (a control character, over 512 bytes) made
// `list` and `leaks` fail as a whole with exit 64, a usage error: anyone who could write a key
// under the prefix blinded monitoring built on `leaks`. Now `leaks` reports such a key, escaped,
// and `list` skips it (saying so); neither prints the name raw.
TEST_F(CliTest, KeysWithInvalidLockNamesDoNotBreakListOrLeaks) {
  ASSERT_EQ(dlock({"acquire", "fine", "--ttl", "30s"}).exit_code, 0);
  ASSERT_EQ(raw->cmd({"SET", key("ev\x1b[31mil"), "v", "PX", "60000"}), "OK");
  ASSERT_EQ(raw->cmd({"SET", key(std::string(600, 'a')), "v"}), "OK");

  auto list = dlock({"list"});
  EXPECT_EQ(list.exit_code, 0) << describe(list);
  EXPECT_NE(list.out.find("fine"), std::string::npos) << list.out;
  EXPECT_EQ((list.out + list.err).find('\x1b'), std::string::npos) << describe(list);
  EXPECT_NE(list.err.find("skipped 2 name(s)"), std::string::npos) << list.err;
  auto lj = parse_json(dlock({"--json", "list"}).out, "list --json");
  EXPECT_EQ(lj["count"].integer(), 1);
  EXPECT_EQ(lj["invalid_names"].integer(), 2);

  auto leaks = dlock({"leaks"});
  EXPECT_EQ(leaks.exit_code, 1) << describe(leaks);
  EXPECT_EQ((leaks.out + leaks.err).find('\x1b'), std::string::npos) << describe(leaks);
  EXPECT_NE(leaks.out.find("\"ev\\u001b[31mil\""), std::string::npos) << leaks.out;
  EXPECT_NE(leaks.out.find("not a valid lock name"), std::string::npos) << leaks.out;
  EXPECT_EQ(leaks.out.find("fine"), std::string::npos) << leaks.out;
  auto jr = dlock({"--json", "leaks"});
  EXPECT_EQ(jr.exit_code, 1) << describe(jr);
  auto j = parse_json(jr.out, "leaks --json");
  ASSERT_EQ(j["count"].integer(), 2) << jr.out;
  EXPECT_EQ(j["leaks"].items.at(0)["state"].str(), "invalid_name");
  EXPECT_EQ(j["leaks"].items.at(1)["state"].str(), "invalid_name");
}

// `status` and `unlock --force` printed a foreign value raw: whoever could write the key could set
// the operator's terminal title or clear the screen. Now they print it escaped, as `leaks` does.
TEST_F(CliTest, StatusAndUnlockPrintAForeignValueEscaped) {
  const std::string evil = "x\x1b]0;pwned\a\x1b[2J";
  ASSERT_EQ(raw->cmd({"SET", key("esc"), evil, "PX", "60000"}), "OK");
  auto status = dlock({"status", "esc"});
  EXPECT_EQ(status.exit_code, 0) << describe(status);
  EXPECT_EQ(status.out.find('\x1b'), std::string::npos) << describe(status);
  EXPECT_EQ(status.out.find('\a'), std::string::npos) << describe(status);
  EXPECT_NE(status.out.find("\"x\\u001b]0;pwned"), std::string::npos) << status.out;
  auto unlock = dlock({"unlock", "--force", "esc"});
  EXPECT_EQ(unlock.exit_code, 0) << describe(unlock);
  EXPECT_EQ(unlock.out.find('\x1b'), std::string::npos) << describe(unlock);
  EXPECT_NE(unlock.out.find("\"x\\u001b]0;pwned"), std::string::npos) << unlock.out;
  EXPECT_EQ(raw->cmd_int({"EXISTS", key("esc")}), 0);
}

TEST_F(CliTest, ForcedUnlockRemovesTheLockAndWakesAWaiterAtOnce) {
  auto acquired = dlock({"acquire", "stuck", "--ttl", "60s"});
  ASSERT_EQ(acquired.exit_code, 0);
  const std::string owner = shell_var(acquired.out, "DLOCK_OWNER");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(owner, m, kOwnerToken));
  auto& waiter = background({"run", "stuck", "--wait", "30s", "--", "sh", "-c", "echo \"$DLOCK_OWNER\" > " + path("got")});
  ASSERT_TRUE(eventually([&] { return subscribers("stuck") == 1; }, 5s)) << waiter.err();

  auto r = dlock({"unlock", "--force", "stuck"});
  const auto unlocked = SteadyClock::now();
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find(":" + m[1].str()), std::string::npos) << "prints who held it: " << r.out;
  ASSERT_TRUE(eventually([&] { return !read_file(path("got")).empty(); }, 5s)) << waiter.err();
  // Without the "revoked" notification the waiter would only notice at its next recheck
  // (500 ms +-20%): this is faster.
  EXPECT_LT(ms_since(unlocked), 390ms);
  EXPECT_NE(read_file(path("got")), owner + "\n");
  EXPECT_EQ(waiter.process().wait_for(5s), std::optional<int>(0));

  auto again = dlock({"--json", "unlock", "--force", "stuck"});
  EXPECT_EQ(again.exit_code, 1) << "not held";
  EXPECT_FALSE(parse_json(again.out, "unlock not held")["removed"].boolean);
}

TEST_F(CliTest, DoctorChecksTheServer) {
  auto ok = dlock({"doctor"});
  EXPECT_EQ(ok.exit_code, 0) << describe(ok);
  auto j = parse_json(dlock({"--json", "doctor"}).out, "doctor --json");
  EXPECT_TRUE(j["ok"].boolean);
  EXPECT_GE(j["checks"].items.size(), 5u);

  raw->cmd({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
  auto evicting = dlock({"doctor"});
  EXPECT_EQ(evicting.exit_code, 78) << describe(evicting);
  EXPECT_NE(evicting.out.find("noeviction"), std::string::npos) << evicting.out;
  raw->cmd({"CONFIG", "SET", "maxmemory-policy", "noeviction"});

  // A user that may not touch the prefix's keys and channels.
  raw->cmd({"ACL", "SETUSER", "narrow", "on", ">pw", "~other:*", "&other:*", "+@all"});
  auto narrow = dlock({"--redis", "redis://narrow:pw@" + server->host() + ":" + std::to_string(server->port()),
                       "--json", "doctor"},
                      {}, /*with_url=*/false);
  EXPECT_EQ(narrow.exit_code, 78) << describe(narrow);
  EXPECT_FALSE(parse_json(narrow.out, "doctor narrow")["ok"].boolean);

  // A user whose ACL predates the waiters' roll: a warning (locks work; waiters are woken all at
  // once), not a failure, and the fix names the missing commands.
  raw->cmd({"ACL", "SETUSER", "noroll", "on", ">pw", "~*", "&*", "+@all", "-zadd", "-zpopmin"});
  auto noroll = dlock({"--redis", "redis://noroll:pw@" + server->host() + ":" + std::to_string(server->port()),
                       "--json", "doctor"},
                      {}, /*with_url=*/false);
  EXPECT_EQ(noroll.exit_code, 0) << describe(noroll);
  bool roll_warned = false;
  const JsonValue noroll_doc = parse_json(noroll.out, "doctor noroll");
  for (const auto& c : noroll_doc["checks"].items) {
    if (c["check"].str() == "acl") roll_warned = c["status"].str() == "warn" && c["fix"].str().find("+zpopmin") != std::string::npos;
  }
  EXPECT_TRUE(roll_warned) << noroll.out;

  // A user that may not run CONFIG, INFO or ACL: those checks cannot be made, which is no failure.
  raw->cmd({"ACL", "SETUSER", "plain", "on", ">pw", "~*", "&*", "+@all", "-config", "-info", "-acl"});
  auto plain = dlock({"--redis", "redis://plain:pw@" + server->host() + ":" + std::to_string(server->port()),
                      "--json", "doctor"},
                     {}, /*with_url=*/false);
  EXPECT_EQ(plain.exit_code, 0) << describe(plain);
  int cannot_check = 0;
  // Named: a range-for over parse_json(...)["checks"].items would read a destroyed temporary.
  const JsonValue doctor = parse_json(plain.out, "doctor plain");
  for (const auto& c : doctor["checks"].items) {
    cannot_check += c["status"].str() == "cannot_check";
  }
  EXPECT_GE(cannot_check, 4) << plain.out;
}

// `doctor` said "all is well" when checks could not be made (the ACL forbids CONFIG, INFO and
// ACL), although it had checked next to nothing. Now it says how many could not be made, and
// JSON counts them ("unchecked"); that is still no failure (exit 0).
TEST_F(CliTest, DoctorSaysHowManyChecksCouldNotBeMade) {
  raw->cmd({"ACL", "SETUSER", "plain", "on", ">pw", "~*", "&*", "+@all", "-config", "-info", "-acl"});
  const std::string url = "redis://plain:pw@" + server->host() + ":" + std::to_string(server->port());
  auto text = dlock({"--redis", url, "doctor"}, {}, /*with_url=*/false);
  EXPECT_EQ(text.exit_code, 0) << describe(text);
  EXPECT_EQ(text.out.find("all is well"), std::string::npos) << text.out;
  EXPECT_TRUE(std::regex_search(text.out, std::regex("[0-9]+ check\\(s\\) could not be made"))) << text.out;
  auto json = dlock({"--redis", url, "--json", "doctor"}, {}, /*with_url=*/false);
  EXPECT_GE(parse_json(json.out, "doctor --json")["unchecked"].integer(), 4) << json.out;

  auto full = dlock({"doctor"});  // the default user may check everything
  EXPECT_EQ(full.exit_code, 0) << describe(full);
  EXPECT_EQ(full.out.find("could not be made"), std::string::npos) << full.out;
  EXPECT_EQ(parse_json(dlock({"--json", "doctor"}).out, "doctor --json")["unchecked"].integer(), 0);
}

// ACLs are enforced inside scripts too. `doctor` probed only SET, EVAL/EVALSHA, PUBLISH,
// SUBSCRIBE, ZADD and ZPOPMIN, so a user allowed those but not DEL, PEXPIRE, INCR or PTTL passed
// ("ok acl") and then failed every acquisition. Now every command the scripts call is probed:
// the mutex's ones fail the check, the other kinds' ones are a warning that names the kinds.
TEST_F(CliTest, DoctorProbesEveryCommandTheScriptsCall) {
  raw->cmd({"ACL", "SETUSER", "partial", "on", ">pw", "~dlock:*", "&dlock:*", "+hello", "+client", "+ping", "+info",
            "+config", "+acl", "+select", "+get", "+set", "+evalsha", "+eval", "+publish", "+subscribe", "+zadd",
            "+zpopmin", "+type", "+exists", "+time"});
  const std::string url = "redis://partial:pw@" + server->host() + ":" + std::to_string(server->port());
  auto run = dlock({"--redis", url, "run", "p1", "--", "true"}, {}, /*with_url=*/false);
  ASSERT_NE(run.exit_code, 0) << "the user really cannot take a lock\n" << describe(run);
  auto partial = dlock({"--redis", url, "doctor"}, {}, /*with_url=*/false);
  EXPECT_EQ(partial.exit_code, 78) << describe(partial);
  EXPECT_TRUE(std::regex_search(partial.out, std::regex("FAIL +acl .*inside the lock scripts: [a-z ]*pexpire")))
      << partial.out;

  // A mutex user as the README's minimal ACL makes one: fine for mutexes, a warning for the rest.
  raw->cmd({"ACL", "SETUSER", "minimal", "on", ">pw", "~dlock:*", "&dlock:*", "+get", "+set", "+del", "+exists",
            "+type", "+pttl", "+pexpire", "+incr", "+decr", "+time", "+zadd", "+zpopmin", "+zrem", "+publish",
            "+subscribe", "+unsubscribe", "+evalsha", "+eval", "+ping", "+client|setname", "+hello", "+acl",
            "+info", "+config"});
  auto minimal = dlock({"--redis", "redis://minimal:pw@" + server->host() + ":" + std::to_string(server->port()),
                        "--json", "doctor"},
                       {}, /*with_url=*/false);
  EXPECT_EQ(minimal.exit_code, 0) << describe(minimal);
  const JsonValue doc = parse_json(minimal.out, "doctor minimal");
  std::string acl, kinds;
  for (const auto& c : doc["checks"].items) {
    if (c["check"].str() == "acl") acl = c["status"].str();
    if (c["check"].str() == "acl-kinds") kinds = c["status"].str() + " " + c["detail"].str();
  }
  EXPECT_EQ(acl, "ok") << minimal.out;
  EXPECT_NE(kinds.find("warn"), std::string::npos) << minimal.out;
  EXPECT_NE(kinds.find("fair ("), std::string::npos) << minimal.out;
  EXPECT_NE(kinds.find("reentrant (hincrby hmget hset)"), std::string::npos) << minimal.out;
}

// A redis-cluster:// URL naming a server that is not in cluster mode: dlock finds no slot map and
// takes the seed for the Cluster's one primary. `doctor` reported its cluster_state as "cannot
// check" and exited 0; now the cluster-mode check fails (78) and names the redis:// URL to use,
// also for a user refused INFO (CLUSTER INFO's refusal tells). A redis:// URL passes it.
// (A redis:// URL naming a Cluster node: CliClusterTest.DoctorFailsASingleServerUrlNamingAClusterNode.)
TEST_F(CliTest, DoctorFailsAClusterUrlNamingAServerNotInClusterMode) {
  const std::string address = server->host() + ":" + std::to_string(server->port());
  auto text = dlock({"--redis", "redis-cluster://" + address, "doctor"}, {}, /*with_url=*/false);
  EXPECT_EQ(text.exit_code, 78) << describe(text);
  EXPECT_TRUE(std::regex_search(text.out, std::regex("FAIL +cluster-mode +\\[" + address + "\\] .*cluster_enabled:0")))
      << text.out;
  EXPECT_NE(text.out.find("fix: for this one server use --redis redis://" + address), std::string::npos) << text.out;

  raw->cmd({"ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info"});
  auto json = dlock({"--redis", "redis-cluster://noinfo:pw@" + address, "--json", "doctor"}, {}, /*with_url=*/false);
  EXPECT_EQ(json.exit_code, 78) << describe(json);
  const JsonValue doc = parse_json(json.out, "doctor cluster URL");
  std::string mode;
  for (const auto& c : doc["checks"].items) {
    if (c["check"].str() == "cluster-mode") mode = c["status"].str() + " " + c["node"].str() + " " + c["fix"].str();
  }
  EXPECT_EQ(mode, "fail " + address + " for this one server use --redis redis://" + address +
                      "; if a Cluster was meant, name one of its nodes")
      << json.out;

  auto single = dlock({"--json", "doctor"});
  EXPECT_EQ(single.exit_code, 0) << describe(single);
  EXPECT_NE(single.out.find("{\"check\":\"cluster-mode\",\"status\":\"ok\""), std::string::npos) << single.out;
}

// What `doctor` says of keyspace notifications follows the flags: 'g' carries deletions, 'x'
// expiries (it said "waiters wake when a lock expires" with Kg alone).
TEST_F(CliTest, DoctorTellsWhichKeyspaceEventsWakeWaiters) {
  auto keyspace_check = [&](const std::string& flags) {
    EXPECT_EQ(raw->cmd({"CONFIG", "SET", "notify-keyspace-events", flags}), "OK");
    auto r = dlock({"--json", "doctor"});
    const JsonValue doc = parse_json(r.out, "doctor " + flags);
    for (const auto& c : doc["checks"].items) {
      if (c["check"].str() == "keyspace-events") return c["detail"].str() + " | " + c["fix"].str();
    }
    ADD_FAILURE() << "no keyspace-events check: " << r.out;
    return std::string();
  };
  const std::string deletes_only = keyspace_check("Kg");
  EXPECT_NE(deletes_only.find("but not when one expires"), std::string::npos) << deletes_only;
  EXPECT_NE(deletes_only.find("notify-keyspace-events gKx"), std::string::npos) << deletes_only;
  const std::string expiries_only = keyspace_check("Kx");
  EXPECT_NE(expiries_only.find("but not when another client deletes one"), std::string::npos) << expiries_only;
  const std::string both = keyspace_check("KA");
  EXPECT_NE(both.find("when a lock expires or another client deletes it"), std::string::npos) << both;
  const std::string off = keyspace_check("");
  EXPECT_NE(off.find("off:"), std::string::npos) << off;
}

// A usage error is reported as JSON when --json is given as an option, wherever the error is
// found, and as text when "--json" is only an option's value or the command's own argument.
// Before, any "--json" before "--" counted: "--prefix --json" and "run x echo --json" gave JSON.
TEST_F(CliTest, AUsageErrorIsJsonOnlyWhenJsonIsGivenAsAnOption) {
  const std::vector<std::vector<std::string>> as_json = {
      {"status", "--bogus", "--json"},             // the parse fails before --json is read
      {"--json", "status", "--bogus"},
      {"frobnicate", "--json"},                    // unknown command: only global options known
      {"--json", "--", "x"},
      {"acquire", "x", "--json"},                  // found after the parse (--ttl missing)
      {"--json", "run", "--wait", "5x", "x", "echo"},
  };
  const std::vector<std::vector<std::string>> as_text = {
      {"--prefix", "--json"},                      // the prefix "--json", then no command
      {"--", "--json"},                            // "--" ends the options: no command
      {"status", "--bogus", "--prefix", "--json"},
      {"run", "--wait", "5x", "x", "echo", "--json"},  // the command's own argument
      {"run", "x", "--kind", "bogus", "--", "echo", "--json"},
  };
  auto joined = [](const std::vector<std::string>& args) {
    std::string j;
    for (const auto& a : args) j += a + " ";
    return j;
  };
  for (const auto& args : as_json) {
    auto r = dlock(args);
    EXPECT_EQ(r.exit_code, 64) << joined(args) << describe(r);
    // run's outcome object is the last line of stderr (stdout is the command's).
    const bool run = std::find(args.begin(), args.end(), "run") != args.end();
    auto j = parse_json(run ? last_line(r.err) : r.out, "dlock " + joined(args));
    EXPECT_EQ(j["error"].str(), "usage") << joined(args);
  }
  for (const auto& args : as_text) {
    auto r = dlock(args);
    EXPECT_EQ(r.exit_code, 64) << joined(args) << describe(r);
    EXPECT_TRUE(r.out.empty()) << "dlock " << joined(args) << "printed " << r.out;
    EXPECT_EQ(r.err.rfind("dlock", 0), 0u) << "not a text report: " << joined(args) << describe(r);
  }
}

// Every command's --json output, success or failure, is one parseable JSON object.
TEST_F(CliTest, EveryJsonOutputParses) {
  auto acquired = dlock({"--json", "acquire", "j", "--ttl", "30s"});
  const std::string owner = parse_json(acquired.out, "acquire")["owner"].str();
  hold_foreign("j-busy");
  raw->cmd({"SET", key("j-leak\"quote\\"), "x"});
  const std::vector<std::vector<std::string>> commands = {
      {"--version"},
      {"status", "j"},
      {"status", "free"},
      {"list"},
      {"list", "j*"},
      {"leaks"},
      {"extend", "j", owner, "--ttl", "40s"},
      {"extend", "j", foreign_token(), "--ttl", "40s"},
      {"release", "j", foreign_token()},
      {"release", "j", owner},
      {"acquire", "j-busy", "--ttl", "1s", "--no-wait"},
      {"unlock", "--force", "j-busy"},
      {"unlock", "--force", "j-busy"},
      {"doctor"},
      {"status"},
      {"frobnicate"},
  };
  for (const auto& args : commands) {
    std::vector<std::string> with_json{"--json"};
    with_json.insert(with_json.end(), args.begin(), args.end());
    auto r = dlock(with_json);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    auto j = parse_json(r.out, "dlock --json " + joined);
    EXPECT_EQ(lines_of(r.out).size(), 1u) << "one object on one line: " << joined;
    if (j.find("exit_code") != nullptr) {
      EXPECT_EQ(j["exit_code"].integer(), r.exit_code) << joined;
    }
  }
  // run: the outcome object is the last line of stderr; stdout belongs to the command.
  auto run = dlock({"--json", "run", "j", "--", "echo", "hello"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, "hello\n");
  auto outcome = parse_json(last_line(run.err), "run --json");
  EXPECT_EQ(outcome["outcome"].str(), "completed");
  EXPECT_EQ(outcome["status"].integer(), 0);
  auto busy = dlock({"--json", "run", "j-busy2", "--", "true"});
  EXPECT_EQ(busy.exit_code, 0);
  parse_json(last_line(busy.err), "run --json (2)");
}

// ------------------------------------------------------------------------ lock kinds (#4)

// Upper bounds on waits, stretched by DLOCK_TEST_TIME_SCALE (sanitizer builds start every dlock
// process instrumented, and the machine may be loaded).
milliseconds scaled(milliseconds d) {
  const char* s = std::getenv("DLOCK_TEST_TIME_SCALE");
  const double f = s != nullptr ? std::atof(s) : 1.0;
  return milliseconds(static_cast<long long>(static_cast<double>(d.count()) * std::max(1.0, f)));
}

// The text of `file` once a background command wrote it (empty if it did not in time).
std::string wait_for_text(const std::string& file, milliseconds timeout) {
  std::string text;
  eventually([&] { return !(text = read_file(file)).empty(); }, timeout);
  return text;
}

// rw: readers hold together (status shows two read holders), a writer is kept out, and a
// forced unlock removes both readers; they stop at their next renewal.
TEST_F(CliTest, RunReadersShareARwLockAndExcludeWriters) {
  for (const char* n : {"r1", "r2"}) {
    background({"run", "--read", "--ttl", "1s", "--grace", "200ms", "rw", "--",
                "sh", "-c", std::string("echo $DLOCK_KIND > ") + path(n) + "; while :; do sleep 0.05; done"});
  }
  EXPECT_EQ(wait_for_text(path("r1"), scaled(5s)), "rw\n") << background_err(0);
  EXPECT_EQ(wait_for_text(path("r2"), scaled(5s)), "rw\n") << background_err(1);
  auto status = dlock({"--json", "status", "rw"});
  ASSERT_EQ(status.exit_code, 0) << describe(status);
  auto j = parse_json(status.out, "status rw");
  EXPECT_EQ(j["kind"].str(), "rw");
  EXPECT_EQ(j["state"].str(), "held");
  ASSERT_EQ(j["holders"].items.size(), 2u);
  for (const auto& h : j["holders"].items) {
    EXPECT_EQ(h["mode"].str(), "read");
    EXPECT_TRUE(std::regex_match(h["owner"].str(), kOwnerToken)) << h["owner"].str();
  }
  auto writer = dlock({"run", "--kind", "rw", "rw", "--no-wait", "--", "true"});
  EXPECT_EQ(writer.exit_code, 75) << describe(writer);
  auto another_reader = dlock({"run", "--read", "rw", "--no-wait", "--", "true"});
  EXPECT_EQ(another_reader.exit_code, 0) << describe(another_reader);
  EXPECT_EQ(dlock({"run", "rw", "--no-wait", "--", "true"}).exit_code, 65) << "a mutex on a rw lock: wrong type";

  auto text = dlock({"status", "rw"});
  EXPECT_NE(text.out.find("kind     rw"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("reader: host"), std::string::npos) << text.out;

  auto unlocked = dlock({"--json", "unlock", "--force", "rw"});
  ASSERT_EQ(unlocked.exit_code, 0) << describe(unlocked);
  auto u = parse_json(unlocked.out, "unlock rw");
  EXPECT_EQ(u["kind"].str(), "rw");
  EXPECT_EQ(u["removed_holders"].items.size(), 2u);
  // Readers do not listen for revocation: they learn at their next renewal (every ~330 ms).
  for (std::size_t i = 0; i < 2; ++i) {
    auto code = background_process(i).wait_for(scaled(5s));
    ASSERT_TRUE(code.has_value()) << "a revoked reader kept running";
    EXPECT_EQ(*code, 70);
  }
  EXPECT_EQ(dlock({"run", "--kind", "rw", "rw", "--no-wait", "--", "true"}).exit_code, 0);
}

// --permits N is the semaphore's size: two holders fill a size of 2, a third is refused, and a
// caller that says 3 resizes it and gets in. --take K takes K permits at once.
TEST_F(CliTest, RunSemaphorePermitsIsItsSize) {
  for (const char* n : {"p1", "p2"}) {
    background({"run", "--permits", "2", "--ttl", "1s", "--grace", "200ms", "sem", "--",
                "sh", "-c", std::string("echo $DLOCK_KIND > ") + path(n) + "; while :; do sleep 0.05; done"});
  }
  EXPECT_EQ(wait_for_text(path("p1"), scaled(5s)), "semaphore\n") << background_err(0);
  EXPECT_EQ(wait_for_text(path("p2"), scaled(5s)), "semaphore\n") << background_err(1);
  auto j = parse_json(dlock({"--json", "status", "sem"}).out, "status sem");
  EXPECT_EQ(j["kind"].str(), "semaphore");
  EXPECT_EQ(j["permits_limit"].integer(), 2);
  ASSERT_EQ(j["holders"].items.size(), 2u);
  EXPECT_EQ(j["holders"].items[0]["mode"].str(), "permits");
  EXPECT_EQ(j["holders"].items[0]["count"].integer(), 1);

  auto full = dlock({"run", "--permits", "2", "sem", "--no-wait", "--", "true"});
  EXPECT_EQ(full.exit_code, 75) << describe(full);
  auto existing = dlock({"run", "--kind", "semaphore", "sem", "--no-wait", "--", "true"});
  EXPECT_EQ(existing.exit_code, 75) << "without --permits the stored size is used: " << describe(existing);
  auto resized = dlock({"-v", "run", "--permits", "3", "sem", "--no-wait", "--", "true"});
  EXPECT_EQ(resized.exit_code, 0) << describe(resized);
  EXPECT_NE(resized.err.find("set to 3"), std::string::npos) << resized.err;
  EXPECT_EQ(raw->cmd({"GET", key("sem") + ":limit"}), "3");
  EXPECT_EQ(dlock({"run", "--take", "2", "sem", "--no-wait", "--", "true"}).exit_code, 75) << "1 free, 2 wanted";
  // More than the stored size could only be taken after a resize: refused, not waited for.
  auto too_many = dlock({"run", "--take", "4", "sem", "--wait", "30s", "--", "true"});
  EXPECT_EQ(too_many.exit_code, 64) << describe(too_many);
  EXPECT_NE(too_many.err.find("--take 4 is more than semaphore 'sem' has (3 permits)"), std::string::npos)
      << too_many.err;
  auto json = dlock({"--json", "run", "--permits", "4", "--take", "2", "sem", "--no-wait", "--", "true"});
  EXPECT_EQ(json.exit_code, 0) << describe(json);
  auto outcome = parse_json(last_line(json.err), "run semaphore --json");
  EXPECT_EQ(outcome["kind"].str(), "semaphore");
  EXPECT_EQ(outcome["permits_taken"].integer(), 2);

  auto listed = parse_json(dlock({"--json", "list"}).out, "list with a semaphore");
  ASSERT_EQ(listed["count"].integer(), 1);
  EXPECT_EQ(listed["locks"].items[0]["kind"].str(), "semaphore");
  EXPECT_NE(dlock({"list"}).out.find("semaphore/4"), std::string::npos);

  auto unlocked = parse_json(dlock({"--json", "unlock", "--force", "sem"}).out, "unlock sem");
  EXPECT_EQ(unlocked["removed_holders"].items.size(), 2u);
  EXPECT_EQ(raw->cmd({"GET", key("sem") + ":limit"}), "4") << "the size survives a forced unlock";
  for (std::size_t i = 0; i < 2; ++i) {
    auto code = background_process(i).wait_for(scaled(5s));
    ASSERT_TRUE(code.has_value()) << "a revoked permit holder kept running";
    EXPECT_EQ(*code, 70);
  }
}

// A reentrant run uses the ReentrantMutex layout (a hash with a hold count), and listens for
// revocation like a mutex run: a forced unlock stops it at once (its renewal is 10 s away).
TEST_F(CliTest, RunReentrantHoldsTheHashLayoutAndStopsAtOnceWhenRevoked) {
  auto& bg = background({"run", "--kind", "reentrant", "--grace", "500ms", "re", "--",
                         "sh", "-c", "echo $DLOCK_FENCING_TOKEN > " + path("tok") + "; while :; do sleep 0.05; done"});
  const std::string token = wait_for_text(path("tok"), scaled(5s));
  ASSERT_FALSE(token.empty()) << bg.err();
  EXPECT_EQ(raw->cmd({"TYPE", key("re")}), "hash");
  EXPECT_EQ(raw->cmd({"HGET", key("re"), ":fence"}) + "\n", token);
  auto j = parse_json(dlock({"--json", "status", "re"}).out, "status reentrant");
  EXPECT_EQ(j["kind"].str(), "reentrant");
  ASSERT_EQ(j["holders"].items.size(), 1u);
  EXPECT_EQ(j["holders"].items[0]["count"].integer(), 1);
  EXPECT_EQ(j["holders"].items[0]["token"].text + "\n", token);
  EXPECT_GT(j["holders"].items[0]["holder"]["pid"].integer(), 0) << "host and pid from the owner identity";
  EXPECT_EQ(dlock({"run", "re", "--no-wait", "--", "true"}).exit_code, 65) << "a mutex on a reentrant lock";
  EXPECT_EQ(dlock({"run", "--kind", "reentrant", "re", "--no-wait", "--", "true"}).exit_code, 75);
  ASSERT_TRUE(eventually([&] { return subscribers("re") == 1; }, scaled(5s))) << "the holder listens for revocation";

  const auto t0 = SteadyClock::now();
  EXPECT_EQ(dlock({"unlock", "--force", "re"}).exit_code, 0);
  auto code = bg.process().wait_for(scaled(5s));
  ASSERT_TRUE(code.has_value()) << bg.err();
  EXPECT_EQ(*code, 70);
  EXPECT_LT(ms_since(t0), scaled(2500ms));
}

// Fair: status shows the queue head first; a forced unlock wakes the head, and the waiters run
// in the order they came.
TEST_F(CliTest, RunFairWaitersRunInOrderAndStatusShowsTheQueue) {
  auto& holder = background({"run", "--kind", "fair", "--grace", "500ms", "fq", "--",
                             "sh", "-c", "touch " + path("held") + "; while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return file_exists(path("held")); }, scaled(5s))) << holder.err();
  auto queued = [&] { return parse_json(dlock({"--json", "status", "fq"}).out, "status fair")["queue"].items.size(); };
  background({"run", "--kind", "fair", "fq", "--wait", "30s", "--", "sh", "-c", "echo A >> " + path("order")});
  ASSERT_TRUE(eventually([&] { return queued() == 1; }, scaled(5s)));
  background({"run", "--kind", "fair", "fq", "--wait", "30s", "--", "sh", "-c", "echo B >> " + path("order")});
  ASSERT_TRUE(eventually([&] { return queued() == 2; }, scaled(5s)));

  auto j = parse_json(dlock({"--json", "status", "fq"}).out, "status fair queue");
  EXPECT_EQ(j["kind"].str(), "fair");
  EXPECT_EQ(j["waiters"].integer(), 2);
  EXPECT_EQ(j["queue"].items[0]["role"].str(), "fair_queue");
  EXPECT_GT(j["queue"].items[0]["ttl_ms"].integer(), 0);
  auto text = dlock({"status", "fq"});
  EXPECT_NE(text.out.find("queue    1. host"), std::string::npos) << text.out;

  // The holder listens for revocation (fair waiters listen on their own channels).
  ASSERT_TRUE(eventually([&] { return subscribers("fq") == 1; }, scaled(5s))) << holder.err();
  auto unlocked = parse_json(dlock({"--json", "unlock", "--force", "fq"}).out, "unlock fair");
  EXPECT_EQ(unlocked["kind"].str(), "fair");
  EXPECT_EQ(unlocked["woken_head"].str(), j["queue"].items[0]["id"].str());
  ASSERT_TRUE(eventually([&] { return read_file(path("order")) == "A\nB\n"; }, scaled(10s))) << read_file(path("order"));
  auto code = holder.process().wait_for(scaled(5s));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 70);
}

}  // namespace
