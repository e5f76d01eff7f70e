// The graph format (docs/formats/graph-format.md): a captured graph (IR plus its inputs' metadata, optionally the bytes
// of its constants) as versioned, sectioned, little-endian bytes that a later process or the CLI can read back.
// Every function here is pure (no shared state): safe to call from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "aotcache/ir.h"
#include "aotcache/status.h"

namespace aotcache {

// Major: a reader refuses a newer major (Unsupported). Minor: additions an older reader of the same major can
// skip (new optional sections); a reader accepts any minor of its major, and every older major (v1.x: no alias
// records; v2.0 added them).
constexpr uint16_t k_graph_format_major = 2;
constexpr uint16_t k_graph_format_minor = 0;
constexpr std::string_view k_graph_magic = "AOTG";

// Bounds shared by the writer (which refuses a graph beyond them, InvalidArgument) and the reader (Corruption).
constexpr int k_graph_max_value_depth = 64;       // nesting of list/tuple/dict/slice values, as decode_value
constexpr int k_graph_max_subgraph_depth = 32;    // nesting of subgraphs, as the key encoding
constexpr uint64_t k_graph_max_nodes = 1u << 22;  // nodes of a graph and all its subgraphs together

// What one compile of a graph saw: the IR, the inputs' metadata, and the bytes of (some of) its constants.
struct CapturedGraph {
  Graph graph;
  std::vector<InputMeta> inputs;
  // SHA-256 (32 raw bytes) -> the constant's bytes. Optional: nodes carry the digest and metadata either way.
  std::map<std::string, std::string> constants;

  bool operator==(const CapturedGraph&) const = default;
};

struct SerializeOptions {
  // Constants with more bytes than this are written by digest only (their bytes are dropped).
  uint64_t max_constant_bytes = 1u << 20;
};

// InvalidArgument on a graph the reader would refuse: a node reference that does not point to an earlier node of
// the same graph, an odd-length dict, a slice without three items, a value kind or enum outside the IR, nesting
// or node counts beyond the bounds above, a constant whose bytes do not hash to its digest, a string or list
// longer than the format's u32 lengths. Nothing else fails.
Result<std::string> serialize_graph(const CapturedGraph& graph, const SerializeOptions& options = {});

struct DeserializeOptions {
  // Bound on what the decoded graph may occupy in memory (nodes, values, copied strings, counted by size): 0 means
  // 64 MiB + 128 x the input size. Real graphs need 6-14 x their serialized size (fixtures, FX-like 10k nodes).
  uint64_t max_decoded_bytes = 0;
};

// The graph written by serialize_graph: deserialize_graph(serialize_graph(g)) == g (constants above the size limit
// dropped). Unsupported for a newer major version or an unknown section marked required; Corruption for anything
// else malformed (the message names the offset). Never crashes, never loops or allocates beyond the bounds above,
// on arbitrary bytes.
Result<CapturedGraph> deserialize_graph(std::string_view bytes, const DeserializeOptions& options = {});

// The version a serialized graph claims, read from its header only. Corruption when there is no header.
struct GraphFormatVersion {
  uint16_t major = 0;
  uint16_t minor = 0;
};
Result<GraphFormatVersion> graph_format_version(std::string_view bytes);

}  // namespace aotcache
