// The local store: entries under one directory (docs/formats/store-layout.md), written atomically, verified on read,
// plus the directory's cumulative counters. Several processes may use one directory at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aotcache/entry.h"
#include "aotcache/file_system.h"
#include "aotcache/signing.h"
#include "aotcache/status.h"

namespace aotcache {

struct EntryInfo {
  std::string key_hex;
  uint64_t size = 0;
  int64_t mtime_unix = 0;
};

// Counter name -> value. Times are integers in microseconds (names end in _us).
using Counters = std::map<std::string, int64_t>;

// The default cache directory, from the values of $AOTCACHE_DIR, $XDG_CACHE_HOME and $HOME (empty = unset):
// `aotcache_dir`, else `xdg_cache_home`/aotcache, else `home`/.cache/aotcache (home "/tmp" when empty). The store
// reads no environment: the edges (the CLI's main, python/aotcache/settings.py) pass these values.
std::string default_cache_dir(const std::string& aotcache_dir, const std::string& xdg_cache_home,
                              const std::string& home);

// Default bound of a cache directory: 10 GiB.
constexpr uint64_t k_default_max_size = 10ULL << 30;

// "10G", "10GiB", "1.5 GB", "500M", "4096" (bytes) -> bytes; units are binary (K = 1024). InvalidArgument otherwise.
Result<uint64_t> parse_size(const std::string& text);
// "30s", "15m", "12h", "7d", "2w" -> seconds. InvalidArgument otherwise.
Result<int64_t> parse_age(const std::string& text);

// Which entries a size bound evicts first. kLru: least recently used. kSavedPerByte: lowest
// compile_seconds / file bytes / (1 + days since last use), so cheap-to-recompile large entries go first.
enum class EvictionPolicy { kLru, kSavedPerByte };
// "lru" or "saved-per-byte"; InvalidArgument otherwise.
Result<EvictionPolicy> parse_eviction_policy(const std::string& text);

// How a store behaves, fixed at open. The defaults are the documented ones (docs/guide/configuration.md). The store
// never reads the environment: the CLI's main and python/aotcache/settings.py build these from it.
struct StoreOptions {
  // Bound of the directory in bytes, kept by eviction after each put; 0 = unbounded.
  uint64_t max_size = k_default_max_size;
  // Which entries the bound and prune remove first.
  EvictionPolicy eviction = EvictionPolicy::kLru;
  // keys[0] signs every put, every key verifies every read; none = unsigned entries, signatures unchecked
  // (make_signing_keys builds them from a signing key and accepted keys).
  SigningKeys signing;
};

// The entry files' total, as kept by the size ledger (docs/formats/store-layout.md §7).
struct StoreSize {
  uint64_t bytes = 0;
  uint64_t entries = 0;
};

// Called as a long operation advances: `done` of `total` items.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

// Bound of quarantine/: the oldest quarantined files are dropped beyond either limit.
constexpr size_t k_quarantine_max_files = 32;
constexpr uint64_t k_quarantine_max_bytes = 256ULL << 20;

// True for a 64-digit lowercase hex string: the only key spelling the store accepts (no path tricks).
bool is_valid_key_hex(const std::string& key_hex);

class LocalStore {
 public:
  // Creates the layout under `dir` when missing, with `options` in force. IOError when the directory cannot be
  // created or written. `fs` must outlive the store.
  static Result<std::unique_ptr<LocalStore>> open(const std::string& dir, const StoreOptions& options = {},
                                                  FileSystem* fs = default_file_system());

  // nullopt on a miss; a hit marks the entry used (mtime, best effort). Corruption when the stored bytes fail their
  // checks: the file is then moved to quarantine/ (best effort, counted as `corrupt`), so it is never served and
  // the next lookup is a miss. Unauthenticated (untrusted) when signing keys are set and the entry is unsigned,
  // signed by a key id not among them, or its MAC does not match: nothing of it is decoded and the file is left in
  // place (it may be another key set's entry, e.g. during a rotation; eviction removes it in time). Unsupported (a
  // newer format) leaves the file alone too.
  Result<std::optional<Entry>> get(const std::string& key_hex);
  // Like get, without side effects: the entry is not marked used and a bad one is not quarantined. For inspection
  // (`aotcache show`, `explain`, the backend's miss explanation), which must not change what eviction keeps.
  Result<std::optional<Entry>> peek(const std::string& key_hex);
  // Like get, without side effects: OK for a valid entry, NotFound, Corruption, Unauthenticated or Unsupported.
  // For `verify`.
  Status check_entry(const std::string& key_hex);
  // Marks an entry used for eviction without reading it (what get does after a hit): for an entry whose content a
  // hit did not need, e.g. a symbolic graph's guard index when a frame serves one of its candidates. Best effort: OK
  // when the entry is absent or the directory read-only; InvalidArgument for a malformed key.
  Status mark_used(const std::string& key_hex);
  // The entry file's bytes, unverified (for export, which verifies them); nullopt when absent.
  Result<std::optional<std::string>> read_entry_file(const std::string& key_hex);
  // Atomic: a concurrent reader sees no entry or the whole entry. The data is written to a temp file first, then
  // renamed into place under the size ledger's lock. With a size bound set and the ledger over it, evicts entries
  // (policy below) until the directory is back under 90% of the bound (counted as `evictions`). On failure: an
  // IOError naming the entry and the cause (errno's text), no entry, no temp file, the ledger unchanged.
  Status put(const Entry& entry);
  // Stores already encoded entry bytes exactly, after decode_entry accepts them (checksum, manifest hashes to the
  // key, signature when keys are set). Returns the key. Corruption, Unauthenticated or Unsupported for bytes that
  // fail, and nothing is written. For import and for backfilling from a remote tier.
  Result<std::string> put_encoded(std::string_view bytes);
  // put_encoded for a backfill: the bytes must be the entry of `key_hex` (else Corruption, nothing written), and the
  // decoded entry is returned, as get(key_hex) would return it, so the caller does not read and decode it again.
  Result<Entry> put_encoded_entry(std::string_view bytes, const std::string& key_hex);
  // StoreOptions::max_size, changeable later (the backend applies the bound in force at each compile). A hit marks
  // its entry used (mtime). 0 = unbounded; any other bound is enforced, however small.
  void set_max_size(uint64_t bytes) { max_size_ = bytes; }
  uint64_t max_size() const { return max_size_; }
  // StoreOptions::eviction. Not thread-safe against a concurrent put or prune.
  void set_eviction_policy(EvictionPolicy policy) { policy_ = policy; }
  EvictionPolicy eviction_policy() const { return policy_; }
  // StoreOptions::signing. Not thread-safe against concurrent get/put.
  void set_signing_keys(SigningKeys keys) { signing_keys_ = std::move(keys); }
  const SigningKeys& signing_keys() const { return signing_keys_; }
  // Removes entries unused for `older_than_seconds` (when > 0), then entries in eviction order until the total is
  // at most `target_bytes` (when > 0). Re-syncs the size ledger from the scan. Returns the number removed.
  Result<uint64_t> prune(uint64_t target_bytes, int64_t older_than_seconds, const ProgressFn& progress = {});
  Status remove(const std::string& key_hex);
  Result<std::vector<EntryInfo>> list();
  // Removes every entry and the graph index; keeps the counters and the quarantine.
  Status clear(const ProgressFn& progress = {});

  // Moves the entry file to quarantine/<19-digit unix nanoseconds>-<key>.aotc (dropping the oldest quarantined files
  // beyond k_quarantine_max_files / k_quarantine_max_bytes) and counts `corrupt`. Returns the new path; NotFound when
  // the entry is absent.
  Result<std::string> quarantine(const std::string& key_hex);
  // Files in quarantine/ (name = "<unix ns>-<key>.aotc"), oldest first.
  Result<std::vector<DirEntry>> list_quarantine();

  // The size ledger's total (no scan), re-synced by a scan when the ledger is missing, unreadable or older than a
  // day. `scan_size()` always scans and rewrites the ledger (prune, verify).
  Result<StoreSize> size();
  Result<StoreSize> scan_size();

  // Keys of stored entries whose `graph` component has this digest (64 hex), newest first: the entries a miss
  // can be explained against. Index records of removed entries are dropped on the way.
  Result<std::vector<std::string>> keys_for_graph(const std::string& graph_digest_hex);

  // Whether an entry file exists under `key_hex` (a stat, no read): what a process waiting for another's compile
  // polls. InvalidArgument for a malformed key.
  Result<bool> contains(const std::string& key_hex);
  // The compile lock of `key_hex` (`locks/<key>.lock`, docs/formats/store-layout.md §8), without waiting: nullptr when
  // another process (or another caller in this one) holds it. Held while one process compiles a key, so the others
  // wait for its entry instead of compiling it too; released (and its file removed) when destroyed or when the
  // holder dies. IOError when the lock file cannot be created (read-only directory).
  Result<std::unique_ptr<FileLock>> try_compile_lock(const std::string& key_hex);

  // Adds `delta` to the persistent counters under a file lock: safe across processes.
  Status add_counters(const Counters& delta);
  Result<Counters> read_counters();
  Status zero_counters();

  const std::string& dir() const { return dir_; }
  std::string entry_path(const std::string& key_hex) const;

 private:
  LocalStore(std::string dir, FileSystem* fs) : dir_(std::move(dir)), fs_(fs) {}
  Result<Counters> read_counters_unlocked();
  std::string graph_index_dir(const std::string& graph_digest_hex) const;

  Status remove_stale_temp_files();
  Status put_bytes(const std::string& key_hex, const std::string& bytes, const Manifest& manifest);
  // REQUIRES: the ledger lock is held by this process.
  Result<StoreSize> read_ledger_unlocked(bool* fresh);
  Status write_ledger_unlocked(const StoreSize& size);
  Result<StoreSize> scan_size_unlocked();
  Status remove_unlocked(const std::string& key_hex, StoreSize* size);
  // nullopt target: the size bound's own (90% of it) when the total is above the bound, else none.
  Result<uint64_t> prune_unlocked(std::optional<uint64_t> target_bytes, int64_t older_than_seconds,
                                  const ProgressFn& progress);
  Status bound_quarantine_unlocked();
  Result<std::unique_ptr<FileLock>> lock_ledger();

  std::string dir_;
  FileSystem* fs_;
  uint64_t max_size_ = k_default_max_size;
  EvictionPolicy policy_ = EvictionPolicy::kLru;
  SigningKeys signing_keys_;
  int64_t ledger_synced_unix_ = 0;  // of the ledger last read or written, under its lock
};

}  // namespace aotcache
