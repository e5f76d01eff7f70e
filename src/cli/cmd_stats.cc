// `aotcache stats [--json] [--zero]`: the cache directory's cumulative counters, entry count and size.
#include <ostream>

#include "cli/commands.h"
#include "cli/help.h"
#include "cli/json_writer.h"

namespace aotcache::cli {

int run_stats(const Invocation& inv) {
  if (std::string bad = inv.bad_option({"--json", "--zero"}, {}); !bad.empty() || !inv.positional().empty()) {
    *inv.err << "aotcache stats: " << (bad.empty() ? "unexpected argument" : bad) << "\n" << usage_line("stats");
    return k_exit_usage;
  }
  if (inv.flag("--zero")) {
    if (Status s = inv.store->zero_counters(); !s.ok()) {
      *inv.err << "aotcache: " << s.to_string() << "\n";
      return k_exit_failure;
    }
    *inv.out << "Statistics zeroed.\n";
    return k_exit_ok;
  }
  auto counters = inv.store->read_counters();
  auto entries = inv.store->list();
  if (!counters.ok() || !entries.ok()) {
    *inv.err << "aotcache: " << (counters.ok() ? entries.status() : counters.status()).to_string() << "\n";
    return k_exit_failure;
  }
  uint64_t size = 0;
  for (const auto& e : *entries) size += e.size;
  auto quarantined = inv.store->list_quarantine();
  const int64_t quarantined_files = quarantined.ok() ? static_cast<int64_t>(quarantined->size()) : 0;
  Counters c = *counters;
  for (const char* base : {"hits", "misses", "bypasses", "errors"}) c.try_emplace(base, 0);
  if (inv.flag("--json")) {
    JsonWriter w;
    w.begin_object().key("dir").string(inv.store->dir());
    w.key("entries").integer(static_cast<int64_t>(entries->size()));
    w.key("size_bytes").integer(static_cast<int64_t>(size));
    w.key("quarantined_files").integer(quarantined_files);
    w.key("counters").begin_object();
    for (const auto& [name, value] : c) w.key(name).integer(value);
    w.end_object().end_object();
    *inv.out << w.text() << "\n";
    return k_exit_ok;
  }
  *inv.out << "cache directory  " << inv.store->dir() << "\n";
  *inv.out << "entries          " << entries->size() << " (" << size << " bytes)\n";
  if (quarantined_files > 0) *inv.out << "quarantined      " << quarantined_files << " files\n";
  for (const auto& [name, value] : c) {
    std::string label = name;
    label.resize(std::max<size_t>(label.size(), 16), ' ');
    *inv.out << label << " " << value << "\n";
  }
  return k_exit_ok;
}

}  // namespace aotcache::cli
