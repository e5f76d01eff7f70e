// Constructors and names of the graph IR.
#include "aotcache/ir.h"

namespace aotcache {

Value Value::boolean(bool v) {
  Value out;
  out.kind = Kind::kBool;
  out.b = v;
  return out;
}

Value Value::integer(int64_t v) {
  Value out;
  out.kind = Kind::kInt;
  out.i = v;
  return out;
}

Value Value::floating(double v) {
  Value out;
  out.kind = Kind::kFloat;
  out.f = v;
  return out;
}

Value Value::string(std::string v) {
  Value out;
  out.kind = Kind::kString;
  out.s = std::move(v);
  return out;
}

Value Value::node_ref(int64_t position) {
  Value out;
  out.kind = Kind::kNodeRef;
  out.i = position;
  return out;
}

Value Value::list(std::vector<Value> v) {
  Value out;
  out.kind = Kind::kList;
  out.items = std::move(v);
  return out;
}

Value Value::tuple(std::vector<Value> v) {
  Value out;
  out.kind = Kind::kTuple;
  out.items = std::move(v);
  return out;
}

Value Value::dict(std::vector<Value> v) {
  Value out;
  out.kind = Kind::kDict;
  out.items = std::move(v);
  return out;
}

Value Value::torch_enum(std::string category, std::string name) {
  Value out;
  out.kind = Kind::kTorchEnum;
  out.s = std::move(category);
  out.name = std::move(name);
  return out;
}

Value Value::slice(Value start, Value stop, Value step) {
  Value out;
  out.kind = Kind::kSlice;
  out.items = {std::move(start), std::move(stop), std::move(step)};
  return out;
}

Value Value::ellipsis() {
  Value out;
  out.kind = Kind::kEllipsis;
  return out;
}

Value Value::sym_expr(std::string expr) {
  Value out;
  out.kind = Kind::kSymExpr;
  out.s = std::move(expr);
  return out;
}

const char* node_op_name(NodeOp op) {
  switch (op) {
    case NodeOp::kPlaceholder: return "placeholder";
    case NodeOp::kGetAttr: return "get_attr";
    case NodeOp::kCallFunction: return "call_function";
    case NodeOp::kCallMethod: return "call_method";
    case NodeOp::kCallModule: return "call_module";
    case NodeOp::kOutput: return "output";
  }
  return "unknown";
}

const char* target_kind_name(TargetKind kind) {
  switch (kind) {
    case TargetKind::kNone: return "none";
    case TargetKind::kAtenOp: return "aten_op";
    case TargetKind::kTorchFunction: return "torch_function";
    case TargetKind::kOperator: return "operator";
    case TargetKind::kBuiltin: return "builtin";
    case TargetKind::kTensorMethod: return "tensor_method";
    case TargetKind::kModule: return "module";
    case TargetKind::kHigherOrderOp: return "higher_order_op";
    case TargetKind::kPythonFunction: return "python_function";
    case TargetKind::kAttribute: return "attribute";
    case TargetKind::kCustomOp: return "custom_op";
    case TargetKind::kSubgraph: return "subgraph";
  }
  return "unknown";
}

}  // namespace aotcache
