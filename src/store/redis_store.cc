// The Redis remote tier (hiredis, blocking with timeouts): GET/SET of encoded entries, rendezvous sharding over
// several servers, down-marking of failed servers. Contract: include/aotcache/remote_store.h.
#include <hiredis/hiredis.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "aotcache/remote_store.h"
#include "base/sha256.h"

namespace aotcache {
namespace {

using Clock = std::chrono::steady_clock;

Result<int> parse_int(const std::string& text, int lo, int hi, const std::string& what) {
  if (text.empty() || text.size() > 9) return Status::invalid_argument("bad " + what + " '" + text + "'");
  for (char c : text) {
    if (c < '0' || c > '9') return Status::invalid_argument("bad " + what + " '" + text + "'");
  }
  const int v = std::atoi(text.c_str());
  if (v < lo || v > hi) return Status::invalid_argument(what + " " + text + " out of range");
  return v;
}

timeval to_timeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms % 1000) * 1000);
  return tv;
}

// hiredis reports a timed-out socket as an I/O error with errno EAGAIN (reads, writes) or ETIMEDOUT (connect).
bool is_timeout(const redisContext* c) {
#ifdef REDIS_ERR_TIMEOUT
  if (c->err == REDIS_ERR_TIMEOUT) return true;
#endif
  return c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT ||
                                    std::strstr(c->errstr, "temporarily unavailable") != nullptr ||
                                    std::strstr(c->errstr, "timed out") != nullptr);
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

struct Server {
  RedisAddress address;
  std::string id;  // address.display()
  Context context;
  Clock::time_point down_until{};
};

class RedisStore final : public RemoteStore {
 public:
  RedisStore(std::vector<Server> servers, RemoteOptions options)
      : servers_(std::move(servers)), options_(std::move(options)) {
    for (const Server& s : servers_) ids_.push_back(s.id);
  }

  Result<std::optional<std::string>> get(const std::string& key_hex) override {
    if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
    std::lock_guard<std::mutex> lock(mu_);
    Server& s = servers_[rendezvous_pick(ids_, key_hex)];
    const std::string key = options_.key_prefix + key_hex;
    const char* argv[] = {"GET", key.data()};
    const size_t lens[] = {3, key.size()};
    AOTCACHE_ASSIGN_OR_RETURN(Reply reply, command(s, 2, argv, lens));
    if (reply->type == REDIS_REPLY_NIL) return std::optional<std::string>();
    if (reply->type != REDIS_REPLY_STRING) return fail(s, "unexpected reply type to GET", false);
    return std::optional<std::string>(std::string(reply->str, reply->len));
  }

  Status put(const std::string& key_hex, std::string_view bytes) override {
    if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes.size() > options_.max_entry_bytes) {
      counters_["remote.too_large"] += 1;
      return Status::invalid_argument("entry of " + std::to_string(bytes.size()) +
                                      " bytes is above the remote limit of " +
                                      std::to_string(options_.max_entry_bytes));
    }
    Server& s = servers_[rendezvous_pick(ids_, key_hex)];
    const std::string key = options_.key_prefix + key_hex;
    const std::string ttl = std::to_string(options_.ttl_seconds);
    const char* argv[] = {"SET", key.data(), bytes.data(), "EX", ttl.data()};
    const size_t lens[] = {3, key.size(), bytes.size(), 2, ttl.size()};
    AOTCACHE_ASSIGN_OR_RETURN(Reply reply, command(s, options_.ttl_seconds > 0 ? 5 : 3, argv, lens));
    if (reply->type != REDIS_REPLY_STATUS) return fail(s, "unexpected reply to SET", false);
    return Status();
  }

  Result<bool> try_lease(const std::string& key_hex, const std::string& token, int64_t lease_ms) override {
    AOTCACHE_RETURN_IF_ERROR(check_lease_args(key_hex, token, lease_ms));
    std::lock_guard<std::mutex> lock(mu_);
    Server& s = servers_[rendezvous_pick(ids_, key_hex)];
    const std::string key = lease_key(key_hex), ms = std::to_string(lease_ms);
    const char* argv[] = {"SET", key.data(), token.data(), "NX", "PX", ms.data()};
    const size_t lens[] = {3, key.size(), token.size(), 2, 2, ms.size()};
    AOTCACHE_ASSIGN_OR_RETURN(Reply reply, command(s, 6, argv, lens));
    if (reply->type == REDIS_REPLY_NIL) return false;  // held by another
    if (reply->type != REDIS_REPLY_STATUS) return fail(s, "unexpected reply to SET NX", false);
    return true;
  }

  Result<bool> renew_lease(const std::string& key_hex, const std::string& token, int64_t lease_ms) override {
    AOTCACHE_RETURN_IF_ERROR(check_lease_args(key_hex, token, lease_ms));
    static constexpr std::string_view k_renew =
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
    AOTCACHE_ASSIGN_OR_RETURN(int64_t done, eval_int(k_renew, key_hex, token, std::to_string(lease_ms)));
    return done == 1;
  }

  Status release_lease(const std::string& key_hex, const std::string& token) override {
    AOTCACHE_RETURN_IF_ERROR(check_lease_args(key_hex, token, 1));
    static constexpr std::string_view k_release =
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
    auto released = eval_int(k_release, key_hex, token, "");
    return released.ok() ? Status() : released.status();
  }

  Result<Probe> probe(const std::string& key_hex) override {
    if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
    std::lock_guard<std::mutex> lock(mu_);
    Server& s = servers_[rendezvous_pick(ids_, key_hex)];
    const std::string entry = options_.key_prefix + key_hex, lease = lease_key(key_hex);
    static constexpr std::string_view k_probe =
        "return redis.call('EXISTS', KEYS[1]) * 2 + redis.call('EXISTS', KEYS[2])";
    const char* argv[] = {"EVAL", k_probe.data(), "2", entry.data(), lease.data()};
    const size_t lens[] = {4, k_probe.size(), 1, entry.size(), lease.size()};
    AOTCACHE_ASSIGN_OR_RETURN(Reply reply, command(s, 5, argv, lens));
    if (reply->type != REDIS_REPLY_INTEGER) return fail(s, "unexpected reply to the probe", false);
    return Probe{(reply->integer & 2) != 0, (reply->integer & 1) != 0};
  }

  Counters take_counters() override {
    std::lock_guard<std::mutex> lock(mu_);
    Counters out;
    out.swap(counters_);
    return out;
  }

  std::vector<std::string> servers() const override { return ids_; }

 private:
  std::string lease_key(const std::string& key_hex) const { return options_.key_prefix + "lease:" + key_hex; }

  static Status check_lease_args(const std::string& key_hex, const std::string& token, int64_t lease_ms) {
    if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
    if (token.empty() || token.size() > 256) return Status::invalid_argument("lease token must be 1-256 bytes");
    if (lease_ms <= 0) return Status::invalid_argument("lease time must be positive");
    return Status();
  }

  // EVAL of `script` over the lease key of `key_hex` with ARGV = (token[, extra]); its integer reply.
  Result<int64_t> eval_int(std::string_view script, const std::string& key_hex, const std::string& token,
                           const std::string& extra) {
    std::lock_guard<std::mutex> lock(mu_);
    Server& s = servers_[rendezvous_pick(ids_, key_hex)];
    const std::string key = lease_key(key_hex);
    const char* argv[] = {"EVAL", script.data(), "1", key.data(), token.data(), extra.data()};
    const size_t lens[] = {4, script.size(), 1, key.size(), token.size(), extra.size()};
    AOTCACHE_ASSIGN_OR_RETURN(Reply reply, command(s, extra.empty() ? 5 : 6, argv, lens));
    if (reply->type != REDIS_REPLY_INTEGER) return fail(s, "unexpected reply to a lease script", false);
    return static_cast<int64_t>(reply->integer);
  }

  // REQUIRES: mu_ held. Marks `s` down, drops its connection, and returns Unavailable naming the server.
  Status fail(Server& s, const std::string& what, bool timeout) {
    s.context.reset();
    s.down_until = Clock::now() + std::chrono::seconds(options_.down_seconds);
    counters_["remote.marked_down"] += 1;
    counters_[timeout ? "remote.timeouts" : "remote.server_errors"] += 1;
    return Status::unavailable("redis " + s.id + ": " + what + (timeout ? " (timeout)" : "") + "; skipped for " +
                               std::to_string(options_.down_seconds) + "s");
  }

  // REQUIRES: mu_ held.
  Status connect(Server& s) {
    const timeval connect_tv = to_timeval(options_.connect_timeout_ms);
    Context c(s.address.unix_socket ? redisConnectUnixWithTimeout(s.address.host.c_str(), connect_tv)
                                    : redisConnectWithTimeout(s.address.host.c_str(), s.address.port, connect_tv));
    if (c == nullptr) return fail(s, "cannot allocate a connection", false);
    if (c->err != 0) return fail(s, std::string("connect: ") + c->errstr, is_timeout(c.get()));
    if (redisSetTimeout(c.get(), to_timeval(options_.operation_timeout_ms)) != REDIS_OK) {
      return fail(s, "cannot set the operation timeout", false);
    }
    s.context = std::move(c);
    if (!s.address.password.empty()) {
      const std::string& user = s.address.username;
      const char* argv[] = {"AUTH", user.empty() ? s.address.password.data() : user.data(), s.address.password.data()};
      const size_t lens[] = {4, user.empty() ? s.address.password.size() : user.size(), s.address.password.size()};
      AOTCACHE_ASSIGN_OR_RETURN(Reply r, send(s, user.empty() ? 2 : 3, argv, lens));
      if (r->type != REDIS_REPLY_STATUS) return fail(s, "AUTH refused", false);
    }
    if (s.address.db != 0) {
      const std::string db = std::to_string(s.address.db);
      const char* argv[] = {"SELECT", db.data()};
      const size_t lens[] = {6, db.size()};
      AOTCACHE_ASSIGN_OR_RETURN(Reply r, send(s, 2, argv, lens));
      if (r->type != REDIS_REPLY_STATUS) return fail(s, "SELECT " + db + " refused", false);
    }
    return Status();
  }

  // REQUIRES: mu_ held, s.context connected. An error reply is a failure of the server too.
  Result<Reply> send(Server& s, int argc, const char** argv, const size_t* lens) {
    Reply reply(static_cast<redisReply*>(redisCommandArgv(s.context.get(), argc, argv, lens)));
    if (reply == nullptr) {
      return fail(s, std::string(argv[0]) + ": " + s.context->errstr, is_timeout(s.context.get()));
    }
    if (reply->type == REDIS_REPLY_ERROR) return fail(s, std::string(argv[0]) + ": " + reply->str, false);
    return reply;
  }

  // REQUIRES: mu_ held. Connects when needed; a down server is skipped without trying until its time is up.
  Result<Reply> command(Server& s, int argc, const char** argv, const size_t* lens) {
    if (s.context == nullptr) {
      if (Clock::now() < s.down_until) {
        counters_["remote.skipped_down"] += 1;
        return Status::unavailable("redis " + s.id + " is marked down");
      }
      AOTCACHE_RETURN_IF_ERROR(connect(s));
    }
    return send(s, argc, argv, lens);
  }

  std::mutex mu_;
  std::vector<Server> servers_;
  std::vector<std::string> ids_;
  const RemoteOptions options_;
  Counters counters_;
};

}  // namespace

std::string RedisAddress::display() const {
  if (unix_socket) return "redis+unix://" + host + "?db=" + std::to_string(db);
  return "redis://" + host + ":" + std::to_string(port) + "/" + std::to_string(db);
}

Result<RedisAddress> parse_redis_url(const std::string& url) {
  RedisAddress a;
  constexpr std::string_view k_tcp = "redis://", k_unix = "redis+unix://";
  if (url.rfind(k_unix, 0) == 0) {
    a.unix_socket = true;
    std::string rest = url.substr(k_unix.size());
    if (const size_t q = rest.find('?'); q != std::string::npos) {
      const std::string query = rest.substr(q + 1);
      rest.resize(q);
      if (query.rfind("db=", 0) != 0) return Status::invalid_argument("unknown query '" + query + "' in " + url);
      AOTCACHE_ASSIGN_OR_RETURN(a.db, parse_int(query.substr(3), 0, 1 << 20, "db"));
    }
    if (rest.empty() || rest[0] != '/') return Status::invalid_argument("redis+unix URL needs an absolute path");
    a.host = rest;
    return a;
  }
  if (url.rfind(k_tcp, 0) != 0) {
    return Status::invalid_argument("remote URL '" + url + "' is not redis://host:port/db or redis+unix:///path");
  }
  std::string rest = url.substr(k_tcp.size());
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    rest.resize(slash);
    if (!db.empty()) {
      AOTCACHE_ASSIGN_OR_RETURN(a.db, parse_int(db, 0, 1 << 20, "db"));
    }
  }
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string user_info = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = user_info.find(':');
    if (colon == std::string::npos) {
      a.password = user_info;
    } else {
      a.username = user_info.substr(0, colon);
      a.password = user_info.substr(colon + 1);
    }
    if (!a.username.empty() && a.password.empty()) {
      return Status::invalid_argument("remote URL names a user without a password");
    }
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string::npos && rest.find(']') == std::string::npos) {
    AOTCACHE_ASSIGN_OR_RETURN(a.port, parse_int(rest.substr(colon + 1), 1, 65535, "port"));
    rest.resize(colon);
  }
  if (rest.empty()) return Status::invalid_argument("remote URL without a host");
  a.host = rest;
  return a;
}

size_t rendezvous_pick(const std::vector<std::string>& servers, const std::string& key_hex) {
  size_t best = 0;
  std::string best_score;
  for (size_t k = 0; k < servers.size(); ++k) {
    std::string score = internal::sha256(servers[k] + "\n" + key_hex);
    if (k == 0 || score > best_score) {
      best = k;
      best_score = std::move(score);
    }
  }
  return best;
}

Result<std::unique_ptr<RemoteStore>> open_redis_store(const std::string& urls, const RemoteOptions& options) {
  if (options.connect_timeout_ms <= 0 || options.operation_timeout_ms <= 0) {
    return Status::invalid_argument("remote timeouts must be positive");
  }
  if (options.ttl_seconds < 0 || options.down_seconds < 0) return Status::invalid_argument("negative remote option");
  std::vector<Server> servers;
  size_t start = 0;
  while (start <= urls.size()) {
    size_t end = urls.find(',', start);
    if (end == std::string::npos) end = urls.size();
    std::string url = urls.substr(start, end - start);
    while (!url.empty() && url.front() == ' ') url.erase(0, 1);
    while (!url.empty() && url.back() == ' ') url.pop_back();
    if (url.empty()) return Status::invalid_argument("empty remote URL in '" + urls + "'");
    AOTCACHE_ASSIGN_OR_RETURN(RedisAddress address, parse_redis_url(url));
    for (const Server& s : servers) {
      if (s.id == address.display()) return Status::invalid_argument("remote server listed twice: " + s.id);
    }
    servers.push_back(Server{address, address.display(), nullptr, {}});
    start = end + 1;
  }
  return std::unique_ptr<RemoteStore>(new RedisStore(std::move(servers), options));
}

}  // namespace aotcache
