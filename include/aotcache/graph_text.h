// Readable forms of a captured graph: an FX-like listing for people and JSON for programs (`aotcache show`).
#pragma once

#include <string>

#include "aotcache/serialize.h"

namespace aotcache {

// One line per node, close to FX's readable graph:
//   %name = op[target](args, key=value) : float32[8, 16] cpu
// Node references print as %name of the referred node; the i-th placeholder of the top-level graph shows the
// i-th input's metadata and a constant its metadata and digest; semantic meta follows as `# meta {...}`; a
// subgraph's nodes follow its get_attr node, indented by two more spaces. Strings print as Python literals with
// non-printable bytes escaped (\xNN). Never fails; ends with a newline.
std::string graph_to_text(const CapturedGraph& graph);

// {"inputs": [...], "nodes": [...], "constants": [...]} on one line (docs/formats/graph-format.md §7). Values are
// typed: int and string as JSON numbers and strings, other kinds as one-key objects ({"float": "1.5"}, {"ref": 3},
// {"tuple": [...]}, ...). Bytes outside printable ASCII in strings are escaped as \u00XX (one per byte).
std::string graph_to_json(const CapturedGraph& graph);

}  // namespace aotcache
