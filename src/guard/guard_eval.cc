// Evaluation of a parsed guard: one pass over the postfix nodes with a value stack. Every arithmetic step is
// checked (overflow, zero divisors, negative exponents), and an error travels as a value so that And/Or can be
// order-independent: a false operand decides And even when another operand errs.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "aotcache/guard.h"
#include "guard/guard_builder.h"

namespace aotcache {
namespace {

enum class Err : uint8_t { kNone, kOverflow, kDivisionByZero, kModuloByZero, kNegativeExponent, kNotIntegral };

struct Value {
  int64_t v;
  Err err;
  uint32_t node;  // where err arose
};

constexpr int64_t k_min = std::numeric_limits<int64_t>::min();

Err floor_div(int64_t a, int64_t b, int64_t* out) {
  if (b == 0) return Err::kDivisionByZero;
  if (a == k_min && b == -1) return Err::kOverflow;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  *out = q;
  return Err::kNone;
}

// Python's a % b: the result takes the divisor's sign.
Err py_mod(int64_t a, int64_t b, int64_t* out) {
  if (b == 0) return Err::kModuloByZero;
  if (b == -1) {  // a % -1 == 0, and INT64_MIN % -1 is undefined in C++
    *out = 0;
    return Err::kNone;
  }
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  *out = r;
  return Err::kNone;
}

Err power(int64_t base, int64_t exp, int64_t* out) {
  if (exp < 0) return Err::kNegativeExponent;
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Err::kOverflow;
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return Err::kOverflow;
  }
  *out = result;
  return Err::kNone;
}

Err int_true_div(int64_t a, int64_t b, int64_t* out) {
  if (b == 0) return Err::kDivisionByZero;
  if (a == k_min && b == -1) return Err::kOverflow;
  if (a % b != 0) return Err::kNotIntegral;
  *out = a / b;
  return Err::kNone;
}

Err binary(GuardOp op, int64_t a, int64_t b, int64_t* out) {
  switch (op) {
    case GuardOp::kAdd: return __builtin_add_overflow(a, b, out) ? Err::kOverflow : Err::kNone;
    case GuardOp::kSub: return __builtin_sub_overflow(a, b, out) ? Err::kOverflow : Err::kNone;
    case GuardOp::kMul: return __builtin_mul_overflow(a, b, out) ? Err::kOverflow : Err::kNone;
    case GuardOp::kFloorDiv: return floor_div(a, b, out);
    case GuardOp::kMod: return py_mod(a, b, out);
    case GuardOp::kPow: return power(a, b, out);
    case GuardOp::kIntTrueDiv: return int_true_div(a, b, out);
    case GuardOp::kEq: *out = a == b; return Err::kNone;
    case GuardOp::kNe: *out = a != b; return Err::kNone;
    case GuardOp::kLt: *out = a < b; return Err::kNone;
    case GuardOp::kLe: *out = a <= b; return Err::kNone;
    case GuardOp::kGt: *out = a > b; return Err::kNone;
    case GuardOp::kGe: *out = a >= b; return Err::kNone;
    default: return Err::kOverflow;  // unreachable: the builder admits no other binary operator
  }
}

std::string describe(Err err, GuardOp op) {
  const std::string name = internal::guard_op_name(op);
  switch (err) {
    case Err::kOverflow: return "integer overflow in " + name;
    case Err::kDivisionByZero: return "division by zero in " + name;
    case Err::kModuloByZero: return "modulo by zero in " + name;
    case Err::kNegativeExponent: return "negative exponent in " + name;
    case Err::kNotIntegral: return "non-integral result of " + name;
    case Err::kNone: break;
  }
  return "no error";
}

// Runs the program over `stack` (at least expr.max_stack() values).
Result<int64_t> run(const GuardExpr& expr, std::span<const int64_t> values, Value* stack) {
  if (values.size() < expr.num_symbols()) {
    return Status::invalid_argument("guard uses s" + std::to_string(expr.num_symbols() - 1) + " but only " +
                                    std::to_string(values.size()) + " symbol values were given");
  }
  const std::vector<GuardNode>& nodes = expr.nodes();
  if (nodes.empty()) return Status::invalid_argument("empty guard expression");
  size_t sp = 0;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const GuardNode& n = nodes[i];
    switch (n.op) {
      case GuardOp::kInt:
      case GuardOp::kBool: stack[sp++] = {n.value, Err::kNone, i}; continue;
      case GuardOp::kSymbol: stack[sp++] = {values[static_cast<size_t>(n.value)], Err::kNone, i}; continue;
      default: break;
    }
    Value* args = stack + (sp - n.arity);
    Value out{0, Err::kNone, i};
    switch (n.op) {
      case GuardOp::kAnd:
      case GuardOp::kOr: {
        // The deciding value (false for And, true for Or) wins over errors; otherwise the first error.
        const int64_t decider = n.op == GuardOp::kAnd ? 0 : 1;
        out.v = 1 - decider;
        const Value* first_err = nullptr;
        for (uint32_t k = 0; k < n.arity; ++k) {
          if (args[k].err != Err::kNone) {
            if (first_err == nullptr) first_err = &args[k];
          } else if (args[k].v == decider) {
            out.v = decider;
          }
        }
        if (out.v != decider && first_err != nullptr) out = *first_err;
        break;
      }
      default: {
        // Every other operator propagates the first error among its operands.
        const Value* first_err = nullptr;
        for (uint32_t k = 0; k < n.arity && first_err == nullptr; ++k) {
          if (args[k].err != Err::kNone) first_err = &args[k];
        }
        if (first_err != nullptr) {
          out = *first_err;
          break;
        }
        switch (n.op) {
          case GuardOp::kNeg:
            if (__builtin_sub_overflow(int64_t{0}, args[0].v, &out.v)) out.err = Err::kOverflow;
            break;
          case GuardOp::kAbs:
            if (args[0].v == k_min) {
              out.err = Err::kOverflow;
            } else {
              out.v = args[0].v < 0 ? -args[0].v : args[0].v;
            }
            break;
          case GuardOp::kNot: out.v = args[0].v == 0 ? 1 : 0; break;
          case GuardOp::kMin:
          case GuardOp::kMax:
            out.v = args[0].v;
            for (uint32_t k = 1; k < n.arity; ++k) {
              const bool better = n.op == GuardOp::kMin ? args[k].v < out.v : args[k].v > out.v;
              if (better) out.v = args[k].v;
            }
            break;
          default: out.err = binary(n.op, args[0].v, args[1].v, &out.v); break;
        }
      }
    }
    sp -= n.arity;
    stack[sp++] = out;
  }
  const Value& result = stack[0];
  if (result.err != Err::kNone) {
    return Status::invalid_argument("guard evaluation: " + describe(result.err, nodes[result.node].op));
  }
  return result.v;
}

constexpr size_t k_inline_stack = 64;

Result<int64_t> evaluate(const GuardExpr& expr, std::span<const int64_t> values) {
  if (expr.max_stack() <= k_inline_stack) {
    Value stack[k_inline_stack];
    return run(expr, values, stack);
  }
  std::vector<Value> stack(expr.max_stack());
  return run(expr, values, stack.data());
}

}  // namespace

Result<bool> evaluate_guard(const GuardExpr& expr, std::span<const int64_t> symbol_values) {
  if (!expr.is_bool()) return Status::invalid_argument("guard is an integer expression, not a condition");
  AOTCACHE_ASSIGN_OR_RETURN(int64_t v, evaluate(expr, symbol_values));
  return v != 0;
}

Result<int64_t> evaluate_guard_int(const GuardExpr& expr, std::span<const int64_t> symbol_values) {
  if (expr.is_bool()) return Status::invalid_argument("expression is a condition, not an integer");
  return evaluate(expr, symbol_values);
}

}  // namespace aotcache
