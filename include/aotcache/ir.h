// The graph IR: what the key, the checks and the store see of a Dynamo-captured FX graph.
// Built by the Python capture layer (or by tests, without torch); owns no torch objects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace aotcache {

// A typed argument value. Types are kept apart on purpose: 1, 1.0 and True are three different values.
struct Value {
  enum class Kind : uint8_t {
    kNone = 0,
    kBool = 1,
    kInt = 2,
    kFloat = 3,
    kString = 4,
    kNodeRef = 5,  // the output of the node at position `i` of the same graph
    kList = 6,
    kTuple = 7,
    kDict = 8,       // ordered (key, value) pairs: `items` alternates key, value
    kTorchEnum = 9,  // a torch constant by name: `s` is the category (dtype, device, layout, ...), `name` the value
    kSlice = 10,     // slice(start, stop, step): `items` holds the three values
    kEllipsis = 11,  // Python's ...
    kSymExpr = 12,   // a symbolic integer expression over the graph's size symbols: `s` holds it ("2*s0")
  };

  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::string name;
  std::vector<Value> items;

  static Value none() { return {}; }
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value floating(double v);
  static Value string(std::string v);
  static Value node_ref(int64_t position);
  static Value list(std::vector<Value> v);
  static Value tuple(std::vector<Value> v);
  // REQUIRES: v.size() is even (key, value, key, value, ...).
  static Value dict(std::vector<Value> v);
  static Value torch_enum(std::string category, std::string name);
  static Value slice(Value start, Value stop, Value step);
  static Value ellipsis();
  static Value sym_expr(std::string expr);

  bool operator==(const Value&) const = default;
};

// The autograd base of a view (`Tensor._base`): what AOTAutograd regenerates aliased, mutated inputs from.
struct AliasBase {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;

  bool operator==(const AliasBase&) const = default;
};

// Metadata of a tensor: a graph input or a constant.
struct TensorMeta {
  std::string dtype;   // "float32"
  std::string device;  // "cpu", "cuda:1": the index is in the code Inductor generates
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
  bool requires_grad = false;
  std::string layout = "strided";
  bool is_pinned = false;
  std::string tensor_type = "Tensor";  // "Tensor" or "Parameter"; subclasses do not reach the IR
  bool is_inference = false;           // created under inference_mode: AOTAutograd treats it differently
  // A graph input with symbolic sizes (dynamic shapes): every size and stride as an expression over the graph's
  // size symbols, numbered by first appearance ("s0", "2*s0", "8"); these replace sizes/strides/storage_offset
  // (which then hold the example's values) in the key. Empty for a static tensor.
  std::vector<std::string> size_exprs;
  std::vector<std::string> stride_exprs;
  std::string storage_offset_expr;
  // Graph inputs that share one storage (overlapping views of one base, a tensor and its view): when one of them is
  // mutated AOTAutograd compiles other code for them (a synthetic base: the common `_base`, else the whole storage).
  // `alias_group` numbers the shared storages by first appearance among the inputs; -1 for an input that shares its
  // storage with no other input (the two fields below then keep their defaults) and for constants.
  int32_t alias_group = -1;
  int64_t alias_storage_nbytes = 0;     // size of the shared storage
  std::optional<AliasBase> alias_base;  // the input's `_base` when it is a view

  bool is_aliased() const { return alias_group != -1 || alias_storage_nbytes != 0 || alias_base.has_value(); }
  bool is_symbolic() const { return !size_exprs.empty(); }
  bool operator==(const TensorMeta&) const = default;
};

// One graph input, as seen by the backend: a tensor or a plain Python scalar.
struct InputMeta {
  std::optional<TensorMeta> tensor;  // set for tensors
  Value scalar;                      // set for int/float/bool inputs (kind != kNone)

  bool operator==(const InputMeta&) const = default;
};

enum class NodeOp : uint8_t {
  kPlaceholder = 0,
  kGetAttr = 1,
  kCallFunction = 2,
  kCallMethod = 3,
  kCallModule = 4,
  kOutput = 5,
};

const char* node_op_name(NodeOp op);

// How a call target is identified. The capture layer classifies; the checks decide what is cacheable.
enum class TargetKind : uint8_t {
  kNone = 0,            // placeholder, output
  kAtenOp = 1,          // an OpOverload: "aten::mm.default"
  kTorchFunction = 2,   // a function of the torch package: "torch.nn.functional.relu"
  kOperator = 3,        // the operator module: "operator.add"
  kBuiltin = 4,         // a Python builtin: "getattr"
  kTensorMethod = 5,    // call_method on a tensor: "view"
  kModule = 6,          // call_module: the module's type
  kHigherOrderOp = 7,   // "torch.ops.higher_order.cond"
  kPythonFunction = 8,  // any other Python callable: not cacheable until pinned
  kAttribute = 9,       // get_attr: a constant tensor of the graph module
  kCustomOp = 10,       // an OpOverload outside aten/prims: "mylib::op.default"
  kSubgraph = 11,       // get_attr of a nested graph (a higher-order op's body): in Node::subgraphs
};

const char* target_kind_name(TargetKind kind);

struct Graph;

struct Node {
  std::string name;  // for humans only: never part of the key
  NodeOp op = NodeOp::kCallFunction;
  TargetKind target_kind = TargetKind::kNone;
  std::string target;
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // get_attr of a constant tensor: its metadata and the SHA-256 of its bytes (raw, 32 bytes).
  std::optional<TensorMeta> constant_meta;
  std::string constant_digest;
  // Semantic node meta only (checkpoint tags, user annotations, partitioner tags): what can change the compile.
  // Debug meta (stack traces, module paths, example values) never reaches the IR.
  std::vector<std::pair<std::string, Value>> meta;
  // get_attr of a subgraph (TargetKind::kSubgraph): exactly one graph, encoded in place of its attribute name.
  std::vector<Graph> subgraphs;

  bool operator==(const Node&) const;
};

struct Graph {
  std::vector<Node> nodes;

  bool operator==(const Graph&) const = default;
};

inline bool Node::operator==(const Node& o) const {
  return name == o.name && op == o.op && target_kind == o.target_kind && target == o.target && args == o.args &&
         kwargs == o.kwargs && constant_meta == o.constant_meta && constant_digest == o.constant_digest &&
         meta == o.meta && subgraphs == o.subgraphs;
}

}  // namespace aotcache
