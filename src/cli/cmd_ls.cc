// `aotcache ls [--json] [--sort age|size|saved]`: one line per entry: key, kind, size, last use, compile time it
// saves.
#include <algorithm>
#include <ctime>
#include <ostream>

#include "cli/commands.h"
#include "cli/help.h"
#include "cli/json_writer.h"

namespace aotcache::cli {

int run_ls(const Invocation& inv) {
  auto entries = inv.store->list();
  if (!entries.ok()) {
    *inv.err << "aotcache: " << entries.status().to_string() << "\n";
    return k_exit_failure;
  }
  const std::string sort = inv.option("--sort").value_or("age");
  const std::string bad = inv.bad_option({"--json"}, {"--sort"});
  if (!bad.empty() || !inv.positional().empty() || (sort != "age" && sort != "size" && sort != "saved")) {
    *inv.err << "aotcache ls: "
             << (!bad.empty()                ? bad
                 : !inv.positional().empty() ? "unexpected argument " + inv.positional()[0]
                                             : "unknown sort order '" + sort + "'")
             << "\n"
             << usage_line("ls");
    return k_exit_usage;
  }
  struct Row {
    EntryInfo info;
    bool valid;
    double compile_s;
    std::string kind;
  };
  std::vector<Row> rows;
  for (const auto& e : *entries) {
    // Read without marking used: listing must not change the eviction order.
    auto bytes = default_file_system()->read_file(inv.store->entry_path(e.key_hex));
    auto decoded = bytes.ok() && bytes->has_value() ? decode_entry(**bytes) : Result<Entry>(Status::not_found(""));
    const bool valid = decoded.ok();
    rows.push_back({e, valid, valid ? entry_metadata_number(*decoded, "compile_seconds", 0.0) : 0.0,
                    valid ? entry_kind(*decoded) : "?"});
  }
  std::sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    if (sort == "size") return a.info.size > b.info.size;
    if (sort == "saved") return a.compile_s > b.compile_s;
    return a.info.mtime_unix > b.info.mtime_unix;
  });
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  JsonWriter w;
  w.begin_array();
  for (const auto& row : rows) {
    const EntryInfo& e = row.info;
    const bool valid = row.valid;
    const double compile_s = row.compile_s;
    if (inv.flag("--json")) {
      w.begin_object().key("key").string(e.key_hex).key("size_bytes").integer(static_cast<int64_t>(e.size));
      w.key("mtime_unix").integer(e.mtime_unix).key("valid").boolean(valid).key("compile_seconds").number(compile_s);
      w.key("kind").string(row.kind);
      w.end_object();
    } else {
      char line[160];
      std::snprintf(line, sizeof line, "%s  %-11s %10llu B  %6llds ago  %s\n", e.key_hex.c_str(), row.kind.c_str(),
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
