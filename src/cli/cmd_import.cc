// `aotcache import FILE`: add the entries of an archive after verifying each one (checksum, manifest hashes to the
// key). Bad entries are skipped and counted; a damaged archive is read up to the damage. Exit 1 if anything was
// bad.
#include <ostream>

#include "aotcache/archive.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "cli/progress.h"

namespace aotcache::cli {

int run_import(const Invocation& inv) {
  const auto pos = inv.positional();
  if (std::string bad = inv.bad_option({}, {}); !bad.empty() || pos.size() != 1) {
    *inv.err << "aotcache import: " << (bad.empty() ? "expected one FILE" : bad) << "\n" << usage_line("import");
    return k_exit_usage;
  }
  auto reader = ArchiveReader::open(default_file_system(), pos[0]);
  if (!reader.ok()) {
    *inv.err << "aotcache: cannot import " << pos[0] << ": " << reader.status().to_string() << "\n";
    return k_exit_failure;
  }
  Progress progress(inv.err, "import");
  uint64_t imported = 0, bad = 0, record = 0;
  std::string damage;
  while (true) {
    auto next = (*reader)->next();
    progress.update((*reader)->offset(), (*reader)->file_size());
    if (!next.ok()) {
      damage = next.status().to_string();
      break;
    }
    if (!next->has_value()) break;
    ++record;
    auto key = inv.store->put_encoded(**next);
    if (key.ok()) {
      ++imported;
      continue;
    }
    progress.finish();
    *inv.err << "aotcache: skipping entry #" << record << " of " << pos[0] << ": " << key.status().to_string() << "\n";
    ++bad;
    if (key.status().code() == StatusCode::kIOError) {
      damage = "cannot write to the cache: " + key.status().message();
      break;
    }
  }
  progress.finish();
  if (!damage.empty()) {
    *inv.err << "aotcache: " << pos[0] << " is damaged after entry #" << record << ": " << damage
             << " (entries that passed their own checks were imported)\n";
  }
  *inv.out << "imported " << imported << " entries from " << pos[0] << ", " << bad << " bad (skipped)";
  if (!damage.empty()) *inv.out << ", archive damaged";
  *inv.out << "\n";
  return bad > 0 || !damage.empty() ? k_exit_failure : k_exit_ok;
}

}  // namespace aotcache::cli
