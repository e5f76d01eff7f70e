// Typed, limited construction of guard expressions in postfix order.
#include "guard/guard_builder.h"

#include <algorithm>
#include <limits>

namespace aotcache::internal {

const char* guard_op_name(GuardOp op) {
  switch (op) {
    case GuardOp::kInt: return "integer";
    case GuardOp::kBool: return "boolean";
    case GuardOp::kSymbol: return "symbol";
    case GuardOp::kNeg: return "unary -";
    case GuardOp::kAdd: return "+";
    case GuardOp::kSub: return "-";
    case GuardOp::kMul: return "*";
    case GuardOp::kFloorDiv: return "//";
    case GuardOp::kMod: return "Mod";
    case GuardOp::kPow: return "**";
    case GuardOp::kIntTrueDiv: return "IntTrueDiv";
    case GuardOp::kMin: return "Min";
    case GuardOp::kMax: return "Max";
    case GuardOp::kAbs: return "Abs";
    case GuardOp::kEq: return "Eq";
    case GuardOp::kNe: return "Ne";
    case GuardOp::kLt: return "<";
    case GuardOp::kLe: return "<=";
    case GuardOp::kGt: return ">";
    case GuardOp::kGe: return ">=";
    case GuardOp::kAnd: return "And";
    case GuardOp::kOr: return "Or";
    case GuardOp::kNot: return "Not";
  }
  return "?";
}

namespace {

const char* type_name(GuardType t) {
  return t == GuardType::kInt ? "an integer" : "a boolean";
}

struct Signature {
  uint32_t min_arity;
  uint32_t max_arity;
  GuardType operand;  // for kEq/kNe: either, but both operands alike
  GuardType result;
};

Signature signature_of(GuardOp op) {
  constexpr uint32_t kAny = std::numeric_limits<uint32_t>::max();
  switch (op) {
    case GuardOp::kNeg:
    case GuardOp::kAbs: return {1, 1, GuardType::kInt, GuardType::kInt};
    case GuardOp::kMin:
    case GuardOp::kMax: return {1, kAny, GuardType::kInt, GuardType::kInt};
    case GuardOp::kEq:
    case GuardOp::kNe:
    case GuardOp::kLt:
    case GuardOp::kLe:
    case GuardOp::kGt:
    case GuardOp::kGe: return {2, 2, GuardType::kInt, GuardType::kBool};
    case GuardOp::kAnd:
    case GuardOp::kOr: return {1, kAny, GuardType::kBool, GuardType::kBool};
    case GuardOp::kNot: return {1, 1, GuardType::kBool, GuardType::kBool};
    default: return {2, 2, GuardType::kInt, GuardType::kInt};
  }
}

}  // namespace

Status GuardBuilder::push_leaf(GuardNode node, GuardType type) {
  if (nodes_.size() >= k_guard_max_nodes) {
    return Status::invalid_argument("guard has more than " + std::to_string(k_guard_max_nodes) + " nodes");
  }
  nodes_.push_back(node);
  stack_.push_back({type, 1});
  max_stack_ = std::max(max_stack_, stack_.size());
  return Status::ok_status();
}

Status GuardBuilder::add_int(int64_t value) {
  return push_leaf({GuardOp::kInt, 0, value}, GuardType::kInt);
}

Status GuardBuilder::add_bool(bool value) {
  return push_leaf({GuardOp::kBool, 0, value ? 1 : 0}, GuardType::kBool);
}

Status GuardBuilder::add_symbol(uint32_t index) {
  if (index >= k_guard_max_symbol) {
    return Status::invalid_argument("symbol s" + std::to_string(index) + " is beyond the limit s" +
                                    std::to_string(k_guard_max_symbol - 1));
  }
  num_symbols_ = std::max<size_t>(num_symbols_, size_t{index} + 1);
  return push_leaf({GuardOp::kSymbol, 0, index}, GuardType::kInt);
}

Status GuardBuilder::add_op(GuardOp op, uint32_t arity) {
  if (op == GuardOp::kInt || op == GuardOp::kBool || op == GuardOp::kSymbol) {
    return Status::internal("add_op called with a leaf");
  }
  const Signature sig = signature_of(op);
  if (arity < sig.min_arity || arity > sig.max_arity) {
    std::string want =
        sig.min_arity == sig.max_arity ? std::to_string(sig.min_arity) : "at least " + std::to_string(sig.min_arity);
    return Status::invalid_argument(std::string(guard_op_name(op)) + " takes " + want + " argument(s), got " +
                                    std::to_string(arity));
  }
  if (arity > stack_.size()) return Status::internal("guard builder: operator without its operands");
  const size_t first = stack_.size() - arity;
  uint32_t height = 0;
  const bool equality = op == GuardOp::kEq || op == GuardOp::kNe;
  for (size_t i = first; i < stack_.size(); ++i) {
    const GuardType want = equality ? stack_[first].type : sig.operand;
    if (stack_[i].type != want) {
      if (equality) {
        return Status::invalid_argument(std::string(guard_op_name(op)) +
                                        " compares an integer with a boolean; both operands must have one type");
      }
      return Status::invalid_argument(std::string(guard_op_name(op)) + " needs " + type_name(want) + " operand, got " +
                                      type_name(stack_[i].type));
    }
    height = std::max(height, stack_[i].height);
  }
  // -literal is the negative literal; -(-2**63) does not fit and stays a negation.
  if (op == GuardOp::kNeg && nodes_.back().op == GuardOp::kInt &&
      nodes_.back().value != std::numeric_limits<int64_t>::min()) {
    nodes_.back().value = -nodes_.back().value;
    return Status::ok_status();
  }
  if (height + 1 > k_guard_max_height) {
    return Status::invalid_argument("guard expression is deeper than " + std::to_string(k_guard_max_height));
  }
  if (nodes_.size() >= k_guard_max_nodes) {
    return Status::invalid_argument("guard has more than " + std::to_string(k_guard_max_nodes) + " nodes");
  }
  nodes_.push_back({op, arity, 0});
  stack_.resize(first);
  stack_.push_back({sig.result, height + 1});
  return Status::ok_status();
}

GuardExpr GuardBuilder::finish() && {
  GuardExpr e;
  e.is_bool_ = !stack_.empty() && stack_.back().type == GuardType::kBool;
  e.nodes_ = std::move(nodes_);
  e.num_symbols_ = num_symbols_;
  e.max_stack_ = max_stack_;
  return e;
}

}  // namespace aotcache::internal
