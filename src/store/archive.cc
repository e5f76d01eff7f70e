// Archive format v1 (docs/formats/archive-format.md): header, length-prefixed entry records, end record,
// SHA-256 trailer.
#include "aotcache/archive.h"

#include "base/bytes.h"
#include "base/sha256.h"

namespace aotcache {
namespace {

constexpr uint64_t k_end_marker = ~0ULL;  // a record length no entry can have
constexpr size_t k_header_size = 8 + 4 + 4;

std::string le64(uint64_t v) {
  internal::ByteWriter w;
  w.u64(v);
  return w.take();
}

uint64_t read_le64(std::string_view b) {
  uint64_t v = 0;
  for (int k = 7; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(b[static_cast<size_t>(k)]);
  return v;
}

}  // namespace

struct ArchiveWriter::Hash {
  internal::Sha256 sha;
};
struct ArchiveReader::Hash {
  internal::Sha256 sha;
};

ArchiveWriter::ArchiveWriter(FileSystem* fs, std::string path, std::string tmp, std::unique_ptr<WritableFile> file)
    : fs_(fs), path_(std::move(path)), tmp_(std::move(tmp)), file_(std::move(file)), hash_(new Hash) {}

ArchiveWriter::~ArchiveWriter() {
  if (!committed_) {
    file_.reset();
    (void)fs_->remove_file(tmp_);
  }
}

Result<std::unique_ptr<ArchiveWriter>> ArchiveWriter::create(FileSystem* fs, const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string tmp = dir + "/." + path.substr(slash + 1) + ".tmp." + unique_file_suffix();
  AOTCACHE_ASSIGN_OR_RETURN(auto file, fs->new_writable_file(tmp));
  std::unique_ptr<ArchiveWriter> w(new ArchiveWriter(fs, path, tmp, std::move(file)));
  internal::ByteWriter header;
  header.raw(k_archive_magic);
  header.u32(k_archive_format_version);
  header.u32(0);  // flags, reserved
  AOTCACHE_RETURN_IF_ERROR(w->write(header.bytes()));
  return w;
}

Status ArchiveWriter::write(std::string_view bytes) {
  hash_->sha.update(bytes);
  return file_->append(bytes);
}

Status ArchiveWriter::add(std::string_view entry_bytes) {
  AOTCACHE_RETURN_IF_ERROR(write(le64(entry_bytes.size())));
  AOTCACHE_RETURN_IF_ERROR(write(entry_bytes));
  ++count_;
  return Status();
}

Status ArchiveWriter::commit() {
  AOTCACHE_RETURN_IF_ERROR(write(le64(k_end_marker)));
  AOTCACHE_RETURN_IF_ERROR(write(le64(count_)));
  AOTCACHE_RETURN_IF_ERROR(file_->append(hash_->sha.finish()));
  AOTCACHE_RETURN_IF_ERROR(file_->sync());
  AOTCACHE_RETURN_IF_ERROR(file_->close());
  AOTCACHE_RETURN_IF_ERROR(fs_->rename_file(tmp_, path_));
  committed_ = true;
  return Status();
}

ArchiveReader::ArchiveReader(std::unique_ptr<SequentialFile> file, uint64_t file_size)
    : file_(std::move(file)), hash_(new Hash), file_size_(file_size) {}
ArchiveReader::~ArchiveReader() = default;

Status ArchiveReader::read_exact(size_t n, std::string* out) {
  out->clear();
  out->reserve(n);
  while (out->size() < n) {
    AOTCACHE_ASSIGN_OR_RETURN(size_t got, file_->read(n - out->size(), out));
    if (got == 0) {
      return Status::corruption("archive truncated at byte " + std::to_string(offset_ + out->size()) + " of " +
                                std::to_string(file_size_));
    }
  }
  offset_ += n;
  return Status();
}

Result<std::unique_ptr<ArchiveReader>> ArchiveReader::open(FileSystem* fs, const std::string& path) {
  AOTCACHE_ASSIGN_OR_RETURN(auto st, fs->stat_file(path));
  if (!st.has_value()) return Status::not_found("no such archive: " + path);
  AOTCACHE_ASSIGN_OR_RETURN(auto file, fs->new_sequential_file(path));
  std::unique_ptr<ArchiveReader> r(new ArchiveReader(std::move(file), st->size));
  std::string header;
  if (Status s = r->read_exact(k_header_size, &header); !s.ok() || header.substr(0, 8) != k_archive_magic) {
    return Status::corruption(path + " is not an aotcache archive");
  }
  internal::ByteReader br(std::string_view(header).substr(8));
  uint32_t version = 0, flags = 0;
  AOTCACHE_RETURN_IF_ERROR(br.u32(&version));
  AOTCACHE_RETURN_IF_ERROR(br.u32(&flags));
  if (version == 0) return Status::corruption("archive format version 0");
  if (version > k_archive_format_version || flags != 0) {
    return Status::unsupported("archive format v" + std::to_string(version) + " (flags " + std::to_string(flags) +
                               ") is not supported by this aotcache (v" + std::to_string(k_archive_format_version) +
                               ")");
  }
  r->hash_->sha.update(header);
  return r;
}

Result<std::optional<std::string>> ArchiveReader::next() {
  if (done_) return std::optional<std::string>();
  std::string len_bytes;
  AOTCACHE_RETURN_IF_ERROR(read_exact(8, &len_bytes));
  hash_->sha.update(len_bytes);
  const uint64_t len = read_le64(len_bytes);
  if (len == k_end_marker) {
    std::string count_bytes, checksum;
    AOTCACHE_RETURN_IF_ERROR(read_exact(8, &count_bytes));
    hash_->sha.update(count_bytes);
    AOTCACHE_RETURN_IF_ERROR(read_exact(internal::k_digest_size, &checksum));
    done_ = true;
    if (hash_->sha.finish() != checksum) return Status::corruption("archive checksum mismatch");
    if (read_le64(count_bytes) != count_) {
      return Status::corruption("archive end record counts " + std::to_string(read_le64(count_bytes)) + " entries, " +
                                std::to_string(count_) + " were read");
    }
    if (offset_ != file_size_) return Status::corruption("bytes after the archive's checksum");
    return std::optional<std::string>();
  }
  if (len > k_archive_max_entry_bytes || len > file_size_ - offset_) {
    return Status::corruption("archive record at byte " + std::to_string(offset_ - 8) + " claims " +
                              std::to_string(len) + " bytes, beyond the file");
  }
  std::string bytes;
  AOTCACHE_RETURN_IF_ERROR(read_exact(static_cast<size_t>(len), &bytes));
  hash_->sha.update(bytes);
  ++count_;
  return std::optional<std::string>(std::move(bytes));
}

}  // namespace aotcache
