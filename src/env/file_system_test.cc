// The atomic write protocol on the real POSIX file system: real failures (no fault injection) leave no temp file.
#include "aotcache/file_system.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

namespace aotcache {
namespace {

class PosixFileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aotcache_fs_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(fs_->create_dirs(dir_ + "/tmp").ok());
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }
  FileSystem* fs_ = default_file_system();
  std::string dir_;
};

TEST_F(PosixFileSystemTest, FailedRenameRemovesTheTempFileAndNamesTheCause) {
  Status s = fs_->write_file_atomic(dir_ + "/missing/dir/file", "data", dir_ + "/tmp");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find(dir_ + "/missing/dir/file"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s.message();
  EXPECT_TRUE(fs_->list_dir(dir_ + "/tmp")->empty());
}

TEST_F(PosixFileSystemTest, NewWritableFileRefusesAnExistingFile) {
  ASSERT_TRUE(fs_->write_file_atomic(dir_ + "/f", "x", dir_ + "/tmp").ok());
  auto again = fs_->new_writable_file(dir_ + "/f");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("File exists"), std::string::npos);
}

TEST_F(PosixFileSystemTest, AtomicWriteReplacesAndStatsAndReadsPrefix) {
  ASSERT_TRUE(fs_->write_file_atomic(dir_ + "/f", "first", dir_ + "/tmp").ok());
  ASSERT_TRUE(fs_->write_file_atomic(dir_ + "/f", "second!", dir_ + "/tmp", /*durable=*/false).ok());
  EXPECT_EQ(fs_->read_file(dir_ + "/f")->value(), "second!");
  EXPECT_EQ(fs_->read_file_prefix(dir_ + "/f", 3)->value(), "sec");
  EXPECT_EQ(fs_->stat_file(dir_ + "/f")->value().size, 7u);
  EXPECT_FALSE(fs_->stat_file(dir_ + "/nope")->has_value());
  EXPECT_TRUE(fs_->list_dir(dir_ + "/tmp")->empty());
}

}  // namespace
}  // namespace aotcache
