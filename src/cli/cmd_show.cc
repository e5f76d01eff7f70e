// `aotcache show KEY [--json]`: an entry's header, manifest, metadata, kernels and captured graph.
#include <optional>
#include <ostream>
#include <sstream>

#include "aotcache/graph_text.h"
#include "aotcache/kernel_bundle.h"
#include "aotcache/serialize.h"
#include "base/sha256.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "cli/json_writer.h"
#include "key/canonical_encoder.h"
#include "key/summary.h"

namespace aotcache::cli {
namespace {

// Metadata values longer than this are cut in the text view (`show KEY --json` prints them whole).
constexpr size_t k_shown_value_chars = 1024;

// The entry's graph, decoded, and whether it is the graph the key was computed over: its graph and inputs
// component digests equal the manifest's (the graph section is otherwise protected by the trailer only).
struct ShownGraph {
  std::optional<CapturedGraph> graph;
  std::string version;  // "1.0"
  std::string problem;  // why there is no graph, or why it does not match; empty when it matches
};

// "4 files, 231456 bytes (kernel bundle v1)", "none", or why the bundle cannot be read.
std::string kernels_summary(const Entry& e) {
  if (e.kernels.empty()) return "none (compiled on load where missing)";
  auto b = decode_kernel_bundle(e.kernels);
  if (!b.ok()) return "unreadable: " + b.status().to_string();
  size_t total = 0;
  for (const auto& f : b->files) total += f.bytes.size();
  return std::to_string(b->files.size()) + " files, " + std::to_string(total) + " bytes (kernel bundle v" +
         std::to_string(k_kernel_bundle_format_version) + "; installed on hits on the machine that built them)";
}

ShownGraph shown_graph(const Entry& e) {
  ShownGraph out;
  if (e.graph.empty()) {
    out.problem = "not stored (entry written without its graph)";
    return out;
  }
  if (auto v = graph_format_version(e.graph); v.ok()) {
    out.version = std::to_string(v->major) + "." + std::to_string(v->minor);
  }
  auto g = deserialize_graph(e.graph);
  if (!g.ok()) {
    out.problem = "unreadable: " + g.status().to_string();
    return out;
  }
  out.graph = std::move(*g);
  internal::ByteWriter graph_bytes, input_bytes;
  const ManifestComponent* graph_c = e.manifest.find("graph");
  const ManifestComponent* inputs_c = e.manifest.find("inputs");
  if (!internal::encode_graph(out.graph->graph, &graph_bytes).ok() ||
      !internal::encode_inputs(out.graph->inputs, &input_bytes).ok() || graph_c == nullptr || inputs_c == nullptr ||
      component_digest("graph", graph_bytes.bytes()) != graph_c->digest ||
      component_digest("inputs", input_bytes.bytes()) != inputs_c->digest) {
    out.problem = "does not match the manifest's graph and inputs digests";
  }
  return out;
}

}  // namespace

int run_show(const Invocation& inv) {
  const auto pos = inv.positional();
  if (pos.size() != 1) {
    *inv.err << usage_line("show");
    return k_exit_usage;
  }
  auto key = resolve_key(*inv.store, pos[0]);
  if (!key.ok()) {
    *inv.err << "aotcache: " << key.status().to_string() << "\n";
    return exit_code(key.status());
  }
  auto got = inv.store->peek(*key);  // inspecting must not mark it used
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
    w.end_object();
    w.key("kernels");
    if (e.kernels.empty()) {
      w.null();
    } else if (auto b = decode_kernel_bundle(e.kernels); b.ok()) {
      w.begin_object().key("built_on").string(b->fingerprint).key("files").begin_array();
      for (const auto& f : b->files) {
        w.begin_object().key("path").string(f.path).key("bytes").integer(static_cast<int64_t>(f.bytes.size()));
        w.end_object();
      }
      w.end_array().end_object();
    } else {
      w.begin_object().key("problem").string(b.status().to_string()).end_object();
    }
    const ShownGraph g = shown_graph(e);
    w.key("graph_bytes").integer(static_cast<int64_t>(e.graph.size()));
    w.key("graph_format").string(g.version);
    w.key("graph_matches_manifest").boolean(g.graph.has_value() && g.problem.empty());
    if (!g.problem.empty()) w.key("graph_problem").string(g.problem);
    w.key("graph");
    if (g.graph.has_value()) {
      w.raw(graph_to_json(*g.graph));
    } else {
      w.null();
    }
    w.end_object();
    *inv.out << w.text() << "\n";
    return k_exit_ok;
  }
  *inv.out << "key            " << *key << "\n";
  *inv.out << "format         v" << k_entry_format_version << ", payload " << e.payload.size() << " bytes\n";
  for (size_t k = 0; k + 1 < meta.items.size(); k += 2) {
    std::string label = meta.items[k].s;
    label.resize(std::max<size_t>(label.size(), 14), ' ');
    std::string text = internal::value_to_text(meta.items[k + 1]);
    if (text.size() > k_shown_value_chars) {  // a compiled-code record runs to tens of KB: --json has it whole
      text = text.substr(0, k_shown_value_chars) + "... (" + std::to_string(text.size()) + " chars; --json shows all)";
    }
    *inv.out << label << " " << text << "\n";
  }
  *inv.out << "manifest:\n";
  for (const auto& c : e.manifest.components) {
    std::string name = c.name;
    name.resize(std::max<size_t>(name.size(), 15), ' ');
    *inv.out << "  " << name << internal::to_hex(c.digest).substr(0, 16) << "  " << c.summary << "\n";
  }
  *inv.out << "kernels        " << kernels_summary(e) << "\n";
  const ShownGraph g = shown_graph(e);
  *inv.out << "graph          ";
  if (!g.version.empty()) *inv.out << "format v" << g.version << ", " << e.graph.size() << " bytes, ";
  *inv.out << (g.problem.empty() ? "matches the manifest" : g.problem) << "\n";
  if (g.graph.has_value()) {
    std::istringstream lines(graph_to_text(*g.graph));
    for (std::string line; std::getline(lines, line);) *inv.out << "  " << line << "\n";
  }
  return k_exit_ok;
}

}  // namespace aotcache::cli
