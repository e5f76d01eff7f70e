// `aotcache verify [--fix]`: read and check every entry (checksum, format, manifest); --fix removes the bad ones.
#include <unistd.h>

#include <ostream>

#include "cli/commands.h"

namespace aotcache::cli {

int run_verify(const Invocation& inv) {
  const bool fix = inv.flag("--fix");
  auto entries = inv.store->list();
  if (!entries.ok()) {
    *inv.err << "aotcache: " << entries.status().to_string() << "\n";
    return k_exit_failure;
  }
  const bool progress = isatty(STDERR_FILENO) != 0 && entries->size() > 50;
  size_t bad = 0, removed = 0, done = 0;
  for (const auto& e : *entries) {
    auto got = inv.store->get(e.key_hex);
    if (!got.ok()) {
      ++bad;
      *inv.out << e.key_hex << "  " << got.status().to_string() << "\n";
      if (fix && inv.store->remove(e.key_hex).ok()) ++removed;
    }
    if (progress && (++done % 25 == 0 || done == entries->size())) {
      *inv.err << "\rverifying " << done << "/" << entries->size() << std::flush;
    }
  }
  if (progress) *inv.err << "\n";
  *inv.out << entries->size() << " entries checked, " << bad << " bad";
  if (fix) *inv.out << ", " << removed << " removed";
  *inv.out << "\n";
  return bad > removed ? k_exit_failure : k_exit_ok;
}

}  // namespace aotcache::cli
