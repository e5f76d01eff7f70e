// The local store: entries under one directory (docs/store-layout.md), written atomically, verified on read,
// plus the directory's cumulative counters. Several processes may use one directory at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aotcache/entry.h"
#include "aotcache/file_system.h"
#include "aotcache/status.h"

namespace aotcache {

struct EntryInfo {
  std::string key_hex;
  uint64_t size = 0;
  int64_t mtime_unix = 0;
};

// Counter name -> value. Times are integers in microseconds (names end in _us).
using Counters = std::map<std::string, int64_t>;

// $AOTCACHE_DIR, else $XDG_CACHE_HOME/aotcache, else $HOME/.cache/aotcache.
std::string default_cache_dir();

// Default bound of a cache directory: 10 GiB.
constexpr uint64_t k_default_max_size = 10ULL << 30;

// "10G", "10GiB", "1.5 GB", "500M", "4096" (bytes) -> bytes; units are binary (K = 1024). InvalidArgument otherwise.
Result<uint64_t> parse_size(const std::string& text);
// "30s", "15m", "12h", "7d", "2w" -> seconds. InvalidArgument otherwise.
Result<int64_t> parse_age(const std::string& text);

// True for a 64-digit lowercase hex string: the only key spelling the store accepts (no path tricks).
bool is_valid_key_hex(const std::string& key_hex);

class LocalStore {
 public:
  // Creates the layout under `dir` when missing. IOError when the directory cannot be created or written.
  // `fs` must outlive the store.
  static Result<std::unique_ptr<LocalStore>> open(const std::string& dir, FileSystem* fs = default_file_system());

  // nullopt on a miss. Corruption when the stored bytes fail their checks: the caller decides to remove it.
  Result<std::optional<Entry>> get(const std::string& key_hex);
  // Atomic: a concurrent reader sees no entry or the whole entry. Then, with a size bound set, evicts the least
  // recently used entries until the directory is back under 90% of the bound (counted as `evictions`).
  Status put(const Entry& entry);
  // Entries are ranked for eviction by last use: a hit marks its entry used (mtime). 0 = unbounded.
  void set_max_size(uint64_t bytes) { max_size_ = bytes; }
  uint64_t max_size() const { return max_size_; }
  // Removes entries unused for `older_than_seconds` (when > 0), then least recently used entries until the total
  // is at most `target_bytes` (when > 0). Returns the number removed.
  Result<uint64_t> prune(uint64_t target_bytes, int64_t older_than_seconds);
  Status remove(const std::string& key_hex);
  Result<std::vector<EntryInfo>> list();
  // Removes every entry and the graph index; keeps the counters.
  Status clear();

  // Keys of stored entries whose `graph` component has this digest (64 hex), newest first: the entries a miss
  // can be explained against. Index records of removed entries are dropped on the way.
  Result<std::vector<std::string>> keys_for_graph(const std::string& graph_digest_hex);

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

  std::string dir_;
  FileSystem* fs_;
  uint64_t max_size_ = 0;
};

}  // namespace aotcache
