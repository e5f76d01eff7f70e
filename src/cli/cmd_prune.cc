// `aotcache prune [--max-size SIZE] [--older-than AGE]`: remove unused entries, least recently used first.
#include <ostream>

#include "cli/commands.h"
#include "cli/help.h"
#include "cli/progress.h"

namespace aotcache::cli {

int run_prune(const Invocation& inv) {
  uint64_t max_size = 0;
  int64_t older_than = 0;
  for (size_t k = 0; k < inv.args.size(); ++k) {
    const std::string& a = inv.args[k];
    if ((a == "--max-size" || a == "--older-than") && k + 1 < inv.args.size()) {
      const std::string& v = inv.args[++k];
      Status s;
      if (a == "--max-size") {
        auto r = parse_size(v);
        s = r.ok() ? Status() : r.status();
        if (r.ok()) max_size = *r;
      } else {
        auto r = parse_age(v);
        s = r.ok() ? Status() : r.status();
        if (r.ok()) older_than = *r;
      }
      if (!s.ok()) {
        *inv.err << "aotcache: " << s.message() << "\n";
        return k_exit_usage;
      }
    } else {
      *inv.err << usage_line("prune");
      return k_exit_usage;
    }
  }
  if (max_size == 0 && older_than == 0) max_size = inv.store->max_size();  // the configured bound
  Progress progress(inv.err, "prune");
  auto removed =
      inv.store->prune(max_size, older_than, [&](uint64_t done, uint64_t total) { progress.update(done, total); });
  progress.finish();
  if (!removed.ok()) {
    *inv.err << "aotcache: " << removed.status().to_string() << "\n";
    return k_exit_failure;
  }
  *inv.out << "removed " << *removed << " entries\n";
  return k_exit_ok;
}

}  // namespace aotcache::cli
