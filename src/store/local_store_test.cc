// Local store on a real temporary directory: put/get, miss, corruption, counters.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

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
