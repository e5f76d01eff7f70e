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

// True for a 64-digit lowercase hex string: the only key spelling the store accepts (no path tricks).
bool is_valid_key_hex(const std::string& key_hex);

class LocalStore {
 public:
  // Creates the layout under `dir` when missing. IOError when the directory cannot be created or written.
  // `fs` must outlive the store.
  static Result<std::unique_ptr<LocalStore>> open(const std::string& dir, FileSystem* fs = default_file_system());

  // nullopt on a miss. Corruption when the stored bytes fail their checks: the caller decides to remove it.
  Result<std::optional<Entry>> get(const std::string& key_hex);
  // Atomic: a concurrent reader sees no entry or the whole entry.
  Status put(const Entry& entry);
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

  std::string dir_;
  FileSystem* fs_;
};

}  // namespace aotcache
