// `aotcache show KEY [--json]`: an entry's header, manifest and metadata.
#include <ostream>

#include "base/sha256.h"
#include "cli/commands.h"
#include "cli/json_writer.h"
#include "key/summary.h"

namespace aotcache::cli {

int run_show(const Invocation& inv) {
  const auto pos = inv.positional();
  if (pos.size() != 1) {
    *inv.err << "usage: aotcache show KEY [--json]\n";
    return k_exit_usage;
  }
  auto key = resolve_key(*inv.store, pos[0]);
  if (!key.ok()) {
    *inv.err << "aotcache: " << key.status().to_string() << "\n";
    return key.status().code() == StatusCode::kInvalidArgument ? k_exit_usage : k_exit_failure;
  }
  auto got = inv.store->get(*key);
  if (!got.ok() || !got->has_value()) {
    *inv.err << "aotcache: " << (got.ok() ? "entry vanished" : got.status().to_string()) << "\n";
    return k_exit_failure;
  }
  const Entry& e = **got;
  const Value& meta = e.metadata;
  if (inv.flag("--json")) {
    JsonWriter w;
    w.begin_object().key("key").string(*key).key("format_version").integer(k_entry_format_version);
    w.key("payload_bytes").integer(static_cast<int64_t>(e.payload.size()));
    w.key("manifest").begin_array();
    for (const auto& c : e.manifest.components) {
      w.begin_object().key("name").string(c.name).key("digest").string(internal::to_hex(c.digest));
      w.key("summary").string(c.summary).end_object();
    }
    w.end_array().key("metadata").begin_object();
    for (size_t k = 0; k + 1 < meta.items.size(); k += 2) {
      w.key(meta.items[k].s);
      const Value& v = meta.items[k + 1];
      if (v.kind == Value::Kind::kInt) {
        w.integer(v.i);
      } else if (v.kind == Value::Kind::kFloat) {
        w.number(v.f);
      } else if (v.kind == Value::Kind::kString) {
        w.string(v.s);
      } else {
        w.string(internal::value_to_text(v));
      }
    }
    w.end_object().end_object();
    *inv.out << w.text() << "\n";
    return k_exit_ok;
  }
  *inv.out << "key            " << *key << "\n";
  *inv.out << "format         v" << k_entry_format_version << ", payload " << e.payload.size() << " bytes\n";
  for (size_t k = 0; k + 1 < meta.items.size(); k += 2) {
    std::string label = meta.items[k].s;
    label.resize(std::max<size_t>(label.size(), 14), ' ');
    *inv.out << label << " " << internal::value_to_text(meta.items[k + 1]) << "\n";
  }
  *inv.out << "manifest:\n";
  for (const auto& c : e.manifest.components) {
    std::string name = c.name;
    name.resize(std::max<size_t>(name.size(), 15), ' ');
    *inv.out << "  " << name << internal::to_hex(c.digest).substr(0, 16) << "  " << c.summary << "\n";
  }
  return k_exit_ok;
}

}  // namespace aotcache::cli
