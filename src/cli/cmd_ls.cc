// `aotcache ls [--json]`: one line per entry: key, size, age, compile time saved per hit.
#include <algorithm>
#include <ctime>
#include <ostream>

#include "cli/commands.h"
#include "cli/json_writer.h"

namespace aotcache::cli {

int run_ls(const Invocation& inv) {
  auto entries = inv.store->list();
  if (!entries.ok()) {
    *inv.err << "aotcache: " << entries.status().to_string() << "\n";
    return k_exit_failure;
  }
  std::sort(entries->begin(), entries->end(), [](const auto& a, const auto& b) { return a.mtime_unix > b.mtime_unix; });
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  JsonWriter w;
  w.begin_array();
  for (const auto& e : *entries) {
    auto got = inv.store->get(e.key_hex);
    const bool valid = got.ok() && got->has_value();
    const double compile_s = valid ? entry_metadata_number(**got, "compile_seconds", 0.0) : 0.0;
    if (inv.flag("--json")) {
      w.begin_object().key("key").string(e.key_hex).key("size_bytes").integer(static_cast<int64_t>(e.size));
      w.key("mtime_unix").integer(e.mtime_unix).key("valid").boolean(valid).key("compile_seconds").number(compile_s);
      w.end_object();
    } else {
      char line[160];
      std::snprintf(line, sizeof line, "%s  %10llu B  %6llds ago  %s\n", e.key_hex.c_str(),
                    static_cast<unsigned long long>(e.size), static_cast<long long>(now - e.mtime_unix),
                    valid ? ("compile " + std::to_string(compile_s).substr(0, 6) + " s").c_str() : "INVALID");
      *inv.out << line;
    }
  }
  w.end_array();
  if (inv.flag("--json")) *inv.out << w.text() << "\n";
  return k_exit_ok;
}

}  // namespace aotcache::cli
