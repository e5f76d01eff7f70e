// All file access of the store goes through FileSystem, so tests can inject faults (full disk, read-only, failing
// fsync or rename, short or corrupt reads: src/env/fault_injecting_file_system.h) and other storage can stand in.
// The primitives are virtual; the atomic write protocol is built once on top of them (src/env/file_system.cc), so a
// fault injected into a primitive exercises the protocol's own cleanup. The default is POSIX.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aotcache/status.h"

namespace aotcache {

struct DirEntry {
  std::string name;
  bool is_dir = false;
  uint64_t size = 0;
  int64_t mtime_unix = 0;
  // Someone other than this process's user (and root) could have written it: another user owns it, or its group or
  // others may write it. Filled by stat_file; a store without signing keys refuses to load such an entry file.
  bool foreign_writable = false;
};

// An exclusive advisory lock; released when destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

// A new file being written front to back. Destroying it without close() closes it without syncing; the file
// stays (the caller removes it).
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends all of `data` (retrying short writes) or fails with IOError; on failure part of it may be written.
  virtual Status append(std::string_view data) = 0;
  virtual Status sync() = 0;
  virtual Status close() = 0;
};

// A file read front to back.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Appends up to `n` bytes to `out`; returns how many (0 only at the end of the file).
  virtual Result<size_t> read(size_t n, std::string* out) = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // nullopt when the file does not exist; IOError on any other failure.
  virtual Result<std::optional<std::string>> read_file(const std::string& path) = 0;
  // At most the first `max_bytes` of the file; nullopt when it does not exist.
  virtual Result<std::optional<std::string>> read_file_prefix(const std::string& path, size_t max_bytes) = 0;
  // Opens an existing file for reading; NotFound when it does not exist, IOError otherwise.
  virtual Result<std::unique_ptr<SequentialFile>> new_sequential_file(const std::string& path) = 0;
  // Creates a new file (IOError when it exists: O_EXCL), private (mode 0600) whatever the umask.
  virtual Result<std::unique_ptr<WritableFile>> new_writable_file(const std::string& path) = 0;
  // Atomically replaces `to` with `from` (same file system).
  virtual Status rename_file(const std::string& from, const std::string& to) = 0;
  // Makes the directory's entries (a rename into it) durable.
  virtual Status sync_dir(const std::string& dir) = 0;
  // Size and mtime of a file; nullopt when it does not exist.
  virtual Result<std::optional<DirEntry>> stat_file(const std::string& path) = 0;
  // Creates `path` and the folders above it that are missing, private (mode 0700) whatever the umask.
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
  // Wall-clock time in nanoseconds since the epoch: orders events within a second (quarantine names).
  virtual int64_t now_unix_nanos() = 0;
  // Blocks until the lock on `path` (created if missing) is held.
  virtual Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) = 0;
  // Takes the lock on `path` (created if missing) without waiting: nullptr when another holder has it (another
  // process, or another open of the same path in this one). The lock file is removed when the lock is released, so
  // lock files do not pile up; a taker that locked a file just removed by its releaser notices (the path no longer
  // names the locked file) and retries. The kernel releases the lock of a process that dies.
  virtual Result<std::unique_ptr<FileLock>> try_lock_file(const std::string& path) = 0;

  // Writes `data` to a new file `<tmp_dir>/tmp.<pid>.<n>.<r>`, syncs it (when `durable`) and closes it; returns its
  // path. On failure the temp file is removed and the IOError names the failing step, the path and errno's text.
  Result<std::string> write_temp_file(const std::string& data, const std::string& tmp_dir, bool durable = true);
  // write_temp_file, then renames it onto `path` and syncs `path`'s directory (best effort), so a reader sees the
  // old file or the whole new one, never a part. The temp file is removed on failure. With `durable` false no
  // fsync is done (for files that are rebuilt when lost, like the size ledger).
  Status write_file_atomic(const std::string& path, const std::string& data, const std::string& tmp_dir,
                           bool durable = true);
};

// The process-wide POSIX file system. Thread-safe.
FileSystem* default_file_system();

// "<pid>.<counter>.<random>": unique among concurrent writers on one machine.
std::string unique_file_suffix();

}  // namespace aotcache
