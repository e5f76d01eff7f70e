// FileSystem over POSIX calls: the primitives of the atomic write protocol (open O_EXCL, write, fsync, rename),
// locks by flock.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "aotcache/file_system.h"

namespace aotcache {
namespace {

// Everything the store creates is private whatever the umask (a umask only removes bits): whoever can write a
// cache directory or an entry can plant code in the processes that load from it (python/aotcache/storage/trust.py
// refuses such a directory), and entries can hold what a model was trained on.
constexpr mode_t k_private_dir_mode = 0700;
constexpr mode_t k_private_file_mode = 0600;

Status errno_status(const std::string& what, const std::string& path) {
  return Status::io_error(what + " " + path + ": " + std::strerror(errno));
}

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override {
    flock(fd_, LOCK_UN);
    close(fd_);
  }

 private:
  int fd_;
};

// A try_lock_file lock: removes its file while still holding it, then unlocks.
class RemovingFileLock final : public FileLock {
 public:
  RemovingFileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~RemovingFileLock() override {
    ::unlink(path_.c_str());
    flock(fd_, LOCK_UN);
    close(fd_);
  }

 private:
  int fd_;
  std::string path_;
};

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status append(std::string_view data) override {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno_status("cannot write", path_);
      }
      done += static_cast<size_t>(n);
    }
    return Status();
  }
  Status sync() override { return ::fsync(fd_) == 0 ? Status() : errno_status("cannot fsync", path_); }
  Status close() override {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0 ? Status() : errno_status("cannot close", path_);
  }

 private:
  int fd_;
  std::string path_;
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixSequentialFile() override { ::close(fd_); }
  Result<size_t> read(size_t n, std::string* out) override {
    const size_t old = out->size();
    out->resize(old + n);
    while (true) {
      ssize_t got = ::read(fd_, out->data() + old, n);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        out->resize(old);
        return errno_status("cannot read", path_);
      }
      out->resize(old + static_cast<size_t>(got));
      return static_cast<size_t>(got);
    }
  }

 private:
  int fd_;
  std::string path_;
};

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::optional<std::string>> read_file(const std::string& path) override { return read_prefix(path, SIZE_MAX); }

  Result<std::optional<std::string>> read_file_prefix(const std::string& path, size_t max_bytes) override {
    return read_prefix(path, max_bytes);
  }

  Result<std::unique_ptr<SequentialFile>> new_sequential_file(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return Status::not_found("no such file: " + path);
      return errno_status("cannot open", path);
    }
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(fd, path));
  }

  Result<std::unique_ptr<WritableFile>> new_writable_file(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, k_private_file_mode);
    if (fd < 0) return errno_status("cannot create", path);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path));
  }

  Status rename_file(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return errno_status("cannot rename " + from + " onto", to);
    return Status();
  }

  Status sync_dir(const std::string& dir) override {
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return errno_status("cannot open directory", dir);
    Status s = ::fsync(dfd) == 0 ? Status() : errno_status("cannot fsync directory", dir);
    ::close(dfd);
    return s;
  }

  Result<std::optional<DirEntry>> stat_file(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return std::optional<DirEntry>();
      return errno_status("cannot stat", path);
    }
    DirEntry e{path.substr(path.find_last_of('/') + 1), S_ISDIR(st.st_mode), static_cast<uint64_t>(st.st_size),
               static_cast<int64_t>(st.st_mtime)};
    const uid_t me = geteuid();
    e.foreign_writable = (st.st_uid != me && st.st_uid != 0) || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    return std::optional<DirEntry>(std::move(e));
  }

  Status create_dirs(const std::string& path) override {
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      cur = path.substr(0, pos);
      if (cur.empty()) continue;
      if (mkdir(cur.c_str(), k_private_dir_mode) != 0 && errno != EEXIST)
        return errno_status("cannot create directory", cur);
    }
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status::io_error("not a directory: " + path);
    return Status();
  }

  Status remove_file(const std::string& path) override {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) return errno_status("cannot remove", path);
    return Status();
  }

  Status remove_dir(const std::string& path) override {
    if (rmdir(path.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST) {
      return errno_status("cannot remove directory", path);
    }
    return Status();
  }

  Result<std::vector<DirEntry>> list_dir(const std::string& path) override {
    std::vector<DirEntry> out;
    DIR* d = opendir(path.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) return out;
      return errno_status("cannot list", path);
    }
    while (dirent* de = readdir(d)) {
      std::string name = de->d_name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (stat((path + "/" + name).c_str(), &st) != 0) continue;  // removed meanwhile
      out.push_back({name, S_ISDIR(st.st_mode), static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtime)});
    }
    closedir(d);
    return out;
  }

  Status touch(const std::string& path) override {
    if (utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0 && errno != ENOENT)
      return errno_status("cannot touch", path);
    return Status();
  }

  bool process_alive(int64_t pid) override {
    if (pid <= 0 || pid > INT32_MAX) return false;
    return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
  }

  int64_t now_unix() override { return static_cast<int64_t>(time(nullptr)); }

  int64_t now_unix_nanos() override {
    struct timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }

  Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) override {
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, k_private_file_mode);
    if (fd < 0) return errno_status("cannot open lock", path);
    while (flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        Status s = errno_status("cannot lock", path);
        close(fd);
        return s;
      }
    }
    return std::unique_ptr<FileLock>(new PosixFileLock(fd));
  }

  Result<std::unique_ptr<FileLock>> try_lock_file(const std::string& path) override {
    // A releaser removes the file before unlocking: whoever locked the removed inode sees that `path` no longer
    // names it and starts over on a new file. Bounded: each round needs another holder to come and go.
    for (int attempt = 0; attempt < 1000; ++attempt) {
      int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, k_private_file_mode);
      if (fd < 0) return errno_status("cannot open lock", path);
      int rc;
      while ((rc = flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
      }
      if (rc != 0) {
        const int err = errno;
        close(fd);
        if (err == EWOULDBLOCK) return std::unique_ptr<FileLock>();
        errno = err;
        return errno_status("cannot lock", path);
      }
      struct stat held {
      }, named{};
      if (fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
          held.st_ino == named.st_ino) {
        return std::unique_ptr<FileLock>(new RemovingFileLock(fd, path));
      }
      flock(fd, LOCK_UN);
      close(fd);
    }
    return Status::io_error("cannot lock " + path + ": the lock file keeps being replaced");
  }

 private:
  static Result<std::optional<std::string>> read_prefix(const std::string& path, size_t max_bytes) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return std::optional<std::string>();
      return errno_status("cannot open", path);
    }
    std::string out;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(std::min(static_cast<size_t>(st.st_size), max_bytes));
    char buf[1 << 16];
    while (out.size() < max_bytes) {
      ssize_t n = ::read(fd, buf, std::min(sizeof buf, max_bytes - out.size()));
      if (n < 0) {
        if (errno == EINTR) continue;
        Status s = errno_status("cannot read", path);
        ::close(fd);
        return s;
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return std::optional<std::string>(std::move(out));
  }
};

}  // namespace

FileSystem* default_file_system() {
  static PosixFileSystem fs;
  return &fs;
}

}  // namespace aotcache
