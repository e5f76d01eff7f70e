// A cache archive: many entries in one file, for `aotcache export` / `aotcache import`
// (docs/formats/archive-format.md). Entries are carried as their exact entry-format bytes; the reader frames them and
// the importer verifies each one with decode_entry before storing it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "aotcache/file_system.h"
#include "aotcache/status.h"

namespace aotcache {

constexpr std::string_view k_archive_magic = "AOTCARCH";
constexpr uint32_t k_archive_format_version = 1;
// An entry longer than this is refused before anything is allocated (entries hold at most a 4 GiB payload).
constexpr uint64_t k_archive_max_entry_bytes = 5ULL << 30;

// Writes an archive to a temp file beside `path`; commit() renames it into place. Destroyed without commit(), the
// temp file is removed and `path` is untouched. Not thread-safe.
class ArchiveWriter {
 public:
  // `fs` must outlive the writer. IOError when the temp file cannot be created.
  static Result<std::unique_ptr<ArchiveWriter>> create(FileSystem* fs, const std::string& path);
  ~ArchiveWriter();
  // REQUIRES: commit() not called. Appends one record (the bytes are not checked here).
  Status add(std::string_view entry_bytes);
  // Writes the end record and checksum, syncs, renames onto the path.
  Status commit();
  uint64_t count() const { return count_; }

 private:
  ArchiveWriter(FileSystem* fs, std::string path, std::string tmp, std::unique_ptr<WritableFile> file);
  Status write(std::string_view bytes);
  struct Hash;
  FileSystem* fs_;
  std::string path_, tmp_;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<Hash> hash_;
  uint64_t count_ = 0;
  bool committed_ = false;
};

// Reads an archive record by record. Not thread-safe.
class ArchiveReader {
 public:
  // NotFound when missing; Corruption when the header is not an archive's; Unsupported for a newer version.
  static Result<std::unique_ptr<ArchiveReader>> open(FileSystem* fs, const std::string& path);
  ~ArchiveReader();
  // The next record's bytes, or nullopt after the end record, whose count and checksum are verified then.
  // Corruption when the framing is damaged (a length beyond the file, a truncated record, a wrong count or
  // checksum): the records already returned were whole but nothing after the damage can be trusted.
  Result<std::optional<std::string>> next();
  uint64_t offset() const { return offset_; }
  uint64_t file_size() const { return file_size_; }

 private:
  ArchiveReader(std::unique_ptr<SequentialFile> file, uint64_t file_size);
  Status read_exact(size_t n, std::string* out);
  struct Hash;
  std::unique_ptr<SequentialFile> file_;
  std::unique_ptr<Hash> hash_;
  uint64_t file_size_;
  uint64_t offset_ = 0;
  uint64_t count_ = 0;
  bool done_ = false;
};

}  // namespace aotcache
