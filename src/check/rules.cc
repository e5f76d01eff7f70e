// The rule table: each node's (op, target kind) is looked up in order; the first matching rule decides.
#include <array>

#include "aotcache/check.h"

namespace aotcache {
namespace {

enum class Verdict { kAllow, kBypass };

struct Rule {
  NodeOp op;
  TargetKind kind;
  Verdict verdict;
  const char* code;     // for kBypass
  const char* because;  // for kBypass: completes "node N (target T) <because>"
};

// Allowed: op overloads, torch functions (their code is pinned by the torch version in the environment component),
// operator and builtins, tensor methods. Everything else bypasses until a later rule pins it into the key.
constexpr std::array<Rule, 13> k_rules = {{
    {NodeOp::kPlaceholder, TargetKind::kNone, Verdict::kAllow, "", ""},
    {NodeOp::kOutput, TargetKind::kNone, Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kAtenOp, Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kTorchFunction, Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kOperator, Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kBuiltin, Verdict::kAllow, "", ""},
    {NodeOp::kCallMethod, TargetKind::kTensorMethod, Verdict::kAllow, "", ""},
    {NodeOp::kGetAttr, TargetKind::kAttribute, Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kPythonFunction, Verdict::kBypass, "python_function",
     "calls a Python function whose code is not part of the key"},
    {NodeOp::kCallFunction, TargetKind::kCustomOp, Verdict::kBypass, "custom_op",
     "is a custom op whose implementation is not pinned into the key"},
    {NodeOp::kCallFunction, TargetKind::kHigherOrderOp, Verdict::kBypass, "higher_order_op",
     "is a higher-order op, not supported yet"},
    {NodeOp::kCallModule, TargetKind::kModule, Verdict::kBypass, "call_module",
     "calls an nn.Module (module inlining is off), not supported yet"},
    {NodeOp::kGetAttr, TargetKind::kNone, Verdict::kBypass, "get_attr_non_tensor",
     "reads an attribute that is not a constant tensor"},
}};

}  // namespace

std::optional<BypassReason> check_graph(const Graph& graph) {
  for (const Node& n : graph.nodes) {
    const Rule* match = nullptr;
    for (const Rule& r : k_rules) {
      if (r.op == n.op && r.kind == n.target_kind) {
        match = &r;
        break;
      }
    }
    // get_attr of a constant must carry its content digest, or its bytes would not be in the key.
    if (match != nullptr && n.op == NodeOp::kGetAttr && match->verdict == Verdict::kAllow && !n.constant_meta) {
      return BypassReason{"get_attr_non_tensor", "node " + n.name + " (target " + n.target +
                                                     ") reads an attribute that is not a constant tensor"};
    }
    if (match == nullptr) {
      return BypassReason{"unknown_node", "node " + n.name + " (op " + node_op_name(n.op) + ", target " + n.target +
                                              ", kind " + target_kind_name(n.target_kind) + ") matches no rule"};
    }
    if (match->verdict == Verdict::kBypass) {
      return BypassReason{match->code, "node " + n.name + " (target " + n.target + ") " + match->because};
    }
  }
  return std::nullopt;
}

}  // namespace aotcache
