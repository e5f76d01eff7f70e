// `aotcache verify [--fix]`: read and check every entry (checksum, format, manifest, key, signature when keys are
// set); --fix moves the bad ones to quarantine/. Untrusted entries (not signed by an accepted key) are reported apart
// and never moved: they may be another key set's. Re-syncs the size ledger from the scan.
#include <ostream>

#include "cli/commands.h"
#include "cli/help.h"
#include "cli/progress.h"

namespace aotcache::cli {

int run_verify(const Invocation& inv) {
  if (std::string bad = inv.bad_option({"--fix"}, {}); !bad.empty() || !inv.positional().empty()) {
    *inv.err << "aotcache verify: " << (bad.empty() ? "unexpected argument" : bad) << "\n" << usage_line("verify");
    return k_exit_usage;
  }
  const bool fix = inv.flag("--fix");
  auto entries = inv.store->list();
  if (!entries.ok()) {
    *inv.err << "aotcache: " << entries.status().to_string() << "\n";
    return k_exit_failure;
  }
  Progress progress(inv.err, "verify");
  size_t bad = 0, quarantined = 0, newer = 0, untrusted = 0, done = 0;
  for (const auto& e : *entries) {
    Status s = inv.store->check_entry(e.key_hex);
    progress.update(++done, entries->size());
    if (s.ok() || s.code() == StatusCode::kNotFound) continue;  // removed meanwhile
    if (s.code() == StatusCode::kUnsupported) {
      ++newer;  // written by a newer aotcache: not ours to judge
      continue;
    }
    if (s.code() == StatusCode::kUnauthenticated) {
      ++untrusted;  // not signed by a key we accept: maybe another key set's (a rotation), not ours to remove
      progress.finish();
      *inv.out << e.key_hex << "  untrusted: " << s.message() << "  (left in place)\n";
      continue;
    }
    ++bad;
    std::string line = e.key_hex + "  " + s.to_string();
    if (fix) {
      auto moved = inv.store->quarantine(e.key_hex);
      if (moved.ok()) {
        ++quarantined;
        line += "  -> " + *moved;
      } else {
        line += "  (cannot quarantine: " + moved.status().to_string() + ")";
      }
    }
    progress.finish();
    *inv.out << line << "\n";
  }
  progress.finish();
  (void)inv.store->scan_size();  // verify is a full scan anyway: the ledger starts over exact
  *inv.out << entries->size() << " entries checked, " << bad << " bad";
  if (fix) *inv.out << ", " << quarantined << " quarantined";
  if (newer > 0) *inv.out << ", " << newer << " of a newer format (left alone)";
  if (untrusted > 0) *inv.out << ", " << untrusted << " untrusted (not signed by an accepted key; left in place)";
  *inv.out << "\n";
  if (fix) {
    auto q = inv.store->list_quarantine();
    if (q.ok() && !q->empty()) {
      *inv.out << "quarantine: " << q->size() << " files in " << inv.store->dir() << "/quarantine\n";
    }
  }
  return bad > quarantined ? k_exit_failure : k_exit_ok;
}

}  // namespace aotcache::cli
