// A FileSystem wrapper that injects the faults real disks produce (after LevelDB's SpecialEnv): a full disk, a
// read-only or forbidden directory, failing fsync or rename, short and corrupt reads. Tests of the store run it
// over the POSIX file system, so the store's own error paths and cleanup are what gets exercised.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "aotcache/file_system.h"

namespace aotcache {

enum class Fault {
  kNone,
  kNoSpace,       // appends write half their bytes, then fail with ENOSPC (a disk filling up mid-write)
  kReadOnly,      // every change (create, rename, remove, mkdir of a missing dir, touch, lock) fails with EROFS
  kAccessDenied,  // the same set fails with EACCES (a directory owned by someone else)
  kSyncFails,     // fsync of files and directories fails with EIO
  kRenameFails,   // rename fails with EIO
  kShortRead,     // reads return the first half of the file
  kCorruptRead,   // reads return the file with one byte in the middle flipped
};

// "none", "enospc", "erofs", "eacces", "fsync", "rename", "short_read", "corrupt_read" (test hooks, CLI of tests).
Result<Fault> parse_fault(const std::string& name);
const char* fault_name(Fault fault);

class FaultInjectingFileSystem final : public FileSystem {
 public:
  // `base` must outlive this object. Thread-safe when `base` is.
  explicit FaultInjectingFileSystem(FileSystem* base) : base_(base) {}

  void set_fault(Fault fault) { fault_.store(fault); }
  Fault fault() const { return fault_.load(); }
  // How many operations failed or were altered by an injected fault.
  uint64_t injected() const { return injected_.load(); }
  // How many directories were listed: tests use it to prove that an operation does not scan the store.
  uint64_t list_dir_calls() const { return list_dir_calls_.load(); }

  Result<std::optional<std::string>> read_file(const std::string& path) override;
  Result<std::optional<std::string>> read_file_prefix(const std::string& path, size_t max_bytes) override;
  Result<std::unique_ptr<SequentialFile>> new_sequential_file(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> new_writable_file(const std::string& path) override;
  Status rename_file(const std::string& from, const std::string& to) override;
  Status sync_dir(const std::string& dir) override;
  Result<std::optional<DirEntry>> stat_file(const std::string& path) override { return base_->stat_file(path); }
  Status create_dirs(const std::string& path) override;
  Status remove_file(const std::string& path) override;
  Status remove_dir(const std::string& path) override;
  Result<std::vector<DirEntry>> list_dir(const std::string& path) override {
    ++list_dir_calls_;
    return base_->list_dir(path);
  }
  Status touch(const std::string& path) override;
  bool process_alive(int64_t pid) override { return base_->process_alive(pid); }
  int64_t now_unix() override { return base_->now_unix(); }
  int64_t now_unix_nanos() override { return base_->now_unix_nanos(); }
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) override;
  Result<std::unique_ptr<FileLock>> try_lock_file(const std::string& path) override;

  // The IOError a real call would return: "<what> <path>: <strerror(err)>". Counts as injected.
  Status injected_error(const std::string& what, const std::string& path, int err);

 private:
  // EROFS or EACCES while the fault forbids changes; 0 otherwise.
  int change_errno() const;
  std::optional<std::string> alter_read(std::optional<std::string> data);

  FileSystem* base_;
  std::atomic<Fault> fault_{Fault::kNone};
  std::atomic<uint64_t> injected_{0};
  std::atomic<uint64_t> list_dir_calls_{0};
};

}  // namespace aotcache
