// Redis remote tier: URL parsing, rendezvous spread, size limit, down-marking on a refused port, and, when
// redis-server is installed, a round trip against a real server (prefix, db, TTL, timeout).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "aotcache/remote_store.h"

namespace aotcache {
namespace {

std::string key(int n) {
  std::string k = std::to_string(n);
  return std::string(64 - k.size(), '0') + k;
}

// A TCP port nothing listens on right now.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(RedisUrl, Parses) {
  auto a = parse_redis_url("redis://cache.local:7000/3").value();
  EXPECT_FALSE(a.unix_socket);
  EXPECT_EQ(a.host, "cache.local");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.db, 3);
  EXPECT_EQ(a.display(), "redis://cache.local:7000/3");
  auto d = parse_redis_url("redis://h").value();
  EXPECT_EQ(d.port, 6379);
  EXPECT_EQ(d.db, 0);
  auto p = parse_redis_url("redis://:s3cret@h:1/0").value();
  EXPECT_EQ(p.password, "s3cret");
  EXPECT_EQ(p.display().find("s3cret"), std::string::npos);
  EXPECT_TRUE(p.username.empty());
  auto acl = parse_redis_url("redis://builder:pw@h:1/0").value();
  EXPECT_EQ(acl.username, "builder");
  EXPECT_EQ(acl.password, "pw");
  EXPECT_EQ(acl.display(), "redis://h:1/0");
  auto u = parse_redis_url("redis+unix:///run/redis.sock?db=2").value();
  EXPECT_TRUE(u.unix_socket);
  EXPECT_EQ(u.host, "/run/redis.sock");
  EXPECT_EQ(u.db, 2);
  for (const char* bad : {"http://h", "redis://", "redis://h:0", "redis://h:99999", "redis://h:x", "redis://h/x",
                          "redis+unix://relative", "redis+unix:///p?database=1", "redis://user:@h"}) {
    EXPECT_EQ(parse_redis_url(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(open_redis_store("redis://a,redis://a", {}).ok());
  EXPECT_FALSE(open_redis_store("redis://a,,redis://b", {}).ok());
  EXPECT_EQ(open_redis_store("redis://a, redis://b:1", {}).value()->servers(),
            (std::vector<std::string>{"redis://a:6379/0", "redis://b:1/0"}));
}

TEST(Rendezvous, SpreadsAndMovesOnlyTheRemovedServersKeys) {
  const std::vector<std::string> three = {"redis://a:1/0", "redis://b:1/0", "redis://c:1/0"};
  const std::vector<std::string> two = {"redis://a:1/0", "redis://c:1/0"};
  int count[3] = {0, 0, 0};
  for (int n = 0; n < 3000; ++n) {
    const size_t pick = rendezvous_pick(three, key(n));
    ++count[pick];
    EXPECT_EQ(rendezvous_pick(three, key(n)), pick);  // stable
    if (pick != 1) {
      EXPECT_EQ(two[rendezvous_pick(two, key(n))], three[pick]) << n;  // a's and c's keys stay where they are
    }
  }
  for (int c : count) EXPECT_NEAR(c, 1000, 150);
}

TEST(RedisStore, RefusesEntriesAboveTheLimitWithoutSending) {
  RemoteOptions o;
  o.max_entry_bytes = 10;
  auto store = open_redis_store("redis://127.0.0.1:" + std::to_string(free_port()), o).value();
  Status s = store->put(key(1), "01234567890");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  Counters c = store->take_counters();
  EXPECT_EQ(c["remote.too_large"], 1);
  EXPECT_EQ(c.count("remote.marked_down"), 0u);  // never connected
  EXPECT_TRUE(store->take_counters().empty());
}

TEST(RedisStore, RefusedServerIsMarkedDownThenSkipped) {
  RemoteOptions o;
  o.down_seconds = 30;
  auto store = open_redis_store("redis://127.0.0.1:" + std::to_string(free_port()), o).value();
  auto r = store->get(key(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(store->put(key(2), "x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(store->get(key(3)).status().code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  Counters c = store->take_counters();
  EXPECT_EQ(c["remote.marked_down"], 1);
  EXPECT_EQ(c["remote.server_errors"], 1);
  EXPECT_EQ(c["remote.skipped_down"], 2);
  EXPECT_EQ(store->get("../etc").status().code(), StatusCode::kInvalidArgument);
}

// A redis-server child on a free port, stopped (SIGTERM via SHUTDOWN NOSAVE or kill) at the end.
class RealRedis : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v redis-server >/dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server not installed";
    port_ = free_port();
    char tmpl[] = "/tmp/aotcache_redis_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string cmd =
        "redis-server --port " + std::to_string(port_) +
        " --bind 127.0.0.1 --enable-debug-command local --save '' --appendonly no --daemonize yes --dir " + dir_ +
        " --pidfile " + dir_ + "/pid --logfile " + dir_ + "/log";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    url_ = "redis://127.0.0.1:" + std::to_string(port_) + "/1";
    for (int k = 0; k < 100; ++k) {  // wait until it answers
      auto probe = open_redis_store(url_, {}).value();
      if (probe->get(key(0)).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "redis-server did not start";
  }
  void TearDown() override {
    if (dir_.empty()) return;
    std::ifstream pid_file(dir_ + "/pid");
    long pid = 0;
    if (pid_file >> pid && pid > 0) {
      ASSERT_EQ(std::system(("kill " + std::to_string(pid)).c_str()), 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0);
  }
  int port_ = 0;
  std::string dir_, url_;
};

TEST_F(RealRedis, RoundTripPrefixDbAndTtl) {
  RemoteOptions o;
  o.key_prefix = "t1:";
  o.ttl_seconds = 1;
  auto store = open_redis_store(url_, o).value();
  EXPECT_FALSE(store->get(key(7)).value().has_value());
  const std::string bytes("binary\0entry\xff", 13);
  ASSERT_TRUE(store->put(key(7), bytes).ok());
  EXPECT_EQ(store->get(key(7)).value().value(), bytes);
  // Another namespace does not see it; neither does another db.
  RemoteOptions other = o;
  other.key_prefix = "t2:";
  EXPECT_FALSE(open_redis_store(url_, other).value()->get(key(7)).value().has_value());
  const std::string db0 = "redis://127.0.0.1:" + std::to_string(port_) + "/0";
  EXPECT_FALSE(open_redis_store(db0, o).value()->get(key(7)).value().has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_FALSE(store->get(key(7)).value().has_value());  // expired
}

TEST_F(RealRedis, SlowServerTimesOutWithinTheBound) {
  RemoteOptions o;
  o.operation_timeout_ms = 200;
  auto store = open_redis_store(url_, o).value();
  ASSERT_TRUE(store->put(key(1), "x").ok());
  std::thread sleeper([&] {
    const std::string cmd = "redis-cli -p " + std::to_string(port_) + " DEBUG SLEEP 1 >/dev/null 2>&1";
    (void)std::system(cmd.c_str());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = store->get(key(1));
  const auto waited = std::chrono::steady_clock::now() - t0;
  sleeper.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(waited, std::chrono::milliseconds(600));
  EXPECT_EQ(store->take_counters()["remote.timeouts"], 1);
}

TEST_F(RealRedis, LeaseIsExclusiveRenewableAndExpires) {
  auto a = open_redis_store(url_, {}).value();
  auto b = open_redis_store(url_, {}).value();
  const std::string k = key(3);
  EXPECT_FALSE(a->probe(k).value().leased);
  ASSERT_TRUE(a->try_lease(k, "host-a:1:x", 300).value());
  EXPECT_FALSE(b->try_lease(k, "host-b:2:y", 300).value()) << "held by a";
  EXPECT_TRUE(b->probe(k).value().leased);
  EXPECT_FALSE(b->probe(k).value().entry);
  EXPECT_FALSE(b->renew_lease(k, "host-b:2:y", 300).value()) << "b does not hold it";
  ASSERT_TRUE(b->release_lease(k, "host-b:2:y").ok());
  EXPECT_TRUE(b->probe(k).value().leased) << "b's release must not drop a's lease";
  for (int n = 0; n < 3; ++n) {  // renewed past its first expiry
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_TRUE(a->renew_lease(k, "host-a:1:x", 300).value());
  }
  EXPECT_TRUE(b->probe(k).value().leased);
  ASSERT_TRUE(a->put(k, "entry").ok());
  EXPECT_TRUE(b->probe(k).value().entry);
  ASSERT_TRUE(a->release_lease(k, "host-a:1:x").ok());
  EXPECT_FALSE(b->probe(k).value().leased);
  // A holder that stops renewing (died) loses the lease when it expires.
  ASSERT_TRUE(a->try_lease(k, "host-a:1:z", 200).value());
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  EXPECT_FALSE(b->probe(k).value().leased);
  EXPECT_TRUE(b->try_lease(k, "host-b:2:w", 200).value());
  EXPECT_FALSE(a->renew_lease(k, "host-a:1:z", 200).value()) << "an expired lease cannot be renewed";
  EXPECT_EQ(a->try_lease(k, "", 200).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->try_lease(k, "t", 0).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RealRedis, AclUserAuthenticates) {
  const std::string cli = "redis-cli -p " + std::to_string(port_) + " ";
  ASSERT_EQ(std::system((cli + "ACL SETUSER builder on '>pw1' '~aotcache:*' '+@all' >/dev/null").c_str()), 0);
  ASSERT_EQ(std::system((cli + "ACL SETUSER default off >/dev/null").c_str()), 0);
  const std::string host = "127.0.0.1:" + std::to_string(port_) + "/1";
  auto good = open_redis_store("redis://builder:pw1@" + host, {}).value();
  ASSERT_TRUE(good->put(key(4), "x").ok());
  EXPECT_EQ(good->get(key(4)).value().value(), "x");
  auto wrong = open_redis_store("redis://builder:nope@" + host, {}).value();
  EXPECT_EQ(wrong->get(key(4)).status().code(), StatusCode::kUnavailable);
  auto anonymous = open_redis_store("redis://" + host, {}).value();
  EXPECT_EQ(anonymous->get(key(4)).status().code(), StatusCode::kUnavailable);
  ASSERT_EQ(std::system((cli + "--user builder --pass pw1 ACL SETUSER default on >/dev/null 2>&1").c_str()), 0);
}

}  // namespace
}  // namespace aotcache
