// The remote tier: encoded entry bytes (the same bytes as an entry file, docs/formats/entry-format.md) by key, on one
// or more shared servers. Transport only: callers verify what they get with decode_entry (checksum and signature),
// e.g. through LocalStore::put_encoded. docs/guide/remote-tier.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aotcache/status.h"
#include "aotcache/store.h"

namespace aotcache {

struct RemoteOptions {
  std::string key_prefix = "aotcache:";  // namespace of the keys on the server: <prefix><64 hex>
  int64_t ttl_seconds = 0;               // 0 = entries do not expire (the server's eviction policy applies)
  int connect_timeout_ms = 500;
  int operation_timeout_ms = 1000;  // per command, read and write
  // Entries above this are not stored remotely (counted `remote.too_large`); no chunking.
  uint64_t max_entry_bytes = 128ULL << 20;
  // A server that failed (refused, timed out, broken reply) is skipped for this long, then retried.
  int down_seconds = 30;
};

// One small interface per remote kind (ccache style); concrete classes live in their .cc.
// Thread-safe: calls are serialized by an internal lock (one connection per server).
class RemoteStore {
 public:
  virtual ~RemoteStore() = default;
  // The bytes stored under `key_hex`, or nullopt on a miss. Unavailable when the key's server is down, refuses,
  // times out or answers garbage (the server is then marked down for down_seconds; calls meanwhile return
  // Unavailable at once, counted `remote.skipped_down`). InvalidArgument for a key that is not 64 lowercase hex.
  virtual Result<std::optional<std::string>> get(const std::string& key_hex) = 0;
  // Stores `bytes` under `key_hex` (with the TTL when set). InvalidArgument, nothing sent, for bytes above
  // max_entry_bytes (counted `remote.too_large`); Unavailable as for get.
  virtual Status put(const std::string& key_hex, std::string_view bytes) = 0;

  // Compile-once leases: while one machine compiles a key, the others wait for its entry instead of compiling it
  // too (docs/guide/remote-tier.md, "Compile once"). A lease is the server key `<prefix>lease:<key_hex>` on the entry's
  // server, holding the holder's `token` (unique per holder; host:pid:random) and expiring after `lease_ms` unless
  // renewed, so a holder that dies frees it within `lease_ms`. Errors as for get.
  //
  // Takes the lease when nobody holds it: true when taken.
  virtual Result<bool> try_lease(const std::string& key_hex, const std::string& token, int64_t lease_ms) = 0;
  // Extends the lease to `lease_ms` from now if `token` still holds it; false when it was lost (expired).
  virtual Result<bool> renew_lease(const std::string& key_hex, const std::string& token, int64_t lease_ms) = 0;
  // Drops the lease if `token` still holds it (compare and delete in one step, so another's lease is never
  // dropped).
  virtual Status release_lease(const std::string& key_hex, const std::string& token) = 0;
  // In one round trip: whether the entry is stored and whether someone holds the lease. What a waiter polls.
  struct Probe {
    bool entry = false;
    bool leased = false;
  };
  virtual Result<Probe> probe(const std::string& key_hex) = 0;

  // The counters gathered since the last call (remote.too_large, remote.timeouts, remote.skipped_down,
  // remote.server_errors, remote.marked_down), then zeroed.
  virtual Counters take_counters() = 0;
  // The servers, as parsed, in the order given.
  virtual std::vector<std::string> servers() const = 0;
};

// One server address. redis://[[user]:password@]host[:port][/db] (port 6379, db 0 by default) or
// redis+unix:///path/to/socket[?db=N].
struct RedisAddress {
  bool unix_socket = false;
  std::string host;  // or the socket path
  int port = 6379;
  int db = 0;
  std::string username;  // Redis 6 ACL user; empty = the default user
  std::string password;  // empty = no AUTH

  // The URL without the password: the server's identity for hashing and messages.
  std::string display() const;
};

// InvalidArgument for anything else (unknown scheme, bad port or db, empty host).
Result<RedisAddress> parse_redis_url(const std::string& url);

// `urls`: one or more URLs separated by commas. Keys are spread over the servers by rendezvous hashing, so adding
// or removing a server moves only its share of the keys. Connects lazily: a server that is down now does not fail
// this call. InvalidArgument for a malformed URL or option.
Result<std::unique_ptr<RemoteStore>> open_redis_store(const std::string& urls, const RemoteOptions& options);

// Index into `servers` of the one that owns `key_hex`: the highest SHA-256(server || "\n" || key) score.
// REQUIRES: !servers.empty().
size_t rendezvous_pick(const std::vector<std::string>& servers, const std::string& key_hex);

}  // namespace aotcache
