// Cacheability checks: a graph is cached only if the key determines its behaviour. Anything else bypasses
// the cache with a reason code (counted in stats) and a message that names the node and its target.
#pragma once

#include <optional>
#include <string>

#include "aotcache/ir.h"

namespace aotcache {

struct BypassReason {
  std::string code;     // stable, snake_case: "python_function", "higher_order_op", ...
  std::string message;  // for humans: names the node and the target

  bool operator==(const BypassReason&) const = default;
};

// The first rule that refuses a node, in graph order; nullopt when every node is cacheable.
std::optional<BypassReason> check_graph(const Graph& graph);

}  // namespace aotcache
