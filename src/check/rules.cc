// The rule table: each node is matched against an ordered list of rules; the first rule that matches decides.
// Subgraphs (higher-order-op bodies) are checked recursively with the same table.
#include <algorithm>
#include <array>
#include <string_view>

#include "aotcache/check.h"

namespace aotcache {
namespace {

enum class Verdict : uint8_t { kAllow, kBypass };
enum class Match : uint8_t { kAny, kExact, kPrefix };

struct Rule {
  NodeOp op;
  TargetKind kind;
  Match match;
  std::string_view target;         // for kExact / kPrefix
  std::string_view requires_meta;  // non-empty: the rule applies only when the node carries this meta key
  Verdict verdict;
  std::string_view code;     // reason code, for kBypass
  std::string_view because;  // completes "node N (target T) <because>", for kBypass
};

constexpr std::string_view k_hop = "torch.ops.higher_order.";

// Higher-order ops whose semantics are fixed by torch and whose callable arguments are subgraphs of the same graph
// (encoded by content into the key): their behaviour is determined by the key.
constexpr std::array<std::string_view, 14> k_known_higher_order_ops = {
    "torch.ops.higher_order.tag_activation_checkpoint",
    "torch.ops.higher_order.cond",
    "torch.ops.higher_order.while_loop",
    "torch.ops.higher_order.invoke_subgraph",
    "torch.ops.higher_order.flex_attention",
    "torch.ops.higher_order.flex_attention_backward",
    "torch.ops.higher_order.auto_functionalized",
    "torch.ops.higher_order.auto_functionalized_v2",
    "torch.ops.higher_order.wrap_with_set_grad_enabled",
    "torch.ops.higher_order.wrap_with_autocast",
    "torch.ops.higher_order.autograd_function_apply",
    "torch.ops.higher_order.wrap",
    "torch.ops.higher_order.scan",
    "torch.ops.higher_order.map_impl",
};

// clang-format off
constexpr std::array<Rule, 21> k_rules = {{
    // Structure.
    {NodeOp::kPlaceholder, TargetKind::kNone, Match::kAny, "", "", Verdict::kAllow, "", ""},
    {NodeOp::kOutput, TargetKind::kNone, Match::kAny, "", "", Verdict::kAllow, "", ""},
    // Constants are keyed by content digest; subgraphs by their encoding (and checked recursively).
    {NodeOp::kGetAttr, TargetKind::kAttribute, Match::kAny, "", "", Verdict::kAllow, "", ""},
    {NodeOp::kGetAttr, TargetKind::kSubgraph, Match::kAny, "", "", Verdict::kAllow, "", ""},
    {NodeOp::kGetAttr, TargetKind::kNone, Match::kAny, "", "", Verdict::kBypass, "get_attr_non_tensor",
     "reads an attribute that is neither a constant tensor nor a subgraph"},
    // Op overloads: aten and prims are pinned by the torch version; a custom op only once its version is pinned.
    {NodeOp::kCallFunction, TargetKind::kAtenOp, Match::kAny, "", "", Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kCustomOp, Match::kAny, "", "aotcache.op_version", Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kCustomOp, Match::kAny, "", "", Verdict::kBypass, "custom_op_unpinned",
     "is a custom op whose implementation is not pinned into the key: pin it with "
     "aotcache.register_op_version(\"ns::op\", \"<version>\"), or define it with torch.library.custom_op so that "
     "aotcache can digest its implementation's source"},
    // Torch functions: Dynamo's own helpers (hooks, backward state, comptime) run user code: bypass. The rest of the
    // torch package (public API and the private helpers Dynamo puts in graphs, e.g. torch._C._set_grad_enabled and
    // torch.amp.autocast_mode._enter_autocast) is pinned by the torch version in the environment component.
    {NodeOp::kCallFunction, TargetKind::kTorchFunction, Match::kPrefix, "torch._dynamo.", "", Verdict::kBypass,
     "dynamo_internal_function", "is one of Dynamo's runtime helpers, which call user code outside the graph"},
    {NodeOp::kCallFunction, TargetKind::kTorchFunction, Match::kPrefix, "torch.", "", Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kOperator, Match::kPrefix, "operator.", "", Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kBuiltin, Match::kAny, "", "", Verdict::kAllow, "", ""},
    {NodeOp::kCallMethod, TargetKind::kTensorMethod, Match::kAny, "", "", Verdict::kAllow, "", ""},
    // Higher-order ops: the known ones are allowed by the loop below this table; any other one bypasses.
    {NodeOp::kCallFunction, TargetKind::kHigherOrderOp, Match::kPrefix, k_hop, "aotcache.known_hop",
     Verdict::kAllow, "", ""},
    {NodeOp::kCallFunction, TargetKind::kHigherOrderOp, Match::kAny, "", "", Verdict::kBypass,
     "higher_order_op_unknown", "is a higher-order op aotcache does not know; its semantics are not in the key"},
    // nn modules (only in graphs handed to the backend directly: Dynamo inlines modules): built-in torch.nn leaf
    // modules, encoded by the capture layer as type, hyperparameters and parameter/buffer metadata.
    {NodeOp::kCallModule, TargetKind::kModule, Match::kPrefix, "torch.nn.modules.", "aotcache.module",
     Verdict::kAllow, "", ""},
    {NodeOp::kCallModule, TargetKind::kModule, Match::kAny, "", "", Verdict::kBypass, "call_module_unknown_type",
     "calls an nn.Module that is not a built-in torch.nn leaf module; its code is not part of the key"},
    // User Python code.
    {NodeOp::kCallFunction, TargetKind::kPythonFunction, Match::kAny, "", "", Verdict::kBypass, "python_function",
     "calls a Python function whose code is not part of the key"},
    {NodeOp::kCallFunction, TargetKind::kTorchFunction, Match::kAny, "", "", Verdict::kBypass, "python_function",
     "calls a function outside the torch package"},
    {NodeOp::kCallFunction, TargetKind::kOperator, Match::kAny, "", "", Verdict::kBypass, "python_function",
     "calls a function outside the operator module"},
    {NodeOp::kCallMethod, TargetKind::kNone, Match::kAny, "", "", Verdict::kBypass, "unknown_node",
     "calls a method on a value that is not a tensor"},
}};
// clang-format on

bool has_meta(const Node& n, std::string_view key) {
  return std::any_of(n.meta.begin(), n.meta.end(), [&](const auto& kv) { return kv.first == key; });
}

bool is_known_higher_order_op(std::string_view target) {
  return std::find(k_known_higher_order_ops.begin(), k_known_higher_order_ops.end(), target) !=
         k_known_higher_order_ops.end();
}

bool matches(const Rule& r, const Node& n) {
  if (r.op != n.op || r.kind != n.target_kind) return false;
  switch (r.match) {
    case Match::kAny: break;
    case Match::kExact:
      if (n.target != r.target) return false;
      break;
    case Match::kPrefix:
      if (!std::string_view(n.target).starts_with(r.target)) return false;
      break;
  }
  if (r.requires_meta.empty()) return true;
  // The known-HOP rule is a table lookup, not a meta key the capture layer sets.
  if (r.requires_meta == "aotcache.known_hop") return is_known_higher_order_op(n.target);
  return has_meta(n, r.requires_meta);
}

BypassReason refuse(const std::string& where, const Node& n, std::string_view code, std::string_view because) {
  return BypassReason{std::string(code),
                      "node " + where + n.name + " (target " + n.target + ") " + std::string(because)};
}

std::optional<BypassReason> check_at(const Graph& graph, const std::string& where, int depth) {
  constexpr int k_max_depth = 32;
  if (depth > k_max_depth) {
    return BypassReason{"subgraph_too_deep", "subgraphs nested deeper than " + std::to_string(k_max_depth)};
  }
  for (const Node& n : graph.nodes) {
    const Rule* match = nullptr;
    for (const Rule& r : k_rules) {
      if (matches(r, n)) {
        match = &r;
        break;
      }
    }
    if (match == nullptr) {
      return BypassReason{"unknown_node", "node " + where + n.name + " (op " + node_op_name(n.op) + ", target " +
                                              n.target + ", kind " + target_kind_name(n.target_kind) +
                                              ") matches no rule"};
    }
    if (match->verdict == Verdict::kBypass) return refuse(where, n, match->code, match->because);
    // A constant must carry its content digest, or its bytes would not be in the key.
    if (n.op == NodeOp::kGetAttr && n.target_kind == TargetKind::kAttribute && !n.constant_meta) {
      return refuse(where, n, "get_attr_non_tensor", "reads an attribute that is not a constant tensor");
    }
    if (n.target_kind == TargetKind::kSubgraph) {
      if (n.subgraphs.size() != 1) return refuse(where, n, "unknown_node", "is a subgraph node without its graph");
      if (auto r = check_at(n.subgraphs[0], where + n.name + "/", depth + 1)) return r;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<BypassReason> check_graph(const Graph& graph) {
  return check_at(graph, "", 0);
}

std::vector<RuleDescription> describe_rules() {
  std::vector<RuleDescription> out;
  for (const Rule& r : k_rules) {
    RuleDescription d;
    d.op = node_op_name(r.op);
    d.kind = target_kind_name(r.kind);
    d.target = r.match == Match::kAny      ? "*"
               : r.match == Match::kPrefix ? std::string(r.target) + "*"
                                           : std::string(r.target);
    d.condition = std::string(r.requires_meta);
    d.allow = r.verdict == Verdict::kAllow;
    d.code = std::string(r.code);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> known_higher_order_ops() {
  return {k_known_higher_order_ops.begin(), k_known_higher_order_ops.end()};
}

}  // namespace aotcache
