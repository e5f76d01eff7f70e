// `aotcache export FILE [KEY...]`: write all entries, or the named ones, to one archive file
// (docs/formats/archive-format.md). Entries that fail verification are skipped and reported; exit 1 then.
#include <ostream>

#include "aotcache/archive.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "cli/progress.h"

namespace aotcache::cli {

int run_export(const Invocation& inv) {
  const auto pos = inv.positional();
  if (std::string bad = inv.bad_option({}, {}); !bad.empty() || pos.empty()) {
    *inv.err << "aotcache export: " << (bad.empty() ? "missing FILE" : bad) << "\n" << usage_line("export");
    return k_exit_usage;
  }
  int rc = k_exit_ok;
  std::vector<std::string> keys;
  if (pos.size() == 1) {
    auto entries = inv.store->list();
    if (!entries.ok()) {
      *inv.err << "aotcache: " << entries.status().to_string() << "\n";
      return k_exit_failure;
    }
    for (const auto& e : *entries) keys.push_back(e.key_hex);
  } else {
    for (size_t k = 1; k < pos.size(); ++k) {
      auto key = resolve_key(*inv.store, pos[k]);
      if (!key.ok()) {
        *inv.err << "aotcache: " << key.status().to_string() << "\n";
        return exit_code(key.status());
      }
      keys.push_back(*key);
    }
  }
  auto writer = ArchiveWriter::create(default_file_system(), pos[0]);
  if (!writer.ok()) {
    *inv.err << "aotcache: cannot write " << pos[0] << ": " << writer.status().to_string() << "\n";
    return k_exit_failure;
  }
  Progress progress(inv.err, "export");
  uint64_t bytes = 0, skipped = 0, done = 0;
  for (const auto& key : keys) {
    progress.update(++done, keys.size());
    auto data = inv.store->read_entry_file(key);
    Status s = !data.ok()           ? data.status()
               : !data->has_value() ? Status::not_found("entry removed meanwhile")
                                    : Status();
    if (s.ok()) s = inv.store->check_entry(key);  // never export what would not be served
    if (!s.ok()) {
      progress.finish();
      *inv.err << "aotcache: skipping " << key << ": " << s.to_string() << "\n";
      ++skipped;
      rc = k_exit_failure;
      continue;
    }
    if (Status w = (*writer)->add(**data); !w.ok()) {
      progress.finish();
      *inv.err << "aotcache: cannot write " << pos[0] << ": " << w.to_string() << "\n";
      return k_exit_failure;  // the writer removes its temp file
    }
    bytes += (*data)->size();
  }
  if (Status s = (*writer)->commit(); !s.ok()) {
    progress.finish();
    *inv.err << "aotcache: cannot write " << pos[0] << ": " << s.to_string() << "\n";
    return k_exit_failure;
  }
  progress.finish();
  *inv.out << "exported " << (*writer)->count() << " entries (" << bytes << " bytes) to " << pos[0];
  if (skipped > 0) *inv.out << ", " << skipped << " skipped (failed verification)";
  *inv.out << "\n";
  return rc;
}

}  // namespace aotcache::cli
