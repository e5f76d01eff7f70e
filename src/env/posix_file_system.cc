// FileSystem over POSIX calls: atomic writes by temp file + fsync + rename, locks by flock.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <random>

#include "aotcache/file_system.h"

namespace aotcache {
namespace {

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

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::to_string(getpid()) + "." + std::to_string(counter++) + "." + std::to_string(rng() % 1000000007ULL);
}

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::optional<std::string>> read_file(const std::string& path) override {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return std::optional<std::string>();
      return errno_status("cannot open", path);
    }
    std::string out;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
    char buf[1 << 16];
    while (true) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        Status s = errno_status("cannot read", path);
        close(fd);
        return s;
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return std::optional<std::string>(std::move(out));
  }

  Status write_file_atomic(const std::string& path, const std::string& data, const std::string& tmp_dir) override {
    const std::string tmp = tmp_dir + "/tmp." + unique_suffix();
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return errno_status("cannot create", tmp);
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = write(fd, data.data() + done, data.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        Status s = errno_status("cannot write", tmp);
        close(fd);
        unlink(tmp.c_str());
        return s;
      }
      done += static_cast<size_t>(n);
    }
    if (fsync(fd) != 0) {
      Status s = errno_status("cannot fsync", tmp);
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    close(fd);
    if (rename(tmp.c_str(), path.c_str()) != 0) {
      Status s = errno_status("cannot rename onto", path);
      unlink(tmp.c_str());
      return s;
    }
    const std::string dir = path.substr(0, path.find_last_of('/'));
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      fsync(dfd);  // best effort: the entry is already complete under its name
      close(dfd);
    }
    return Status();
  }

  Status create_dirs(const std::string& path) override {
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      cur = path.substr(0, pos);
      if (cur.empty()) continue;
      if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return errno_status("cannot create directory", cur);
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

  Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) override {
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
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
};

}  // namespace

FileSystem* default_file_system() {
  static PosixFileSystem fs;
  return &fs;
}

}  // namespace aotcache
