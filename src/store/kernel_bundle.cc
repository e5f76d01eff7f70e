// Kernel bundle v1. Layout and rules: docs/formats/kernel-bundle-format.md.
#include "aotcache/kernel_bundle.h"

#include <cstdint>
#include <set>

#include "base/bytes.h"

namespace aotcache {
namespace {

using internal::ByteReader;
using internal::ByteWriter;

constexpr size_t k_max_path_components = 8;

bool path_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

// Each file record needs at least its two length prefixes.
constexpr size_t k_min_record = 4 + 4;

}  // namespace

Status check_kernel_path(std::string_view path) {
  if (path.empty()) return Status::invalid_argument("empty kernel path");
  if (path.size() > k_kernel_path_max) return Status::invalid_argument("kernel path longer than 512 bytes");
  size_t components = 0;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    const std::string_view part = path.substr(start, end - start);
    if (part.empty()) return Status::invalid_argument("kernel path '" + std::string(path) + "' has an empty component");
    if (part.front() == '.') {
      return Status::invalid_argument("kernel path '" + std::string(path) + "' has a component starting with '.'");
    }
    for (char c : part) {
      if (!path_char_ok(c)) {
        return Status::invalid_argument("kernel path '" + std::string(path) +
                                        "' has a character outside [A-Za-z0-9._-]");
      }
    }
    if (++components > k_max_path_components) {
      return Status::invalid_argument("kernel path '" + std::string(path) + "' has more than 8 components");
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return Status();
}

Result<std::string> encode_kernel_bundle(const KernelBundle& bundle) {
  if (bundle.fingerprint.empty()) return Status::invalid_argument("kernel bundle without a fingerprint");
  if (bundle.files.size() > k_kernel_bundle_max_files)
    return Status::invalid_argument("kernel bundle of too many files");
  std::set<std::string_view> seen;
  ByteWriter w;
  w.u32(k_kernel_bundle_format_version);
  w.str(bundle.fingerprint);
  w.u32(static_cast<uint32_t>(bundle.files.size()));
  for (const KernelFile& f : bundle.files) {
    AOTCACHE_RETURN_IF_ERROR(check_kernel_path(f.path));
    if (!seen.insert(f.path).second) return Status::invalid_argument("kernel path '" + f.path + "' appears twice");
    if (f.bytes.size() > UINT32_MAX) return Status::invalid_argument("kernel file '" + f.path + "' over 4 GiB");
    w.str(f.path);
    w.str(f.bytes);
  }
  return w.take();
}

Result<KernelBundle> decode_kernel_bundle(std::string_view bytes) {
  ByteReader r(bytes);
  uint32_t version = 0;
  AOTCACHE_RETURN_IF_ERROR(r.u32(&version));
  if (version == 0) return Status::corruption("kernel bundle format version 0");
  if (version > k_kernel_bundle_format_version) {
    return Status::unsupported("kernel bundle format v" + std::to_string(version) + " is newer than this aotcache");
  }
  KernelBundle b;
  std::string_view fingerprint;
  AOTCACHE_RETURN_IF_ERROR(r.str(&fingerprint));
  if (fingerprint.empty()) return Status::corruption("kernel bundle without a fingerprint");
  b.fingerprint = std::string(fingerprint);
  uint32_t count = 0;
  AOTCACHE_RETURN_IF_ERROR(r.u32(&count));
  if (count > k_kernel_bundle_max_files || count > r.remaining() / k_min_record) {
    return Status::corruption("kernel bundle claims more files than fit");
  }
  std::set<std::string_view> seen;
  for (uint32_t k = 0; k < count; ++k) {
    std::string_view path, data;
    AOTCACHE_RETURN_IF_ERROR(r.str(&path));
    AOTCACHE_RETURN_IF_ERROR(r.str(&data));
    if (Status s = check_kernel_path(path); !s.ok()) return Status::corruption(s.message());
    if (!seen.insert(path).second) return Status::corruption("kernel path '" + std::string(path) + "' appears twice");
    b.files.push_back({std::string(path), std::string(data)});
  }
  if (!r.done()) return Status::corruption("trailing bytes after the kernel bundle");
  return b;
}

Result<KernelInstallReport> install_kernel_bundle(FileSystem* fs, const KernelBundle& bundle, const std::string& dir) {
  if (dir.empty()) return Status::invalid_argument("empty kernel directory");
  KernelInstallReport report;
  for (const KernelFile& f : bundle.files) {
    AOTCACHE_RETURN_IF_ERROR(check_kernel_path(f.path));  // bundles built in memory are checked too
    const std::string target = dir + "/" + f.path;
    AOTCACHE_ASSIGN_OR_RETURN(auto existing, fs->stat_file(target));
    if (existing.has_value()) {
      ++report.present;
      continue;
    }
    const size_t slash = target.find_last_of('/');
    const std::string parent = target.substr(0, slash);
    AOTCACHE_RETURN_IF_ERROR(fs->create_dirs(parent));
    AOTCACHE_ASSIGN_OR_RETURN(std::string tmp, fs->write_temp_file(f.bytes, parent));
    // No overwrite: another process may have built or installed it meanwhile; theirs is as good as ours.
    AOTCACHE_ASSIGN_OR_RETURN(auto raced, fs->stat_file(target));
    if (raced.has_value()) {
      (void)fs->remove_file(tmp);
      ++report.present;
      continue;
    }
    if (Status s = fs->rename_file(tmp, target); !s.ok()) {
      (void)fs->remove_file(tmp);
      return s;
    }
    ++report.installed;
  }
  return report;
}

}  // namespace aotcache
