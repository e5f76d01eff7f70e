// Fault injection over a base FileSystem. Which calls fail under each fault: the Fault enum's comments.
#include "env/fault_injecting_file_system.h"

#include <cerrno>
#include <cstring>

namespace aotcache {
namespace {

constexpr std::pair<Fault, const char*> k_fault_names[] = {
    {Fault::kNone, "none"},
    {Fault::kNoSpace, "enospc"},
    {Fault::kReadOnly, "erofs"},
    {Fault::kAccessDenied, "eacces"},
    {Fault::kSyncFails, "fsync"},
    {Fault::kRenameFails, "rename"},
    {Fault::kShortRead, "short_read"},
    {Fault::kCorruptRead, "corrupt_read"},
};

class FaultInjectingWritableFile final : public WritableFile {
 public:
  FaultInjectingWritableFile(std::unique_ptr<WritableFile> base, FaultInjectingFileSystem* fs, std::string path)
      : base_(std::move(base)), fs_(fs), path_(std::move(path)) {}
  Status append(std::string_view data) override {
    if (fs_->fault() == Fault::kNoSpace) {
      // The disk fills up after part of the data: a partial temp file is left for the caller to remove.
      (void)base_->append(data.substr(0, data.size() / 2));
      return fs_->injected_error("cannot write", path_, ENOSPC);
    }
    return base_->append(data);
  }
  Status sync() override {
    if (fs_->fault() == Fault::kSyncFails) return fs_->injected_error("cannot fsync", path_, EIO);
    return base_->sync();
  }
  Status close() override { return base_->close(); }

 private:
  std::unique_ptr<WritableFile> base_;
  FaultInjectingFileSystem* fs_;
  std::string path_;
};

class FaultInjectingSequentialFile final : public SequentialFile {
 public:
  FaultInjectingSequentialFile(std::unique_ptr<SequentialFile> base, FaultInjectingFileSystem* fs)
      : base_(std::move(base)), fs_(fs) {}
  Result<size_t> read(size_t n, std::string* out) override {
    const size_t before = out->size();
    AOTCACHE_ASSIGN_OR_RETURN(size_t got, base_->read(n, out));
    if (got > 0 && fs_->fault() == Fault::kCorruptRead) {
      (*out)[before + got / 2] = static_cast<char>((*out)[before + got / 2] ^ 0x20);
      (void)fs_->injected_error("", "", 0);
    } else if (got > 1 && fs_->fault() == Fault::kShortRead && !cut_) {
      // The file ends early: half of this read, then end of file.
      out->resize(before + got / 2);
      cut_ = true;
      (void)fs_->injected_error("", "", 0);
      return got / 2;
    } else if (cut_) {
      out->resize(before);
      return size_t{0};
    }
    return got;
  }

 private:
  std::unique_ptr<SequentialFile> base_;
  FaultInjectingFileSystem* fs_;
  bool cut_ = false;
};

}  // namespace

Result<Fault> parse_fault(const std::string& name) {
  for (const auto& [fault, text] : k_fault_names) {
    if (name == text) return fault;
  }
  return Status::invalid_argument("unknown fault '" + name +
                                  "' (none, enospc, erofs, eacces, fsync, rename, short_read, corrupt_read)");
}

const char* fault_name(Fault fault) {
  for (const auto& [f, text] : k_fault_names) {
    if (f == fault) return text;
  }
  return "?";
}

Status FaultInjectingFileSystem::injected_error(const std::string& what, const std::string& path, int err) {
  ++injected_;
  if (err == 0) return Status();
  return Status::io_error(what + " " + path + ": " + std::strerror(err));
}

int FaultInjectingFileSystem::change_errno() const {
  switch (fault()) {
    case Fault::kReadOnly: return EROFS;
    case Fault::kAccessDenied: return EACCES;
    default: return 0;
  }
}

std::optional<std::string> FaultInjectingFileSystem::alter_read(std::optional<std::string> data) {
  if (!data.has_value() || data->empty()) return data;
  if (fault() == Fault::kShortRead) {
    data->resize(data->size() / 2);
    ++injected_;
  } else if (fault() == Fault::kCorruptRead) {
    (*data)[data->size() / 2] = static_cast<char>((*data)[data->size() / 2] ^ 0x20);
    ++injected_;
  }
  return data;
}

Result<std::optional<std::string>> FaultInjectingFileSystem::read_file(const std::string& path) {
  AOTCACHE_ASSIGN_OR_RETURN(auto data, base_->read_file(path));
  return alter_read(std::move(data));
}

Result<std::optional<std::string>> FaultInjectingFileSystem::read_file_prefix(const std::string& path,
                                                                              size_t max_bytes) {
  AOTCACHE_ASSIGN_OR_RETURN(auto data, base_->read_file_prefix(path, max_bytes));
  return alter_read(std::move(data));
}

Result<std::unique_ptr<SequentialFile>> FaultInjectingFileSystem::new_sequential_file(const std::string& path) {
  AOTCACHE_ASSIGN_OR_RETURN(auto file, base_->new_sequential_file(path));
  return std::unique_ptr<SequentialFile>(new FaultInjectingSequentialFile(std::move(file), this));
}

Result<std::unique_ptr<WritableFile>> FaultInjectingFileSystem::new_writable_file(const std::string& path) {
  if (int err = change_errno(); err != 0) return injected_error("cannot create", path, err);
  AOTCACHE_ASSIGN_OR_RETURN(auto file, base_->new_writable_file(path));
  return std::unique_ptr<WritableFile>(new FaultInjectingWritableFile(std::move(file), this, path));
}

Status FaultInjectingFileSystem::rename_file(const std::string& from, const std::string& to) {
  if (int err = change_errno(); err != 0) return injected_error("cannot rename " + from + " onto", to, err);
  if (fault() == Fault::kRenameFails) return injected_error("cannot rename " + from + " onto", to, EIO);
  return base_->rename_file(from, to);
}

Status FaultInjectingFileSystem::sync_dir(const std::string& dir) {
  if (fault() == Fault::kSyncFails) return injected_error("cannot fsync directory", dir, EIO);
  return base_->sync_dir(dir);
}

Status FaultInjectingFileSystem::create_dirs(const std::string& path) {
  if (int err = change_errno(); err != 0) {
    // Like mkdir on a read-only file system: an existing directory is fine, a missing one cannot be made.
    AOTCACHE_ASSIGN_OR_RETURN(auto st, base_->stat_file(path));
    if (st.has_value() && st->is_dir) return Status();
    return injected_error("cannot create directory", path, err);
  }
  return base_->create_dirs(path);
}

Status FaultInjectingFileSystem::remove_file(const std::string& path) {
  if (int err = change_errno(); err != 0) return injected_error("cannot remove", path, err);
  return base_->remove_file(path);
}

Status FaultInjectingFileSystem::remove_dir(const std::string& path) {
  if (int err = change_errno(); err != 0) return injected_error("cannot remove directory", path, err);
  return base_->remove_dir(path);
}

Status FaultInjectingFileSystem::touch(const std::string& path) {
  if (int err = change_errno(); err != 0) return injected_error("cannot touch", path, err);
  return base_->touch(path);
}

Result<std::unique_ptr<FileLock>> FaultInjectingFileSystem::lock_file(const std::string& path) {
  // Opening the lock file for writing fails on a read-only or forbidden directory.
  if (int err = change_errno(); err != 0) return injected_error("cannot open lock", path, err);
  return base_->lock_file(path);
}

Result<std::unique_ptr<FileLock>> FaultInjectingFileSystem::try_lock_file(const std::string& path) {
  if (int err = change_errno(); err != 0) return injected_error("cannot open lock", path, err);
  return base_->try_lock_file(path);
}

}  // namespace aotcache
