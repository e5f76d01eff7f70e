// Cacheability checks: a graph is cached only if the key determines its behaviour. Anything else bypasses
// the cache with a reason code (counted in stats) and a message that names the node and its target.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "aotcache/ir.h"

namespace aotcache {

struct BypassReason {
  std::string code;     // stable, snake_case: "python_function", "higher_order_op", ...
  std::string message;  // for humans: names the node and the target

  bool operator==(const BypassReason&) const = default;
};

// The first rule that refuses a node, in graph order, subgraphs (higher-order-op bodies) checked where they are
// defined; nullopt when every node is cacheable. Messages name nested nodes by path: "wrap_body_0/sin".
//
// The capture layer states pins as node meta the rules look for: "aotcache.op_version" on a custom op whose version
// is registered or whose implementation source was digested, "aotcache.module" on a call_module node whose
// module type, hyperparameters and parameters were encoded.
std::optional<BypassReason> check_graph(const Graph& graph);

// One row of the ordered rule table, for documentation and `aotcache rules`.
struct RuleDescription {
  std::string op;         // "call_function"
  std::string kind;       // target kind: "aten_op"
  std::string target;     // "*", "torch.*" (prefix) or an exact target
  std::string condition;  // a node meta key the rule requires, or "" ("aotcache.known_hop": a known HOP)
  bool allow = false;
  std::string code;  // reason code when !allow
};

std::vector<RuleDescription> describe_rules();

// The higher-order ops whose semantics the key determines (their callables are subgraphs encoded by content).
std::vector<std::string> known_higher_order_ops();

}  // namespace aotcache
