// Local store on a real temporary directory: put/get, miss, corruption, counters.
#include <ftw.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <set>

#include "aotcache/archive.h"
#include "aotcache/store.h"
#include "base/sha256.h"
#include "testing/sample_graphs.h"

namespace aotcache {
namespace {

class LocalStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aotcache_store_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = LocalStore::open(dir_);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = std::move(*s);
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }

  Entry entry() {
    Graph g = testing::linear_relu_graph();
    auto k = compute_key(testing::linear_relu_inputs(&g));
    Entry e;
    e.key_digest = k->digest;
    e.manifest = k->manifest;
    e.metadata = Value::dict({});
    e.payload = "payload";
    return e;
  }

  std::string dir_;
  std::unique_ptr<LocalStore> store_;
};

TEST_F(LocalStoreTest, MissThenHit) {
  const Entry e = entry();
  const std::string key = internal::to_hex(e.key_digest);
  auto miss = store_->get(key);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  ASSERT_TRUE(store_->put(e).ok());
  auto hit = store_->get(key);
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ(**hit, e);
  auto listed = store_->list();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key_hex, key);
  // No temporary file is left behind.
  auto tmp = default_file_system()->list_dir(dir_ + "/tmp");
  ASSERT_TRUE(tmp.ok());
  EXPECT_TRUE(tmp->empty());
}

TEST_F(LocalStoreTest, BackfillReturnsTheDecodedEntryOfTheExpectedKeyOnly) {
  const Entry e = entry();
  const std::string key = internal::to_hex(e.key_digest);
  ASSERT_TRUE(store_->put(e).ok());
  auto bytes = store_->read_entry_file(key);
  ASSERT_TRUE(bytes.ok() && bytes->has_value());
  char other_tmpl[] = "/tmp/aotcache_store_test.XXXXXX";
  ASSERT_NE(mkdtemp(other_tmpl), nullptr);
  const std::string other_dir = other_tmpl;
  auto other = LocalStore::open(other_dir);
  ASSERT_TRUE(other.ok());
  // Another key's bytes are refused and nothing is written.
  const std::string wrong_key(64, 'a');
  auto refused = (*other)->put_encoded_entry(**bytes, wrong_key);
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  auto written = (*other)->contains(wrong_key);
  ASSERT_TRUE(written.ok());
  EXPECT_FALSE(*written);
  // The right key: stored, and the entry handed back equals what get() reads.
  auto stored = (*other)->put_encoded_entry(**bytes, key);
  ASSERT_TRUE(stored.ok()) << stored.status().to_string();
  EXPECT_EQ(*stored, e);
  auto read = (*other)->get(key);
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ(**read, *stored);
  ASSERT_EQ(std::system(("rm -rf " + other_dir).c_str()), 0);
}

TEST_F(LocalStoreTest, CorruptFileIsCorruptionNotCrash) {
  const Entry e = entry();
  const std::string key = internal::to_hex(e.key_digest);
  ASSERT_TRUE(store_->put(e).ok());
  {
    std::fstream f(store_->entry_path(key), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(70);
    f.put('X');
  }
  auto got = store_->get(key);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorruption);
  ASSERT_TRUE(store_->remove(key).ok());
  EXPECT_FALSE(store_->get(key)->has_value());
}

TEST_F(LocalStoreTest, RejectsKeysThatAreNotHex) {
  EXPECT_EQ(store_->get("../../etc/passwd").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->remove(std::string(64, 'G')).code(), StatusCode::kInvalidArgument);
}

TEST_F(LocalStoreTest, CountersAccumulate) {
  ASSERT_TRUE(store_->add_counters({{"hits", 2}, {"misses", 1}}).ok());
  ASSERT_TRUE(store_->add_counters({{"hits", 3}, {"bypass.python_function", 1}}).ok());
  auto c = store_->read_counters();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)["hits"], 5);
  EXPECT_EQ((*c)["misses"], 1);
  EXPECT_EQ((*c)["bypass.python_function"], 1);
  ASSERT_TRUE(store_->zero_counters().ok());
  EXPECT_TRUE(store_->read_counters()->empty());
}

TEST_F(LocalStoreTest, ClearRemovesEntriesKeepsCounters) {
  ASSERT_TRUE(store_->put(entry()).ok());
  ASSERT_TRUE(store_->add_counters({{"hits", 1}}).ok());
  ASSERT_TRUE(store_->clear().ok());
  EXPECT_TRUE(store_->list()->empty());
  auto counters = store_->read_counters();
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters.value().at("hits"), 1);
}

TEST(LocalStoreOpen, UnwritableDirectoryIsIOError) {
  auto s = LocalStore::open("/proc/aotcache-cannot-exist");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kIOError);
}

}  // namespace
}  // namespace aotcache

namespace aotcache {
namespace {

TEST_F(LocalStoreTest, GraphIndexFindsEntriesOfTheSameGraph) {
  Entry a = entry();
  Graph g = testing::linear_relu_graph();
  KeyInputs other = testing::linear_relu_inputs(&g);
  other.inputs[0].tensor->sizes[0] = 9;
  auto kb = compute_key(other);
  ASSERT_TRUE(kb.ok());
  Entry b = a;
  b.key_digest = kb->digest;
  b.manifest = kb->manifest;
  ASSERT_TRUE(store_->put(a).ok());
  ASSERT_TRUE(store_->put(b).ok());
  const std::string graph_hex = internal::to_hex(a.manifest.find("graph")->digest);
  auto keys = store_->keys_for_graph(graph_hex);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 2u);
  // A removed entry drops out of the index.
  ASSERT_TRUE(store_->remove(internal::to_hex(a.key_digest)).ok());
  keys = store_->keys_for_graph(graph_hex);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, std::vector<std::string>{internal::to_hex(b.key_digest)});
  // clear() empties the index too.
  ASSERT_TRUE(store_->clear().ok());
  EXPECT_TRUE(store_->keys_for_graph(graph_hex)->empty());
  EXPECT_TRUE(default_file_system()->list_dir(dir_ + "/by-graph")->empty());
}

}  // namespace
}  // namespace aotcache

#include <fcntl.h>
#include <sys/stat.h>

namespace aotcache {
namespace {

void set_mtime(const std::string& path, int64_t unix_seconds) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = static_cast<time_t>(unix_seconds);
  times[0].tv_nsec = times[1].tv_nsec = 0;
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

Entry entry_with_payload(int variant, size_t payload_bytes) {
  Graph g = testing::linear_relu_graph();
  KeyInputs in = testing::linear_relu_inputs(&g);
  in.inputs[0].tensor->sizes[0] = 100 + variant;
  auto k = compute_key(in);
  Entry e;
  e.key_digest = k->digest;
  e.manifest = k->manifest;
  e.metadata = Value::dict({});
  std::mt19937 rng(static_cast<unsigned>(variant));
  std::string payload(payload_bytes, '\0');
  for (char& c : payload) c = static_cast<char>(rng());
  e.payload = payload;  // random: incompressible, so the file size stays near payload_bytes
  return e;
}

TEST_F(LocalStoreTest, EvictsLeastRecentlyUsedBeyondTheBound) {
  std::vector<std::string> keys;
  for (int v = 0; v < 4; ++v) {
    Entry e = entry_with_payload(v, 100000);
    ASSERT_TRUE(store_->put(e).ok());
    keys.push_back(internal::to_hex(e.key_digest));
    set_mtime(store_->entry_path(keys.back()), 1000000 + v * 100);  // 0 is the oldest
  }
  // A hit makes entry 0 the most recently used.
  ASSERT_TRUE(store_->get(keys[0]).ok());
  store_->set_max_size(350000);
  ASSERT_TRUE(store_->put(entry_with_payload(9, 100000)).ok());  // 5 x ~100 KB > 350 KB: evict to <= 315 KB
  auto left = store_->list();
  ASSERT_TRUE(left.ok());
  std::set<std::string> present;
  for (const auto& e : *left) present.insert(e.key_hex);
  EXPECT_EQ(present.size(), 3u);
  EXPECT_TRUE(present.count(keys[0])) << "recently read entry must survive";
  EXPECT_FALSE(present.count(keys[1]));
  EXPECT_FALSE(present.count(keys[2]));
  EXPECT_TRUE(present.count(keys[3]));
  EXPECT_EQ(store_->read_counters()->at("evictions"), 2);
}

// A bound below 10 bytes made the eviction target (90% of it) round to 0, which meant "no target": nothing was
// ever evicted. Any positive bound is enforced: an entry larger than the bound does not stay.
TEST_F(LocalStoreTest, TinyBoundIsEnforced) {
  for (uint64_t bound : {1u, 5u, 9u, 10u, 15u}) {
    ASSERT_TRUE(store_->clear().ok());
    ASSERT_TRUE(store_->zero_counters().ok());
    store_->set_max_size(bound);
    ASSERT_TRUE(store_->put(entry_with_payload(1, 100)).ok());
    ASSERT_TRUE(store_->put(entry_with_payload(2, 100)).ok());
    EXPECT_TRUE(store_->list()->empty()) << "bound " << bound;
    EXPECT_EQ(store_->size()->bytes, 0u) << "bound " << bound;
    auto counters = store_->read_counters();
    ASSERT_TRUE(counters.ok());
    EXPECT_EQ((*counters)["evictions"], 2) << "bound " << bound;
  }
}

TEST_F(LocalStoreTest, PruneByAge) {
  Entry old_entry = entry_with_payload(1, 10), new_entry = entry_with_payload(2, 10);
  ASSERT_TRUE(store_->put(old_entry).ok());
  ASSERT_TRUE(store_->put(new_entry).ok());
  set_mtime(store_->entry_path(internal::to_hex(old_entry.key_digest)), 1000);
  auto removed = store_->prune(0, 3600);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1u);
  EXPECT_FALSE(store_->get(internal::to_hex(old_entry.key_digest))->has_value());
  EXPECT_TRUE(store_->get(internal::to_hex(new_entry.key_digest))->has_value());
}

TEST_F(LocalStoreTest, OpenRemovesTempFilesOfDeadWriters) {
  auto write = [&](const std::string& name) { std::ofstream(dir_ + "/tmp/" + name) << "partial"; };
  write("tmp.999999999.0.1");                         // no such process
  write("tmp." + std::to_string(getpid()) + ".0.2");  // this (live) process
  auto reopened = LocalStore::open(dir_);
  ASSERT_TRUE(reopened.ok());
  auto files = default_file_system()->list_dir(dir_ + "/tmp");
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ((*files)[0].name, "tmp." + std::to_string(getpid()) + ".0.2");
}

TEST(ParseSize, UnitsAndErrors) {
  EXPECT_EQ(parse_size("4096").value(), 4096u);
  EXPECT_EQ(parse_size("10G").value(), 10ULL << 30);
  EXPECT_EQ(parse_size("10GiB").value(), 10ULL << 30);
  EXPECT_EQ(parse_size("1.5 gb").value(), 3ULL << 29);
  EXPECT_EQ(parse_size("500M").value(), 500ULL << 20);
  EXPECT_EQ(parse_size("0").value(), 0u);
  EXPECT_EQ(parse_size("0.5").value(), 1u);  // a positive size never rounds to 0 ("unbounded")
  EXPECT_EQ(parse_size("0.1K").value(), 103u);
  EXPECT_FALSE(parse_size("ten").ok());
  EXPECT_FALSE(parse_size("10X").ok());
  EXPECT_FALSE(parse_size("-1G").ok());
  EXPECT_EQ(parse_age("7d").value(), 7 * 86400);
  EXPECT_EQ(parse_age("12h").value(), 12 * 3600);
  EXPECT_FALSE(parse_age("7 days").ok());
}

}  // namespace
}  // namespace aotcache

#include "env/fault_injecting_file_system.h"

namespace aotcache {
namespace {

void flip_byte(const std::string& path, long offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  const char c = static_cast<char>(f.get());
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 1));
}

TEST_F(LocalStoreTest, CorruptEntryIsQuarantinedCountedAndBounded) {
  std::vector<std::string> keys;
  for (int v = 0; v < static_cast<int>(k_quarantine_max_files) + 4; ++v) {
    Entry e = entry_with_payload(v, 100);
    ASSERT_TRUE(store_->put(e).ok());
    keys.push_back(internal::to_hex(e.key_digest));
  }
  flip_byte(store_->entry_path(keys[0]), 100);
  // check_entry reports without moving anything.
  EXPECT_EQ(store_->check_entry(keys[0]).code(), StatusCode::kCorruption);
  EXPECT_TRUE(store_->list_quarantine()->empty());
  // So does peek (aotcache show / explain).
  EXPECT_EQ(store_->peek(keys[0]).status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(store_->list_quarantine()->empty());
  // get quarantines: never served again, a miss from now on.
  EXPECT_EQ(store_->get(keys[0]).status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(store_->get(keys[0])->has_value());
  auto q = store_->list_quarantine();
  ASSERT_EQ(q->size(), 1u);
  EXPECT_NE((*q)[0].name.find(keys[0]), std::string::npos);
  EXPECT_EQ(store_->read_counters()->at("corrupt"), 1);
  // The quarantine keeps at most k_quarantine_max_files: the oldest go first.
  for (size_t k = 1; k < keys.size(); ++k) ASSERT_TRUE(store_->quarantine(keys[k]).ok());
  q = store_->list_quarantine();
  ASSERT_EQ(q->size(), k_quarantine_max_files);
  EXPECT_NE(q->back().name.find(keys.back()), std::string::npos);
  EXPECT_EQ(store_->size()->entries, 0u);
}

TEST_F(LocalStoreTest, LedgerKeepsTheTotalWithoutScanning) {
  FaultInjectingFileSystem counting(default_file_system());
  auto s = LocalStore::open(dir_, StoreOptions{}, &counting);
  ASSERT_TRUE(s.ok());
  LocalStore& store = **s;
  store.set_max_size(1ULL << 30);
  ASSERT_TRUE(store.put(entry_with_payload(0, 1000)).ok());  // builds the ledger: one scan
  const uint64_t lists_after_first = counting.list_dir_calls();
  for (int v = 1; v < 50; ++v) ASSERT_TRUE(store.put(entry_with_payload(v, 1000 + v)).ok());
  ASSERT_TRUE(store.put(entry_with_payload(7, 5000)).ok());  // overwrite: replaces, not adds
  ASSERT_TRUE(store.remove(internal::to_hex(entry_with_payload(3, 1).key_digest)).ok());
  EXPECT_EQ(counting.list_dir_calls(), lists_after_first) << "puts and removes must not scan the directory";
  const StoreSize ledger = store.size().value();
  const StoreSize scanned = store.scan_size().value();
  EXPECT_EQ(ledger.entries, 49u);
  EXPECT_EQ(ledger.entries, scanned.entries);
  EXPECT_EQ(ledger.bytes, scanned.bytes);
  // A lost ledger is rebuilt by a scan.
  ASSERT_EQ(std::remove((dir_ + "/ledger").c_str()), 0);
  EXPECT_EQ(store.size()->bytes, scanned.bytes);
}

TEST_F(LocalStoreTest, SavedPerByteEvictsCheapLargeEntriesFirst) {
  store_->set_eviction_policy(EvictionPolicy::kSavedPerByte);
  const double seconds[] = {100.0, 0.5, 50.0, 2.0};  // equal sizes: ranks by compile seconds saved
  std::vector<std::string> keys;
  for (int v = 0; v < 4; ++v) {
    Entry e = entry_with_payload(v, 100000);
    e.metadata = Value::dict({Value::string("compile_seconds"), Value::floating(seconds[v])});
    ASSERT_TRUE(store_->put(e).ok());
    keys.push_back(internal::to_hex(e.key_digest));
    set_mtime(store_->entry_path(keys.back()), 2000000000 - v * 10);  // 0 is the most recently used
  }
  auto removed = store_->prune(250000, 0);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 2u);
  std::set<std::string> left;
  auto listed = store_->list();
  ASSERT_TRUE(listed.ok());
  for (const auto& e : *listed) left.insert(e.key_hex);
  EXPECT_EQ(left, (std::set<std::string>{keys[0], keys[2]}));
  EXPECT_EQ(parse_eviction_policy("saved-per-byte").value(), EvictionPolicy::kSavedPerByte);
  EXPECT_FALSE(parse_eviction_policy("random").ok());
}

// Unsigned, an entry file that group or others may write is not loaded (UNAUTHENTICATED: left in place); the same
// file once private is served again.
TEST_F(LocalStoreTest, AnUnsignedEntryFileOthersCanWriteIsRefused) {
  const Entry e = entry();
  const std::string key = internal::to_hex(e.key_digest);
  ASSERT_TRUE(store_->put(e).ok());
  for (mode_t mode : {0666, 0664, 0646}) {
    ASSERT_EQ(::chmod(store_->entry_path(key).c_str(), mode), 0);
    auto got = store_->get(key);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated) << got.status().to_string();
    EXPECT_EQ(store_->check_entry(key).code(), StatusCode::kUnauthenticated);
  }
  ASSERT_EQ(::chmod(store_->entry_path(key).c_str(), 0644), 0);
  ASSERT_TRUE(store_->get(key).ok());
  EXPECT_TRUE(store_->get(key)->has_value());
}

// Eviction, removal and overwrite unlink or rename over the name: a reader that has opened the entry keeps
// reading the whole, valid file.
TEST_F(LocalStoreTest, AnEntryBeingReadIsNeverTornByEvictionOrOverwrite) {
  const Entry e = entry_with_payload(1, 300000);
  const std::string key = internal::to_hex(e.key_digest);
  ASSERT_TRUE(store_->put(e).ok());
  int fd = ::open(store_->entry_path(key).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string bytes(400000, '\0');
  ssize_t first = ::read(fd, bytes.data(), 1000);
  ASSERT_EQ(first, 1000);
  // Overwrite the key with other content, then evict everything.
  Entry other = e;
  other.payload = std::string(200000, 'x');
  ASSERT_TRUE(store_->put(other).ok());
  ASSERT_EQ(store_->prune(1, 0).value(), 1u);
  EXPECT_FALSE(store_->get(key)->has_value());
  size_t total = static_cast<size_t>(first);
  while (true) {
    ssize_t n = ::read(fd, bytes.data() + total, bytes.size() - total);
    ASSERT_GE(n, 0);
    if (n == 0) break;
    total += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(total);
  auto decoded = decode_entry(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, e);
}

TEST_F(LocalStoreTest, CompileLockIsExclusiveAndRemovesItsFile) {
  const std::string key(64, 'a');
  const std::string path = dir_ + "/locks/" + key + ".lock";
  auto first = store_->try_compile_lock(key);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_NE(*first, nullptr);
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  auto second = store_->try_compile_lock(key);  // another open of the same file: flock refuses it
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, nullptr);
  auto other_key = store_->try_compile_lock(std::string(64, 'b'));
  ASSERT_TRUE(other_key.ok());
  EXPECT_NE(*other_key, nullptr);
  first->reset();
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "a released lock leaves no file";
  auto third = store_->try_compile_lock(key);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(*third, nullptr);
  EXPECT_FALSE(store_->try_compile_lock("../x").ok());
}

TEST_F(LocalStoreTest, CompileLockOfADeadProcessIsFree) {
  const std::string key(64, 'c');
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = store_->try_compile_lock(key);
    const char c = (lock.ok() && *lock != nullptr) ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    pause();  // holds the lock until killed
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto busy = store_->try_compile_lock(key);
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(*busy, nullptr) << "held by the child";
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  auto freed = store_->try_compile_lock(key);  // the kernel dropped the dead holder's lock; its file stayed
  ASSERT_TRUE(freed.ok());
  EXPECT_NE(*freed, nullptr);
  close(ready[0]);
  close(ready[1]);
}

TEST_F(LocalStoreTest, CompileLockRacingReleasesHaveOneHolderAtATime) {
  // Processes take and release the lock of one key in a loop (the releaser removes the file while holding it);
  // a counter file proves that no two held it at once.
  const std::string key(64, 'd');
  const std::string witness = dir_ + "/witness";
  constexpr int k_procs = 4, k_rounds = 200;
  std::vector<pid_t> children;
  for (int p = 0; p < k_procs; ++p) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int overlaps = 0;
      for (int held = 0; held < k_rounds;) {
        auto lock = store_->try_compile_lock(key);
        if (!lock.ok()) _exit(2);
        if (*lock == nullptr) continue;
        // Inside the lock: the witness must be absent; create it, then remove it.
        if (access(witness.c_str(), F_OK) == 0) ++overlaps;
        std::ofstream(witness) << getpid();
        if (unlink(witness.c_str()) != 0) ++overlaps;
        ++held;
      }
      _exit(overlaps == 0 ? 0 : 1);
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
}

TEST_F(LocalStoreTest, ContainsIsAStat) {
  Entry e = entry();
  const std::string key = internal::to_hex(e.key_digest);
  auto before = store_->contains(key);
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(*before);
  ASSERT_TRUE(store_->put(e).ok());
  auto after = store_->contains(key);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(*after);
  EXPECT_FALSE(store_->contains("nope").ok());
}

TEST_F(LocalStoreTest, PeekDoesNotMarkTheEntryUsed) {
  Entry e = entry();
  ASSERT_TRUE(store_->put(e).ok());
  const std::string key = internal::to_hex(e.key_digest);
  set_mtime(store_->entry_path(key), 1000);
  auto peeked = store_->peek(key);
  ASSERT_TRUE(peeked.ok() && peeked->has_value());
  EXPECT_EQ((*peeked)->payload, "payload");
  struct stat st {};
  ASSERT_EQ(stat(store_->entry_path(key).c_str(), &st), 0);
  EXPECT_EQ(st.st_mtime, 1000) << "peek must not change what LRU eviction keeps";
  ASSERT_TRUE(store_->get(key).ok());
  ASSERT_EQ(stat(store_->entry_path(key).c_str(), &st), 0);
  EXPECT_GT(st.st_mtime, 1000) << "get marks it used";
  EXPECT_FALSE(store_->peek(std::string(64, 'f'))->has_value());
}

// Every folder and file the store makes (entries, shard folders, the graph index, statistics, the size ledger,
// compile locks, quarantine, temporary files, an exported archive) is private whatever the umask: under umask 002
// (a private group per user) and 000 a new cache is as private as under 022, so the trust check never has to
// refuse the cache's own work.
std::vector<std::string> not_private;
int collect_not_private(const char* path, const struct stat* st, int, struct FTW*) {
  if ((st->st_mode & 077) != 0) not_private.push_back(path);
  return 0;
}

TEST(LocalStorePrivacy, EverythingTheStoreMakesIsPrivateWhateverTheUmask) {
  for (mode_t mask : {0000, 0002, 0022}) {
    char tmpl[] = "/tmp/aotcache_umask_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string root = tmpl;
    const mode_t before = ::umask(mask);
    {
      auto opened = LocalStore::open(root + "/new/cache");  // folders above it made too
      ASSERT_TRUE(opened.ok()) << opened.status().to_string();
      auto& store = **opened;
      Graph g = testing::linear_relu_graph();
      auto k = compute_key(testing::linear_relu_inputs(&g));
      ASSERT_TRUE(k.ok());
      Entry e;
      e.key_digest = k->digest;
      e.manifest = k->manifest;
      e.metadata = Value::dict({});
      e.payload = "payload";
      const std::string key = internal::to_hex(e.key_digest);
      ASSERT_TRUE(store.put(e).ok());
      ASSERT_TRUE(store.add_counters({{"hits", 1}}).ok());
      auto lock = store.try_compile_lock(std::string(64, 'c'));
      ASSERT_TRUE(lock.ok() && *lock != nullptr);
      auto bytes = store.read_entry_file(key);
      ASSERT_TRUE(bytes.ok() && bytes->has_value());
      auto writer = ArchiveWriter::create(default_file_system(), root + "/new/export.aotca");
      ASSERT_TRUE(writer.ok());
      ASSERT_TRUE((*writer)->add(**bytes).ok());
      ASSERT_TRUE(store.quarantine(key).ok());
      ASSERT_TRUE(store.put(e).ok());
      not_private.clear();
      ASSERT_EQ(nftw((root + "/new").c_str(), collect_not_private, 16, FTW_PHYS), 0);  // the lock and temp file too
      ASSERT_TRUE((*writer)->commit().ok());
      ASSERT_EQ(nftw((root + "/new").c_str(), collect_not_private, 16, FTW_PHYS), 0);
    }
    ::umask(before);
    EXPECT_TRUE(not_private.empty()) << "umask " << std::oct << mask << std::dec << ": " << not_private.size()
                                     << " not private, first " << (not_private.empty() ? "" : not_private[0]);
    ASSERT_EQ(std::system(("rm -rf " + root).c_str()), 0);
  }
}

}  // namespace
}  // namespace aotcache
