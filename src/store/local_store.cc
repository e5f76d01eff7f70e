// Local store layout: <dir>/entries/<2 hex>/<64 hex>.aotc, <dir>/by-graph/<2 hex>/<graph digest>/<key> (empty index
// records), <dir>/tmp/ for atomic writes, <dir>/stats (+ .lock). docs/store-layout.md.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "aotcache/store.h"
#include "base/sha256.h"

namespace aotcache {
namespace {

constexpr const char* k_entry_suffix = ".aotc";
constexpr const char* k_stats_header = "aotcache-stats 1";

std::string cachedir_tag() {
  return "Signature: 8a477f597d28d172789f06886806bc55\n"
         "# This file is a cache directory tag created by aotcache.\n"
         "# For information about cache directory tags see https://bford.info/cachedir/\n";
}

}  // namespace

std::string default_cache_dir() {
  if (const char* d = std::getenv("AOTCACHE_DIR"); d != nullptr && *d != '\0') return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') return std::string(x) + "/aotcache";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : "/tmp") + "/.cache/aotcache";
}

bool is_valid_key_hex(const std::string& key_hex) {
  if (key_hex.size() != 2 * internal::k_digest_size) return false;
  for (char c : key_hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<std::unique_ptr<LocalStore>> LocalStore::open(const std::string& dir, FileSystem* fs) {
  if (dir.empty()) return Status::invalid_argument("empty cache directory");
  std::string clean = dir;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  AOTCACHE_RETURN_IF_ERROR(fs->create_dirs(clean + "/entries"));
  AOTCACHE_RETURN_IF_ERROR(fs->create_dirs(clean + "/tmp"));
  AOTCACHE_ASSIGN_OR_RETURN(auto tag, fs->read_file(clean + "/CACHEDIR.TAG"));
  if (!tag.has_value()) {
    AOTCACHE_RETURN_IF_ERROR(fs->write_file_atomic(clean + "/CACHEDIR.TAG", cachedir_tag(), clean + "/tmp"));
  }
  std::unique_ptr<LocalStore> store(new LocalStore(clean, fs));
  AOTCACHE_RETURN_IF_ERROR(store->remove_stale_temp_files());
  return store;
}

Status LocalStore::remove_stale_temp_files() {
  // Temp files are named tmp.<pid>.<n>.<r>: one whose writer is gone (killed mid-write) is garbage. A day-old one
  // is too, whoever wrote it (a pid may have been reused, or the directory is shared by several machines).
  constexpr int64_t k_abandoned_after_seconds = 24 * 3600;
  AOTCACHE_ASSIGN_OR_RETURN(auto files, fs_->list_dir(dir_ + "/tmp"));
  const int64_t now = fs_->now_unix();
  for (const DirEntry& f : files) {
    if (f.is_dir || f.name.rfind("tmp.", 0) != 0) continue;
    const int64_t pid = std::strtoll(f.name.c_str() + 4, nullptr, 10);
    if (!fs_->process_alive(pid) || now - f.mtime_unix > k_abandoned_after_seconds) {
      AOTCACHE_RETURN_IF_ERROR(fs_->remove_file(dir_ + "/tmp/" + f.name));
    }
  }
  return Status();
}

std::string LocalStore::entry_path(const std::string& key_hex) const {
  return dir_ + "/entries/" + key_hex.substr(0, 2) + "/" + key_hex + k_entry_suffix;
}

Result<std::optional<Entry>> LocalStore::get(const std::string& key_hex) {
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
  AOTCACHE_ASSIGN_OR_RETURN(auto bytes, fs_->read_file(entry_path(key_hex)));
  if (!bytes.has_value()) return std::optional<Entry>();
  AOTCACHE_ASSIGN_OR_RETURN(Entry e, decode_entry(*bytes));
  if (internal::to_hex(e.key_digest) != key_hex) return Status::corruption("entry stored under another key's name");
  // Mark it used for LRU eviction. Best effort: a read-only directory still serves hits.
  (void)fs_->touch(entry_path(key_hex));
  return std::optional<Entry>(std::move(e));
}

std::string LocalStore::graph_index_dir(const std::string& graph_digest_hex) const {
  return dir_ + "/by-graph/" + graph_digest_hex.substr(0, 2) + "/" + graph_digest_hex;
}

Status LocalStore::put(const Entry& entry) {
  const std::string key_hex = internal::to_hex(entry.key_digest);
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("entry without a valid key digest");
  AOTCACHE_RETURN_IF_ERROR(fs_->create_dirs(dir_ + "/entries/" + key_hex.substr(0, 2)));
  AOTCACHE_ASSIGN_OR_RETURN(std::string bytes, encode_entry(entry));
  AOTCACHE_RETURN_IF_ERROR(fs_->write_file_atomic(entry_path(key_hex), bytes, dir_ + "/tmp"));
  // The index record comes after the entry, so a record always names an entry that was complete once.
  if (const ManifestComponent* graph = entry.manifest.find("graph"); graph != nullptr) {
    const std::string index = graph_index_dir(internal::to_hex(graph->digest));
    AOTCACHE_RETURN_IF_ERROR(fs_->create_dirs(index));
    AOTCACHE_RETURN_IF_ERROR(fs_->write_file_atomic(index + "/" + key_hex, "", dir_ + "/tmp"));
  }
  if (max_size_ > 0) {
    // Evict down to 90% so that the next puts do not each pay for a scan.
    AOTCACHE_ASSIGN_OR_RETURN(auto evicted, prune(0, 0));
    (void)evicted;
  }
  return Status();
}

Result<uint64_t> LocalStore::prune(uint64_t target_bytes, int64_t older_than_seconds) {
  AOTCACHE_ASSIGN_OR_RETURN(auto entries, list());
  uint64_t total = 0;
  for (const EntryInfo& e : entries) total += e.size;
  if (target_bytes == 0 && max_size_ > 0 && total > max_size_) target_bytes = max_size_ / 10 * 9;
  // Least recently used first.
  std::sort(entries.begin(), entries.end(), [](const EntryInfo& a, const EntryInfo& b) {
    return a.mtime_unix != b.mtime_unix ? a.mtime_unix < b.mtime_unix : a.key_hex < b.key_hex;
  });
  const int64_t now = fs_->now_unix();
  uint64_t removed = 0;
  for (const EntryInfo& e : entries) {
    const bool too_old = older_than_seconds > 0 && now - e.mtime_unix > older_than_seconds;
    const bool over = target_bytes > 0 && total > target_bytes;
    if (!too_old && !over) continue;
    AOTCACHE_RETURN_IF_ERROR(remove(e.key_hex));
    total -= e.size;
    ++removed;
  }
  if (removed > 0) AOTCACHE_RETURN_IF_ERROR(add_counters({{"evictions", static_cast<int64_t>(removed)}}));
  return removed;
}

Result<uint64_t> parse_size(const std::string& text) {
  size_t pos = 0;
  double number = 0;
  try {
    number = std::stod(text, &pos);
  } catch (...) {
    return Status::invalid_argument("not a size: '" + text + "'");
  }
  std::string unit = text.substr(pos);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<const char*, double> k_units[] = {{"", 1},
                                                           {"B", 1},
                                                           {"K", 1024.0},
                                                           {"KB", 1024.0},
                                                           {"KIB", 1024.0},
                                                           {"M", 1048576.0},
                                                           {"MB", 1048576.0},
                                                           {"MIB", 1048576.0},
                                                           {"G", 1073741824.0},
                                                           {"GB", 1073741824.0},
                                                           {"GIB", 1073741824.0},
                                                           {"T", 1099511627776.0},
                                                           {"TB", 1099511627776.0},
                                                           {"TIB", 1099511627776.0}};
  for (const auto& [name, factor] : k_units) {
    if (unit == name) {
      const double bytes = number * factor;
      if (!(bytes >= 0) || bytes > 1.8e19) return Status::invalid_argument("size out of range: '" + text + "'");
      return static_cast<uint64_t>(bytes);
    }
  }
  return Status::invalid_argument("unknown size unit in '" + text + "' (use K, M, G or T)");
}

Result<int64_t> parse_age(const std::string& text) {
  size_t pos = 0;
  long long number = 0;
  try {
    number = std::stoll(text, &pos);
  } catch (...) {
    return Status::invalid_argument("not an age: '" + text + "'");
  }
  const std::string unit = text.substr(pos);
  static const std::pair<const char*, int64_t> k_units[] = {
      {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}, {"w", 604800}};
  for (const auto& [name, factor] : k_units) {
    if (unit == name && number >= 0) return static_cast<int64_t>(number) * factor;
  }
  return Status::invalid_argument("not an age: '" + text + "' (use 30s, 15m, 12h, 7d or 2w)");
}

Result<std::vector<std::string>> LocalStore::keys_for_graph(const std::string& graph_digest_hex) {
  if (!is_valid_key_hex(graph_digest_hex)) return Status::invalid_argument("not a graph digest: " + graph_digest_hex);
  const std::string index = graph_index_dir(graph_digest_hex);
  AOTCACHE_ASSIGN_OR_RETURN(auto records, fs_->list_dir(index));
  std::sort(records.begin(), records.end(), [](const DirEntry& a, const DirEntry& b) {
    return a.mtime_unix != b.mtime_unix ? a.mtime_unix > b.mtime_unix : a.name < b.name;
  });
  std::vector<std::string> keys;
  for (const DirEntry& r : records) {
    if (!is_valid_key_hex(r.name)) continue;
    AOTCACHE_ASSIGN_OR_RETURN(auto exists, fs_->read_file(entry_path(r.name)));
    if (exists.has_value()) {
      keys.push_back(r.name);
    } else {
      AOTCACHE_RETURN_IF_ERROR(fs_->remove_file(index + "/" + r.name));  // its entry was removed
    }
  }
  return keys;
}

Status LocalStore::remove(const std::string& key_hex) {
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
  return fs_->remove_file(entry_path(key_hex));
}

Result<std::vector<EntryInfo>> LocalStore::list() {
  std::vector<EntryInfo> out;
  AOTCACHE_ASSIGN_OR_RETURN(auto shards, fs_->list_dir(dir_ + "/entries"));
  for (const DirEntry& shard : shards) {
    if (!shard.is_dir) continue;
    AOTCACHE_ASSIGN_OR_RETURN(auto files, fs_->list_dir(dir_ + "/entries/" + shard.name));
    for (const DirEntry& f : files) {
      const std::string suffix = k_entry_suffix;
      if (f.is_dir || f.name.size() <= suffix.size() || f.name.substr(f.name.size() - suffix.size()) != suffix)
        continue;
      std::string key_hex = f.name.substr(0, f.name.size() - suffix.size());
      if (!is_valid_key_hex(key_hex)) continue;
      out.push_back({std::move(key_hex), f.size, f.mtime_unix});
    }
  }
  return out;
}

Status LocalStore::clear() {
  AOTCACHE_ASSIGN_OR_RETURN(auto entries, list());
  for (const EntryInfo& e : entries) AOTCACHE_RETURN_IF_ERROR(remove(e.key_hex));
  const std::string by_graph = dir_ + "/by-graph";
  AOTCACHE_ASSIGN_OR_RETURN(auto shards, fs_->list_dir(by_graph));
  for (const DirEntry& shard : shards) {
    AOTCACHE_ASSIGN_OR_RETURN(auto graphs, fs_->list_dir(by_graph + "/" + shard.name));
    for (const DirEntry& g : graphs) {
      const std::string gdir = by_graph + "/" + shard.name + "/" + g.name;
      AOTCACHE_ASSIGN_OR_RETURN(auto records, fs_->list_dir(gdir));
      for (const DirEntry& r : records) AOTCACHE_RETURN_IF_ERROR(fs_->remove_file(gdir + "/" + r.name));
      AOTCACHE_RETURN_IF_ERROR(fs_->remove_dir(gdir));
    }
    AOTCACHE_RETURN_IF_ERROR(fs_->remove_dir(by_graph + "/" + shard.name));
  }
  return Status();
}

Result<Counters> LocalStore::read_counters_unlocked() {
  Counters out;
  AOTCACHE_ASSIGN_OR_RETURN(auto text, fs_->read_file(dir_ + "/stats"));
  if (!text.has_value()) return out;
  std::istringstream in(*text);
  std::string line;
  if (!std::getline(in, line) || line != k_stats_header) return out;  // unknown or damaged: start over
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    int64_t value = 0;
    if (fields >> name >> value) out[name] = value;
  }
  return out;
}

Result<Counters> LocalStore::read_counters() {
  AOTCACHE_ASSIGN_OR_RETURN(auto lock, fs_->lock_file(dir_ + "/stats.lock"));
  return read_counters_unlocked();
}

Status LocalStore::add_counters(const Counters& delta) {
  AOTCACHE_ASSIGN_OR_RETURN(auto lock, fs_->lock_file(dir_ + "/stats.lock"));
  AOTCACHE_ASSIGN_OR_RETURN(Counters c, read_counters_unlocked());
  for (const auto& [name, value] : delta) c[name] += value;
  std::string text = std::string(k_stats_header) + "\n";
  for (const auto& [name, value] : c) text += name + " " + std::to_string(value) + "\n";
  return fs_->write_file_atomic(dir_ + "/stats", text, dir_ + "/tmp");
}

Status LocalStore::zero_counters() {
  AOTCACHE_ASSIGN_OR_RETURN(auto lock, fs_->lock_file(dir_ + "/stats.lock"));
  return fs_->write_file_atomic(dir_ + "/stats", std::string(k_stats_header) + "\n", dir_ + "/tmp");
}

}  // namespace aotcache
