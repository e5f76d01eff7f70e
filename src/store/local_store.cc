// Local store layout: <dir>/entries/<2 hex>/<64 hex>.aotc, <dir>/by-graph/<2 hex>/<graph digest>/<key> (empty index
// records), <dir>/tmp/ for atomic writes, <dir>/quarantine/ for corrupt entries, <dir>/stats (+ .lock),
// <dir>/ledger (+ .lock): the running size total. docs/formats/store-layout.md.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "aotcache/store.h"
#include "base/sha256.h"

namespace aotcache {
namespace {

constexpr const char* k_entry_suffix = ".aotc";
constexpr const char* k_stats_header = "aotcache-stats 1";
constexpr const char* k_ledger_header = "aotcache-ledger 1";
// A ledger older than this is re-synced by a scan: it drifts when a writer dies between rename and ledger update,
// or when files are removed by hand.
constexpr int64_t k_ledger_max_age_seconds = 24 * 3600;
// Metadata sits before the payload: this prefix holds it for any realistic manifest (ranking only).
constexpr size_t k_metadata_prefix_bytes = 64 * 1024;

// What a size bound evicts down to: 90% of it, rounded up, so that every positive bound has a positive target
// (a target of 0 bytes would read as "no target").
uint64_t eviction_target(uint64_t max_size) {
  return max_size - max_size / 10;
}

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string cachedir_tag() {
  return "Signature: 8a477f597d28d172789f06886806bc55\n"
         "# This file is a cache directory tag created by aotcache.\n"
         "# For information about cache directory tags see https://bford.info/cachedir/\n";
}

}  // namespace

std::string default_cache_dir(const std::string& aotcache_dir, const std::string& xdg_cache_home,
                              const std::string& home) {
  if (!aotcache_dir.empty()) return aotcache_dir;
  if (!xdg_cache_home.empty()) return xdg_cache_home + "/aotcache";
  return (home.empty() ? std::string("/tmp") : home) + "/.cache/aotcache";
}

Result<EvictionPolicy> parse_eviction_policy(const std::string& text) {
  if (text == "lru") return EvictionPolicy::kLru;
  if (text == "saved-per-byte") return EvictionPolicy::kSavedPerByte;
  return Status::invalid_argument("unknown eviction policy '" + text + "' (use lru or saved-per-byte)");
}

bool is_valid_key_hex(const std::string& key_hex) {
  if (key_hex.size() != 2 * internal::k_digest_size) return false;
  for (char c : key_hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<std::unique_ptr<LocalStore>> LocalStore::open(const std::string& dir, const StoreOptions& options,
                                                     FileSystem* fs) {
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
  store->max_size_ = options.max_size;
  store->policy_ = options.eviction;
  store->signing_keys_ = options.signing;
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

Result<std::optional<std::string>> LocalStore::read_entry_file(const std::string& key_hex) {
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
  const std::string path = entry_path(key_hex);
  if (!signing_keys_.enabled()) {
    // Unsigned, an entry is vouched for only by who could have written it (python/aotcache/storage/trust.py checks
    // the folders once per process; this checks each file, which a folder check cannot see: a file left writable
    // by a loose umask, or another user's file moved in). Nobody else can swap the file between this stat and the
    // read: that needs a writable folder, which the folder check refuses, or the file's ownership.
    AOTCACHE_ASSIGN_OR_RETURN(auto st, fs_->stat_file(path));
    if (st.has_value() && st->foreign_writable) {
      return Status::unauthenticated(
          "unsigned entry file " + path +
          " can be written by another user (its owner or mode): not loaded; make it yours and "
          "chmod go-w it, or sign entries (AOTCACHE_SIGNING_KEY)");
    }
  }
  return fs_->read_file(path);
}

Status LocalStore::mark_used(const std::string& key_hex) {
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
  (void)fs_->touch(entry_path(key_hex));  // absent (touch ignores ENOENT) or read-only: nothing to keep fresh
  return Status();
}

Result<bool> LocalStore::contains(const std::string& key_hex) {
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
  AOTCACHE_ASSIGN_OR_RETURN(auto st, fs_->stat_file(entry_path(key_hex)));
  return st.has_value();
}

Result<std::unique_ptr<FileLock>> LocalStore::try_compile_lock(const std::string& key_hex) {
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
  AOTCACHE_RETURN_IF_ERROR(fs_->create_dirs(dir_ + "/locks"));
  return fs_->try_lock_file(dir_ + "/locks/" + key_hex + ".lock");
}

namespace {

// Decodes and checks that the entry is stored under its own key.
Result<Entry> decode_stored(const std::string& bytes, const std::string& key_hex, const SigningKeys& keys) {
  AOTCACHE_ASSIGN_OR_RETURN(Entry e, decode_entry(bytes, &keys));
  if (internal::to_hex(e.key_digest) != key_hex) return Status::corruption("entry stored under another key's name");
  return e;
}

}  // namespace

Status LocalStore::check_entry(const std::string& key_hex) {
  AOTCACHE_ASSIGN_OR_RETURN(auto bytes, read_entry_file(key_hex));
  if (!bytes.has_value()) return Status::not_found("no entry " + key_hex);
  Result<Entry> e = decode_stored(*bytes, key_hex, signing_keys_);
  return e.ok() ? Status() : e.status();
}

Result<std::optional<Entry>> LocalStore::peek(const std::string& key_hex) {
  AOTCACHE_ASSIGN_OR_RETURN(auto bytes, read_entry_file(key_hex));
  if (!bytes.has_value()) return std::optional<Entry>();
  AOTCACHE_ASSIGN_OR_RETURN(Entry e, decode_stored(*bytes, key_hex, signing_keys_));
  return std::optional<Entry>(std::move(e));
}

Result<std::optional<Entry>> LocalStore::get(const std::string& key_hex) {
  AOTCACHE_ASSIGN_OR_RETURN(auto bytes, read_entry_file(key_hex));
  if (!bytes.has_value()) return std::optional<Entry>();
  Result<Entry> e = decode_stored(*bytes, key_hex, signing_keys_);
  if (!e.ok()) {
    // Never served again: moved aside for inspection. Best effort (a read-only directory cannot move it).
    // An untrusted entry (Unauthenticated) stays: nothing of it was decoded, and it may be the entry of another key
    // set sharing the directory (a rotation in progress), which would otherwise destroy each other's entries.
    if (e.status().code() == StatusCode::kCorruption) (void)quarantine(key_hex);
    return e.status();
  }
  // Mark it used for LRU eviction. Best effort: a read-only directory still serves hits.
  (void)fs_->touch(entry_path(key_hex));
  return std::optional<Entry>(std::move(e).value());
}

std::string LocalStore::graph_index_dir(const std::string& graph_digest_hex) const {
  return dir_ + "/by-graph/" + graph_digest_hex.substr(0, 2) + "/" + graph_digest_hex;
}

Status LocalStore::put(const Entry& entry) {
  const std::string key_hex = internal::to_hex(entry.key_digest);
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("entry without a valid key digest");
  AOTCACHE_ASSIGN_OR_RETURN(std::string bytes, encode_entry(entry, PayloadCompression::kZstd, &signing_keys_));
  return put_bytes(key_hex, bytes, entry.manifest);
}

Result<Entry> LocalStore::put_encoded_entry(std::string_view bytes, const std::string& key_hex) {
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a key: " + key_hex);
  const std::string owned(bytes);
  AOTCACHE_ASSIGN_OR_RETURN(Entry e, decode_stored(owned, key_hex, signing_keys_));
  AOTCACHE_RETURN_IF_ERROR(put_bytes(key_hex, owned, e.manifest));
  return e;
}

Result<std::string> LocalStore::put_encoded(std::string_view bytes) {
  AOTCACHE_ASSIGN_OR_RETURN(Entry e, decode_entry(bytes, &signing_keys_));
  const std::string key_hex = internal::to_hex(e.key_digest);
  AOTCACHE_RETURN_IF_ERROR(put_bytes(key_hex, std::string(bytes), e.manifest));
  return key_hex;
}

Status LocalStore::put_bytes(const std::string& key_hex, const std::string& bytes, const Manifest& manifest) {
  const std::string path = entry_path(key_hex);
  auto failed = [&](const Status& s) { return Status::io_error("cannot store entry " + path + ": " + s.message()); };
  if (Status s = fs_->create_dirs(dir_ + "/entries/" + key_hex.substr(0, 2)); !s.ok()) return failed(s);
  // The slow part (write + fsync) happens outside the lock; only the rename and the ledger update are inside it.
  Result<std::string> tmp = fs_->write_temp_file(bytes, dir_ + "/tmp");
  if (!tmp.ok()) return failed(tmp.status());
  bool over_bound = false;
  {
    auto lock = lock_ledger();
    if (!lock.ok()) {
      (void)fs_->remove_file(*tmp);
      return failed(lock.status());
    }
    // The ledger is read (or rebuilt by a scan) before the rename, so the new entry is counted exactly once.
    bool fresh = false;
    auto size = read_ledger_unlocked(&fresh);
    auto old = fs_->stat_file(path);
    if (Status s = old.ok() ? fs_->rename_file(*tmp, path) : old.status(); !s.ok()) {
      (void)fs_->remove_file(*tmp);
      return failed(s);
    }
    // The entry is in place: from here on a failure only makes the ledger stale (re-synced later), so it is ignored.
    if (size.ok()) {
      if (old->has_value()) {
        size->bytes -= std::min(size->bytes, (*old)->size);
      } else {
        ++size->entries;
      }
      size->bytes += bytes.size();
      (void)write_ledger_unlocked(*size);
      over_bound = max_size_ > 0 && size->bytes > max_size_;
    }
  }
  (void)fs_->sync_dir(path.substr(0, path.find_last_of('/')));  // best effort: the entry is complete under its name
  // The index record comes after the entry, so a record always names an entry that was complete once.
  if (const ManifestComponent* graph = manifest.find("graph"); graph != nullptr) {
    const std::string index = graph_index_dir(internal::to_hex(graph->digest));
    AOTCACHE_RETURN_IF_ERROR(fs_->create_dirs(index));
    AOTCACHE_RETURN_IF_ERROR(fs_->write_file_atomic(index + "/" + key_hex, "", dir_ + "/tmp", /*durable=*/false));
  }
  if (over_bound) {
    // Evict down to 90% so that the next puts do not each pay for a scan.
    AOTCACHE_ASSIGN_OR_RETURN(auto lock, lock_ledger());
    AOTCACHE_ASSIGN_OR_RETURN(auto evicted, prune_unlocked(std::nullopt, 0, {}));
    (void)evicted;
  }
  return Status();
}

Result<std::unique_ptr<FileLock>> LocalStore::lock_ledger() {
  return fs_->lock_file(dir_ + "/ledger.lock");
}

Result<StoreSize> LocalStore::read_ledger_unlocked(bool* fresh) {
  *fresh = false;
  AOTCACHE_ASSIGN_OR_RETURN(auto text, fs_->read_file(dir_ + "/ledger"));
  if (text.has_value()) {
    std::istringstream in(*text);
    std::string header;
    StoreSize size;
    int64_t synced = 0;
    if (std::getline(in, header) && header == k_ledger_header && (in >> size.bytes >> size.entries >> synced) &&
        fs_->now_unix() - synced <= k_ledger_max_age_seconds && synced <= fs_->now_unix() + 60) {
      // The sync time is carried along unchanged by updates: only a scan renews it.
      ledger_synced_unix_ = synced;
      *fresh = true;
      return size;
    }
  }
  return scan_size_unlocked();
}

Status LocalStore::write_ledger_unlocked(const StoreSize& size) {
  const std::string text = std::string(k_ledger_header) + "\n" + std::to_string(size.bytes) + " " +
                           std::to_string(size.entries) + " " + std::to_string(ledger_synced_unix_) + "\n";
  // Not fsynced: a ledger lost or torn by a crash reads as missing and is rebuilt by a scan.
  return fs_->write_file_atomic(dir_ + "/ledger", text, dir_ + "/tmp", /*durable=*/false);
}

Result<StoreSize> LocalStore::scan_size_unlocked() {
  AOTCACHE_ASSIGN_OR_RETURN(auto entries, list());
  StoreSize size;
  for (const EntryInfo& e : entries) size.bytes += e.size;
  size.entries = entries.size();
  ledger_synced_unix_ = fs_->now_unix();
  (void)write_ledger_unlocked(size);  // a read-only directory still answers
  return size;
}

Result<StoreSize> LocalStore::size() {
  AOTCACHE_ASSIGN_OR_RETURN(auto lock, lock_ledger());
  bool fresh = false;
  return read_ledger_unlocked(&fresh);
}

Result<StoreSize> LocalStore::scan_size() {
  AOTCACHE_ASSIGN_OR_RETURN(auto lock, lock_ledger());
  return scan_size_unlocked();
}

Result<uint64_t> LocalStore::prune(uint64_t target_bytes, int64_t older_than_seconds, const ProgressFn& progress) {
  AOTCACHE_ASSIGN_OR_RETURN(auto lock, lock_ledger());
  return prune_unlocked(target_bytes > 0 ? std::optional<uint64_t>(target_bytes) : std::nullopt, older_than_seconds,
                        progress);
}

Result<uint64_t> LocalStore::prune_unlocked(std::optional<uint64_t> target_bytes, int64_t older_than_seconds,
                                            const ProgressFn& progress) {
  AOTCACHE_ASSIGN_OR_RETURN(auto entries, list());
  StoreSize size;
  for (const EntryInfo& e : entries) size.bytes += e.size;
  size.entries = entries.size();
  if (!target_bytes && max_size_ > 0 && size.bytes > max_size_) target_bytes = eviction_target(max_size_);
  const int64_t now = fs_->now_unix();
  std::vector<std::pair<double, size_t>> order;  // (rank, index): lowest rank is evicted first
  order.reserve(entries.size());
  for (size_t k = 0; k < entries.size(); ++k) {
    const EntryInfo& e = entries[k];
    double rank = static_cast<double>(e.mtime_unix);
    if (policy_ == EvictionPolicy::kSavedPerByte && target_bytes && size.bytes > *target_bytes) {
      // Compile seconds saved per byte, discounted by days unused. Unreadable metadata ranks lowest.
      double seconds = 0;
      auto prefix = fs_->read_file_prefix(entry_path(e.key_hex), k_metadata_prefix_bytes);
      if (prefix.ok() && prefix->has_value()) {
        auto meta = peek_entry_metadata(**prefix);
        if (meta.ok()) seconds = metadata_number(*meta, "compile_seconds", 0.0);
      }
      const double days_unused = static_cast<double>(std::max<int64_t>(0, now - e.mtime_unix)) / 86400.0;
      rank = seconds / static_cast<double>(std::max<uint64_t>(1, e.size)) / (1.0 + days_unused);
    }
    order.emplace_back(rank, k);
  }
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : entries[a.second].key_hex < entries[b.second].key_hex;
  });
  uint64_t removed = 0, done = 0;
  for (const auto& [rank, k] : order) {
    const EntryInfo& e = entries[k];
    if (progress) progress(++done, order.size());
    const bool too_old = older_than_seconds > 0 && now - e.mtime_unix > older_than_seconds;
    const bool over = target_bytes && size.bytes > *target_bytes;
    if (!too_old && !over) continue;
    AOTCACHE_RETURN_IF_ERROR(remove_unlocked(e.key_hex, &size));
    ++removed;
  }
  ledger_synced_unix_ = now;
  (void)write_ledger_unlocked(size);
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
      // Rounded up: a positive size never becomes 0, which would mean "unbounded".
      const double bytes = std::ceil(number * factor);
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
    AOTCACHE_ASSIGN_OR_RETURN(auto exists, fs_->stat_file(entry_path(r.name)));  // no need to read it
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
  AOTCACHE_ASSIGN_OR_RETURN(auto lock, lock_ledger());
  bool fresh = false;
  auto size = read_ledger_unlocked(&fresh);
  StoreSize s = size.ok() ? *size : StoreSize{};
  AOTCACHE_RETURN_IF_ERROR(remove_unlocked(key_hex, &s));
  if (size.ok()) (void)write_ledger_unlocked(s);
  return Status();
}

Status LocalStore::remove_unlocked(const std::string& key_hex, StoreSize* size) {
  // Unlink by name: a reader that has the file open keeps reading the whole entry.
  AOTCACHE_ASSIGN_OR_RETURN(auto st, fs_->stat_file(entry_path(key_hex)));
  AOTCACHE_RETURN_IF_ERROR(fs_->remove_file(entry_path(key_hex)));
  if (st.has_value()) {
    size->bytes -= std::min(size->bytes, st->size);
    size->entries -= std::min<uint64_t>(size->entries, 1);
  }
  return Status();
}

Result<std::string> LocalStore::quarantine(const std::string& key_hex) {
  if (!is_valid_key_hex(key_hex)) return Status::invalid_argument("not a cache key: '" + key_hex + "'");
  AOTCACHE_ASSIGN_OR_RETURN(auto lock, lock_ledger());
  const std::string path = entry_path(key_hex);
  AOTCACHE_ASSIGN_OR_RETURN(auto st, fs_->stat_file(path));
  if (!st.has_value()) return Status::not_found("no entry " + key_hex);
  AOTCACHE_RETURN_IF_ERROR(fs_->create_dirs(dir_ + "/quarantine"));
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%019lld-", static_cast<long long>(fs_->now_unix_nanos()));
  const std::string target = dir_ + "/quarantine/" + stamp + key_hex + k_entry_suffix;
  AOTCACHE_RETURN_IF_ERROR(fs_->rename_file(path, target));
  bool fresh = false;
  if (auto size = read_ledger_unlocked(&fresh); size.ok() && fresh) {
    size->bytes -= std::min(size->bytes, st->size);
    size->entries -= std::min<uint64_t>(size->entries, 1);
    (void)write_ledger_unlocked(*size);
  }
  (void)bound_quarantine_unlocked();
  (void)add_counters({{"corrupt", 1}});
  return target;
}

Result<std::vector<DirEntry>> LocalStore::list_quarantine() {
  AOTCACHE_ASSIGN_OR_RETURN(auto files, fs_->list_dir(dir_ + "/quarantine"));
  std::vector<DirEntry> out;
  for (auto& f : files) {
    if (!f.is_dir && has_suffix(f.name, k_entry_suffix)) out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

Status LocalStore::bound_quarantine_unlocked() {
  AOTCACHE_ASSIGN_OR_RETURN(auto files, list_quarantine());
  uint64_t total = 0;
  for (const auto& f : files) total += f.size;
  size_t count = files.size();
  for (const auto& f : files) {  // oldest first: names start with the quarantine time
    if (count <= k_quarantine_max_files && total <= k_quarantine_max_bytes) break;
    AOTCACHE_RETURN_IF_ERROR(fs_->remove_file(dir_ + "/quarantine/" + f.name));
    --count;
    total -= f.size;
  }
  return Status();
}

Result<std::vector<EntryInfo>> LocalStore::list() {
  std::vector<EntryInfo> out;
  AOTCACHE_ASSIGN_OR_RETURN(auto shards, fs_->list_dir(dir_ + "/entries"));
  for (const DirEntry& shard : shards) {
    if (!shard.is_dir) continue;
    AOTCACHE_ASSIGN_OR_RETURN(auto files, fs_->list_dir(dir_ + "/entries/" + shard.name));
    for (const DirEntry& f : files) {
      if (f.is_dir || !has_suffix(f.name, k_entry_suffix)) continue;
      std::string key_hex = f.name.substr(0, f.name.size() - std::strlen(k_entry_suffix));
      if (!is_valid_key_hex(key_hex)) continue;
      out.push_back({std::move(key_hex), f.size, f.mtime_unix});
    }
  }
  return out;
}

Status LocalStore::clear(const ProgressFn& progress) {
  AOTCACHE_ASSIGN_OR_RETURN(auto lock, lock_ledger());
  AOTCACHE_ASSIGN_OR_RETURN(auto entries, list());
  StoreSize size;
  uint64_t done = 0;
  for (const EntryInfo& e : entries) {
    AOTCACHE_RETURN_IF_ERROR(fs_->remove_file(entry_path(e.key_hex)));
    if (progress) progress(++done, entries.size());
  }
  ledger_synced_unix_ = fs_->now_unix();
  (void)write_ledger_unlocked(size);
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
