// `aotcache rm KEY...` and `aotcache clear`: remove entries (counters stay).
#include <algorithm>
#include <ostream>

#include "cli/commands.h"
#include "cli/help.h"
#include "cli/progress.h"

namespace aotcache::cli {

int run_rm(const Invocation& inv) {
  const auto pos = inv.positional();
  if (pos.empty()) {
    *inv.err << usage_line("rm");
    return k_exit_usage;
  }
  int rc = k_exit_ok;
  for (const auto& arg : pos) {
    auto key = resolve_key(*inv.store, arg);
    Status s = key.ok() ? inv.store->remove(*key) : key.status();
    if (!s.ok()) {
      *inv.err << "aotcache: " << s.to_string() << "\n";
      rc = std::max(rc, exit_code(s));
      continue;
    }
    *inv.out << "removed " << *key << "\n";
  }
  return rc;
}

int run_clear(const Invocation& inv) {
  if (!inv.args.empty()) {
    *inv.err << "aotcache clear: takes no arguments\n" << usage_line("clear");
    return k_exit_usage;
  }
  auto entries = inv.store->list();
  Progress progress(inv.err, "clear");
  Status s = entries.ok() ? inv.store->clear([&](uint64_t done, uint64_t total) { progress.update(done, total); })
                          : entries.status();
  progress.finish();
  if (!s.ok()) {
    *inv.err << "aotcache: " << s.to_string() << "\n";
    return k_exit_failure;
  }
  *inv.out << "removed " << entries->size() << " entries from " << inv.store->dir() << "\n";
  return k_exit_ok;
}

}  // namespace aotcache::cli
