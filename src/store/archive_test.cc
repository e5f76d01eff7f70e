// Archive format v1: golden bytes, round trip, and every truncation or flipped byte detected.
#include "aotcache/archive.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/sha256.h"
#include "env/fault_injecting_file_system.h"

namespace aotcache {
namespace {

class ArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aotcache_archive_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }

  std::string write(const std::vector<std::string>& records) {
    const std::string path = dir_ + "/a.aotcar";
    auto w = ArchiveWriter::create(default_file_system(), path);
    EXPECT_TRUE(w.ok());
    for (const auto& r : records) EXPECT_TRUE((*w)->add(r).ok());
    EXPECT_TRUE((*w)->commit().ok());
    return path;
  }
  std::string slurp(const std::string& path) { return default_file_system()->read_file(path)->value(); }
  void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

  // Reads all records; the Status of the first failure, if any.
  Status read_all(const std::string& path, std::vector<std::string>* out) {
    AOTCACHE_ASSIGN_OR_RETURN(auto r, ArchiveReader::open(default_file_system(), path));
    while (true) {
      AOTCACHE_ASSIGN_OR_RETURN(auto rec, r->next());
      if (!rec.has_value()) return Status();
      out->push_back(*rec);
    }
  }

  std::string dir_;
};

TEST_F(ArchiveTest, GoldenBytes) {
  // docs/formats/archive-format.md §4.
  EXPECT_EQ(internal::to_hex(slurp(write({}))),
            "414f5443415243480100000000000000ffffffffffffffff0000000000000000"
            "dd12c0c351ccbd1a3ae2998878bbc2ca0d6521244aa15815bf4349453e83a103");
  EXPECT_EQ(internal::to_hex(slurp(write({"abc"}))),
            "414f54434152434801000000000000000300000000000000616263ffffffffffffffff0100000000000000"
            "bf91eda5554ab87121d94753482141d3a63d47c3d99337c8791bf8076d70e679");
}

TEST_F(ArchiveTest, RoundTripAndNoTempFileLeft) {
  const std::vector<std::string> records = {"first", std::string(100000, 'x'), ""};
  const std::string path = write(records);
  std::vector<std::string> got;
  ASSERT_TRUE(read_all(path, &got).ok());
  EXPECT_EQ(got, records);
  auto files = default_file_system()->list_dir(dir_);
  ASSERT_EQ(files->size(), 1u);
}

TEST_F(ArchiveTest, EveryTruncationAndEveryFlippedByteIsDetected) {
  const std::string path = write({"one entry", "another"});
  const std::string good = slurp(path);
  for (size_t n = 0; n < good.size(); ++n) {
    spit(path, good.substr(0, n));
    std::vector<std::string> got;
    EXPECT_FALSE(read_all(path, &got).ok()) << "truncated to " << n;
  }
  for (size_t k = 0; k < good.size(); ++k) {
    std::string bad = good;
    bad[k] = static_cast<char>(bad[k] ^ 0x10);
    spit(path, bad);
    std::vector<std::string> got;
    EXPECT_FALSE(read_all(path, &got).ok()) << "flipped byte " << k;
  }
  spit(path, good + "x");
  std::vector<std::string> got;
  EXPECT_FALSE(read_all(path, &got).ok());
}

TEST_F(ArchiveTest, NewerVersionIsUnsupportedAndGarbageIsCorruption) {
  std::string bytes = slurp(write({}));
  bytes[8] = 2;
  spit(dir_ + "/v2", bytes);
  EXPECT_EQ(ArchiveReader::open(default_file_system(), dir_ + "/v2").status().code(), StatusCode::kUnsupported);
  spit(dir_ + "/junk", "not an archive at all");
  EXPECT_EQ(ArchiveReader::open(default_file_system(), dir_ + "/junk").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(ArchiveReader::open(default_file_system(), dir_ + "/none").status().code(), StatusCode::kNotFound);
}

TEST_F(ArchiveTest, FullDiskLeavesNoArchiveAndNoTempFile) {
  FaultInjectingFileSystem fs(default_file_system());
  {
    auto w = ArchiveWriter::create(&fs, dir_ + "/a.aotcar");
    ASSERT_TRUE(w.ok());
    fs.set_fault(Fault::kNoSpace);
    Status s = (*w)->add(std::string(5000, 'y'));
    EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.to_string();
  }
  EXPECT_TRUE(default_file_system()->list_dir(dir_)->empty());
}

}  // namespace
}  // namespace aotcache
