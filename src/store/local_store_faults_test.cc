// The local store over a fault-injecting file system: full disk, read-only and forbidden directories, failing fsync
// and rename, short and corrupt reads. A failed put is a clear IOError and leaves nothing behind; nothing corrupt
// is ever served; corrupt entries go to quarantine/.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "aotcache/store.h"
#include "base/sha256.h"
#include "env/fault_injecting_file_system.h"
#include "testing/sample_graphs.h"

namespace aotcache {
namespace {

Entry make_entry(int variant, size_t payload_bytes, uint8_t fill) {
  Graph g = testing::linear_relu_graph();
  KeyInputs in = testing::linear_relu_inputs(&g);
  in.inputs[0].tensor->sizes[0] = 1000 + variant;
  auto k = compute_key(in);
  Entry e;
  e.key_digest = k->digest;
  e.manifest = k->manifest;
  e.metadata = Value::dict({Value::string("fill"), Value::integer(fill)});
  std::mt19937 rng(static_cast<unsigned>(variant * 256 + fill));
  e.payload.resize(payload_bytes);
  for (char& c : e.payload) c = static_cast<char>(rng());
  return e;
}

class StoreFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aotcache_fault_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = LocalStore::open(dir_, StoreOptions{}, &fs_);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = std::move(*s);
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }

  size_t temp_files() { return default_file_system()->list_dir(dir_ + "/tmp")->size(); }

  std::string dir_;
  FaultInjectingFileSystem fs_{default_file_system()};
  std::unique_ptr<LocalStore> store_;
};

struct WriteFaultCase {
  Fault fault;
  const char* errno_text;
};

class StoreWriteFaultTest : public StoreFaultTest, public ::testing::WithParamInterface<WriteFaultCase> {};

TEST_P(StoreWriteFaultTest, FailedPutIsAClearErrorAndLeavesNothingBehind) {
  const Entry old_entry = make_entry(1, 50000, 1);
  const Entry fresh = make_entry(2, 50000, 1);
  const Entry overwrite = make_entry(1, 70000, 2);  // same key as old_entry, other payload
  ASSERT_TRUE(store_->put(old_entry).ok());
  const StoreSize before = store_->scan_size().value();

  fs_.set_fault(GetParam().fault);
  for (const Entry* e : {&fresh, &overwrite}) {
    Status s = store_->put(*e);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kIOError);
    EXPECT_NE(s.message().find(store_->entry_path(internal::to_hex(e->key_digest))), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(GetParam().errno_text), std::string::npos) << s.message();
  }
  EXPECT_GT(fs_.injected(), 0u);
  fs_.set_fault(Fault::kNone);

  // The failed new entry is a miss, the old entry is intact (not torn, not replaced), no temp file leaked.
  EXPECT_FALSE(store_->get(internal::to_hex(fresh.key_digest))->has_value());
  auto got = store_->get(internal::to_hex(old_entry.key_digest));
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, old_entry);
  EXPECT_EQ(temp_files(), 0u);
  const StoreSize after = store_->size().value();
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.entries, before.entries);
  // The store works again once the fault is gone.
  ASSERT_TRUE(store_->put(fresh).ok());
  auto again = store_->get(internal::to_hex(fresh.key_digest));
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ(**again, fresh);
}

INSTANTIATE_TEST_SUITE_P(Faults, StoreWriteFaultTest,
                         ::testing::Values(WriteFaultCase{Fault::kNoSpace, "No space left on device"},
                                           WriteFaultCase{Fault::kReadOnly, "Read-only file system"},
                                           WriteFaultCase{Fault::kAccessDenied, "Permission denied"},
                                           WriteFaultCase{Fault::kSyncFails, "Input/output error"},
                                           WriteFaultCase{Fault::kRenameFails, "Input/output error"}),
                         [](const auto& p) { return std::string(fault_name(p.param.fault)); });

class StoreReadFaultTest : public StoreFaultTest, public ::testing::WithParamInterface<Fault> {};

TEST_P(StoreReadFaultTest, ShortOrCorruptReadIsNeverServed) {
  const Entry e = make_entry(3, 20000, 1);
  const std::string key = internal::to_hex(e.key_digest);
  ASSERT_TRUE(store_->put(e).ok());
  fs_.set_fault(GetParam());
  auto got = store_->get(key);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorruption);
  fs_.set_fault(Fault::kNone);
  // What looked corrupt was moved aside: a miss now, one file in quarantine, counted.
  EXPECT_FALSE(store_->get(key)->has_value());
  EXPECT_EQ(store_->list_quarantine()->size(), 1u);
  EXPECT_EQ(store_->read_counters()->at("corrupt"), 1);
  EXPECT_EQ(store_->size()->entries, 0u);
}

INSTANTIATE_TEST_SUITE_P(Faults, StoreReadFaultTest, ::testing::Values(Fault::kShortRead, Fault::kCorruptRead),
                         [](const auto& p) { return std::string(fault_name(p.param)); });

TEST_F(StoreFaultTest, ReadOnlyDirectoryStillServesHits) {
  const Entry e = make_entry(4, 1000, 1);
  ASSERT_TRUE(store_->put(e).ok());
  fs_.set_fault(Fault::kReadOnly);
  auto reopened = LocalStore::open(dir_, StoreOptions{}, &fs_);  // an existing layout opens read-only
  ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
  auto got = (*reopened)->get(internal::to_hex(e.key_digest));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(**got, e);
  // A missing directory cannot be created there.
  EXPECT_EQ(LocalStore::open(dir_ + "/sub", StoreOptions{}, &fs_).status().code(), StatusCode::kIOError);
}

// Random faults on random operations: whatever happens, a get returns a miss, an error, or exactly the entry
// that some put wrote under that key; no temp file outlives the run.
TEST_F(StoreFaultTest, RandomFaultsNeverServeWrongOrCorruptData) {
  constexpr int k_iterations = 2000;
  const Fault faults[] = {Fault::kNone,      Fault::kNoSpace,     Fault::kReadOnly,  Fault::kAccessDenied,
                          Fault::kSyncFails, Fault::kRenameFails, Fault::kShortRead, Fault::kCorruptRead};
  std::mt19937 rng(11);
  int served = 0, failed_puts = 0, failed_gets = 0;
  for (int it = 0; it < k_iterations; ++it) {
    fs_.set_fault(faults[rng() % 8]);
    const int variant = static_cast<int>(rng() % 6);
    const uint8_t fill = static_cast<uint8_t>(rng() % 3);
    if (rng() % 2 == 0) {
      failed_puts += !store_->put(make_entry(variant, 2000 + 1000 * variant, fill)).ok();
      continue;
    }
    const Entry probe = make_entry(variant, 2000 + 1000 * variant, 0);
    auto got = store_->get(internal::to_hex(probe.key_digest));
    if (!got.ok()) {
      ++failed_gets;
      continue;
    }
    if (!got->has_value()) continue;
    const Entry& e = **got;
    const int64_t f = static_cast<int64_t>(metadata_number(e.metadata, "fill", -1));
    ASSERT_TRUE(f >= 0 && f < 3);
    ASSERT_EQ(e, make_entry(variant, 2000 + 1000 * variant, static_cast<uint8_t>(f))) << "iteration " << it;
    ++served;
  }
  fs_.set_fault(Fault::kNone);
  EXPECT_GT(served, 100);
  EXPECT_GT(failed_puts, 100);
  EXPECT_GT(failed_gets, 10);
  EXPECT_EQ(temp_files(), 0u);
  auto listed = store_->list();
  ASSERT_TRUE(listed.ok());
  for (const auto& info : *listed) EXPECT_TRUE(store_->check_entry(info.key_hex).ok()) << info.key_hex;
  // After all that, the ledger agrees with a scan once re-synced, and the quarantine stayed bounded.
  EXPECT_LE(store_->list_quarantine()->size(), k_quarantine_max_files);
}

TEST(FaultNames, RoundTrip) {
  for (const char* name : {"none", "enospc", "erofs", "eacces", "fsync", "rename", "short_read", "corrupt_read"}) {
    auto f = parse_fault(name);
    ASSERT_TRUE(f.ok());
    EXPECT_STREQ(fault_name(*f), name);
  }
  EXPECT_EQ(parse_fault("disk_on_fire").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace aotcache
