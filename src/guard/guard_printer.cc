// Canonical text of a guard. Parentheses follow Python's precedence (which the parser implements), plus the extra
// ones sympy prints around FloorDiv and Mod, so that torch's own guard text usually prints back unchanged.
#include <string>
#include <vector>

#include "aotcache/guard.h"

namespace aotcache {
namespace {

// Python precedence levels, low to high.
constexpr int k_compare = 1;
constexpr int k_or = 2;
constexpr int k_and = 3;
constexpr int k_sum = 4;
constexpr int k_term = 5;
constexpr int k_unary = 6;
constexpr int k_power = 7;
constexpr int k_atom = 8;

class Printer {
 public:
  explicit Printer(const std::vector<GuardNode>& nodes) : nodes_(nodes), start_(nodes.size()) {
    // start_[i]: the index of the first node of the subtree rooted at i (postfix: the subtree is [start_[i], i]).
    std::vector<size_t> stack;
    for (size_t i = 0; i < nodes.size(); ++i) {
      size_t start = i;
      for (uint32_t k = 0; k < nodes[i].arity; ++k) {
        start = stack.back();
        stack.pop_back();
      }
      start_[i] = start;
      stack.push_back(start);
    }
  }

  std::string print() {
    if (!nodes_.empty()) print_node(nodes_.size() - 1, 0, Context::kNone);
    return std::move(out_);
  }

 private:
  enum class Context { kNone, kInfix, kMul, kFloorDivOperand, kLogical };

  // The roots of the operands of node i, in order.
  std::vector<size_t> operands(size_t i) const {
    std::vector<size_t> r(nodes_[i].arity);
    size_t end = i;  // operands end right before i
    for (size_t k = r.size(); k-- > 0;) {
      r[k] = end - 1;
      end = start_[end - 1];
    }
    return r;
  }

  int level(size_t i) const {
    const GuardNode& n = nodes_[i];
    switch (n.op) {
      case GuardOp::kInt: return n.value < 0 ? k_unary : k_atom;
      case GuardOp::kNeg:
      case GuardOp::kNot: return k_unary;
      case GuardOp::kAdd:
      case GuardOp::kSub: return k_sum;
      case GuardOp::kMul: return k_term;
      case GuardOp::kPow: return k_power;
      case GuardOp::kLt:
      case GuardOp::kLe:
      case GuardOp::kGt:
      case GuardOp::kGe: return k_compare;
      case GuardOp::kAnd: return n.arity >= 2 ? k_and : k_atom;
      case GuardOp::kOr: return n.arity >= 2 ? k_or : k_atom;
      default: return k_atom;  // leaves, calls, (a//b)
    }
  }

  // Sympy's extra parentheses: around FloorDiv in any infix or unary context, around Mod as a factor or power
  // operand, around anything but a leaf, Min or Max inside a FloorDiv, around nested And/Or and comparisons in
  // And/Or.
  bool sympy_wraps(size_t i, Context ctx) const {
    const GuardOp op = nodes_[i].op;
    switch (ctx) {
      case Context::kNone: return false;
      case Context::kInfix: return op == GuardOp::kFloorDiv;
      case Context::kMul: return op == GuardOp::kFloorDiv || op == GuardOp::kMod;
      case Context::kFloorDivOperand:
        return !(op == GuardOp::kSymbol || (op == GuardOp::kInt && nodes_[i].value >= 0) || op == GuardOp::kMin ||
                 op == GuardOp::kMax);
      case Context::kLogical: return level(i) < k_unary;
    }
    return false;
  }

  void print_node(size_t i, int min_level, Context ctx) {
    const bool wrap = level(i) < min_level || sympy_wraps(i, ctx);
    if (wrap) out_ += '(';
    print_bare(i);
    if (wrap) out_ += ')';
  }

  void call(const char* name, size_t i) {
    out_ += name;
    out_ += '(';
    const std::vector<size_t> args = operands(i);
    for (size_t k = 0; k < args.size(); ++k) {
      if (k > 0) out_ += ", ";
      print_node(args[k], 0, Context::kNone);
    }
    out_ += ')';
  }

  void infix(size_t i, const char* op, int left_level, int right_level, Context ctx) {
    const std::vector<size_t> args = operands(i);
    print_node(args[0], left_level, ctx);
    out_ += op;
    print_node(args[1], right_level, ctx);
  }

  void print_bare(size_t i) {
    const GuardNode& n = nodes_[i];
    switch (n.op) {
      case GuardOp::kInt: out_ += std::to_string(n.value); return;
      case GuardOp::kBool: out_ += n.value != 0 ? "True" : "False"; return;
      case GuardOp::kSymbol: out_ += "s" + std::to_string(n.value); return;
      case GuardOp::kNeg:
        out_ += '-';
        print_node(operands(i)[0], k_unary, Context::kMul);
        return;
      case GuardOp::kNot:
        out_ += '~';
        print_node(operands(i)[0], k_unary, Context::kInfix);
        return;
      case GuardOp::kAdd: infix(i, " + ", k_sum, k_term, Context::kInfix); return;
      case GuardOp::kSub: infix(i, " - ", k_sum, k_term, Context::kInfix); return;
      case GuardOp::kMul: infix(i, "*", k_term, k_unary, Context::kMul); return;
      case GuardOp::kPow: infix(i, "**", k_atom, k_unary, Context::kMul); return;
      case GuardOp::kLt: infix(i, " < ", k_or, k_or, Context::kInfix); return;
      case GuardOp::kLe: infix(i, " <= ", k_or, k_or, Context::kInfix); return;
      case GuardOp::kGt: infix(i, " > ", k_or, k_or, Context::kInfix); return;
      case GuardOp::kGe: infix(i, " >= ", k_or, k_or, Context::kInfix); return;
      case GuardOp::kFloorDiv: {
        out_ += '(';
        infix(i, "//", k_term, k_unary, Context::kFloorDivOperand);
        out_ += ')';
        return;
      }
      case GuardOp::kMod: call("Mod", i); return;
      case GuardOp::kIntTrueDiv: call("IntTrueDiv", i); return;
      case GuardOp::kMin: call("Min", i); return;
      case GuardOp::kMax: call("Max", i); return;
      case GuardOp::kAbs: call("Abs", i); return;
      case GuardOp::kEq: call("Eq", i); return;
      case GuardOp::kNe: call("Ne", i); return;
      case GuardOp::kAnd:
      case GuardOp::kOr: {
        const bool is_and = n.op == GuardOp::kAnd;
        if (n.arity < 2) {
          call(is_and ? "And" : "Or", i);
          return;
        }
        const std::vector<size_t> args = operands(i);
        for (size_t k = 0; k < args.size(); ++k) {
          if (k > 0) out_ += is_and ? " & " : " | ";
          // Python would accept `a & b | c`; sympy parenthesizes every non-atomic operand.
          print_node(args[k], is_and ? k_sum : k_and, Context::kLogical);
        }
        return;
      }
    }
  }

  const std::vector<GuardNode>& nodes_;
  std::vector<size_t> start_;
  std::string out_;
};

}  // namespace

std::string to_string(const GuardExpr& expr) {
  return Printer(expr.nodes()).print();
}

}  // namespace aotcache
