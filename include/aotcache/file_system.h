// All file access of the store goes through FileSystem, so tests can inject faults (full disk, read-only, torn
// writes) and other storage can stand in. The default is POSIX.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aotcache/status.h"

namespace aotcache {

struct DirEntry {
  std::string name;
  bool is_dir = false;
  uint64_t size = 0;
  int64_t mtime_unix = 0;
};

// An exclusive advisory lock; released when destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // nullopt when the file does not exist; IOError on any other failure.
  virtual Result<std::optional<std::string>> read_file(const std::string& path) = 0;
  // Writes `data` to a new file in `tmp_dir`, fsyncs it, renames it onto `path` and fsyncs the directory, so a
  // reader sees the old file or the whole new one, never a part. The temp file is removed on failure.
  virtual Status write_file_atomic(const std::string& path, const std::string& data, const std::string& tmp_dir) = 0;
  virtual Status create_dirs(const std::string& path) = 0;
  // A missing file is not an error.
  virtual Status remove_file(const std::string& path) = 0;
  // Removes an empty directory. A missing or non-empty directory is not an error (it stays).
  virtual Status remove_dir(const std::string& path) = 0;
  // An empty list when the directory does not exist.
  virtual Result<std::vector<DirEntry>> list_dir(const std::string& path) = 0;
  // Sets the file's modification time to now (marks an entry used). A missing file is not an error.
  virtual Status touch(const std::string& path) = 0;
  // Whether a process with this id runs on this machine: temp files of dead writers are garbage.
  virtual bool process_alive(int64_t pid) = 0;
  virtual int64_t now_unix() = 0;
  // Blocks until the lock on `path` (created if missing) is held.
  virtual Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) = 0;
};

// The process-wide POSIX file system. Thread-safe.
FileSystem* default_file_system();

}  // namespace aotcache
