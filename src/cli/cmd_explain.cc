// `aotcache explain KEY_A KEY_B`: which key components differ between two entries, with both summaries.
#include <ostream>

#include "cli/commands.h"
#include "cli/help.h"

namespace aotcache::cli {

int run_explain(const Invocation& inv) {
  const auto pos = inv.positional();
  if (pos.size() != 2) {
    *inv.err << usage_line("explain");
    return k_exit_usage;
  }
  Entry entries[2];
  for (int k = 0; k < 2; ++k) {
    auto key = resolve_key(*inv.store, pos[k]);
    if (!key.ok()) {
      *inv.err << "aotcache: " << key.status().to_string() << "\n";
      return exit_code(key.status());
    }
    auto got = inv.store->peek(*key);  // inspecting must not mark it used
    if (!got.ok() || !got->has_value()) {
      *inv.err << "aotcache: " << (got.ok() ? "no entry " + *key : got.status().to_string()) << "\n";
      return k_exit_failure;
    }
    entries[k] = std::move(**got);
  }
  // A frame entry (Dynamo's code for one Python frame) and a graph entry (one compiled graph) have different key
  // components altogether: no component diff says anything about them.
  const std::string kinds[2] = {entry_kind(entries[0]), entry_kind(entries[1])};
  if (kinds[0] != kinds[1]) {
    *inv.out << "the two entries are of different kinds: A is a " << kinds[0] << " entry, B a " << kinds[1]
             << " entry; their keys are made of different components (aotcache show KEY lists them)\n";
    return k_exit_ok;
  }
  const auto diff = differing_components(entries[0].manifest, entries[1].manifest);
  if (diff.empty()) {
    *inv.out << "the two keys have identical components\n";
    return k_exit_ok;
  }
  auto value_of = [](const Entry& e, const std::string& name) -> const std::string* {
    for (const auto& [n, bytes] : e.component_values) {
      if (n == name) return &bytes;
    }
    return nullptr;
  };
  for (const auto& name : diff) {
    const ManifestComponent* a = entries[0].manifest.find(name);
    const ManifestComponent* b = entries[1].manifest.find(name);
    *inv.out << name << ":\n";
    const std::string* va = value_of(entries[0], name);
    const std::string* vb = value_of(entries[1], name);
    auto fields = va && vb ? explain_component(*va, *vb) : Result<std::vector<std::string>>(std::vector<std::string>());
    if (fields.ok() && !fields->empty()) {
      for (const auto& line : *fields) *inv.out << "  " << line << "\n";  // field: A -> B
    } else {
      *inv.out << "  A: " << (a ? a->summary : "(absent)") << "\n  B: " << (b ? b->summary : "(absent)") << "\n";
    }
  }
  return k_exit_ok;
}

}  // namespace aotcache::cli
