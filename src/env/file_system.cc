// The atomic write protocol (docs/formats/store-layout.md §2), built on FileSystem's primitives so that every
// implementation, and every injected fault, goes through the same steps and the same cleanup.
#include "aotcache/file_system.h"

#include <unistd.h>

#include <atomic>
#include <random>

namespace aotcache {

std::string unique_file_suffix() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::to_string(getpid()) + "." + std::to_string(counter++) + "." + std::to_string(rng() % 1000000007ULL);
}

Result<std::string> FileSystem::write_temp_file(const std::string& data, const std::string& tmp_dir, bool durable) {
  const std::string tmp = tmp_dir + "/tmp." + unique_file_suffix();
  AOTCACHE_ASSIGN_OR_RETURN(auto file, new_writable_file(tmp));
  Status s = file->append(data);
  if (s.ok() && durable) s = file->sync();
  Status c = file->close();
  if (s.ok()) s = c;
  if (!s.ok()) {
    (void)remove_file(tmp);  // the first error is the one worth reporting
    return s;
  }
  return tmp;
}

Status FileSystem::write_file_atomic(const std::string& path, const std::string& data, const std::string& tmp_dir,
                                     bool durable) {
  AOTCACHE_ASSIGN_OR_RETURN(std::string tmp, write_temp_file(data, tmp_dir, durable));
  if (Status s = rename_file(tmp, path); !s.ok()) {
    (void)remove_file(tmp);
    return s;
  }
  if (durable) (void)sync_dir(path.substr(0, path.find_last_of('/')));  // the file is complete under its name
  return Status();
}

}  // namespace aotcache
