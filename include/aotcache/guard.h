// Shape guards of cache entries with symbolic sizes: the text torch's sympy printer produces for each ShapeEnv guard
// (symbols renamed s0, s1, ...), parsed once into a typed postfix program and evaluated against concrete sizes.
// Stored guards are data: nothing here ever runs Python. The format is specified in docs/formats/guard-format.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aotcache/status.h"

namespace aotcache {

namespace internal {
class GuardBuilder;
}  // namespace internal

// The version of the guard text format (docs/formats/guard-format.md); an entry stores it beside its guards. A reader
// that meets a larger version treats the entry's guards as unsupported (a miss), never as true.
inline constexpr int k_guards_version = 1;

// Limits of parse_guard; inputs beyond them are rejected (kInvalidArgument) before any deep work is done.
inline constexpr size_t k_guard_max_text_bytes = 64 * 1024;
inline constexpr size_t k_guard_max_nesting = 100;  // nested parentheses, calls and unary operators
inline constexpr size_t k_guard_max_nodes = 4096;
inline constexpr size_t k_guard_max_height = 512;         // of the expression tree (bounds the printer's recursion)
inline constexpr uint32_t k_guard_max_symbol = 1u << 20;  // s0 .. s1048575

enum class GuardOp : uint8_t {
  // Leaves.
  kInt,     // value: the integer
  kBool,    // value: 0 or 1
  kSymbol,  // value: the symbol index i of s<i>
  // Integer operators (integer operands).
  kNeg,
  kAdd,
  kSub,
  kMul,
  kFloorDiv,    // a // b, FloorDiv, CleanDiv: floor division
  kMod,         // a % b, Mod, PythonMod: result has the divisor's sign
  kPow,         // a ** b, b >= 0
  kIntTrueDiv,  // IntTrueDiv(a, b): a / b where that is an integer, else an evaluation error
  kMin,         // n-ary, n >= 1
  kMax,         // n-ary, n >= 1
  kAbs,
  // Comparisons (integer operands; kEq and kNe also compare two booleans) -> boolean.
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  // Logical operators (boolean operands).
  kAnd,  // n-ary, n >= 1
  kOr,   // n-ary, n >= 1
  kNot,
};

// One node of a guard in postfix order: its operands are the `arity` subtrees right before it.
struct GuardNode {
  GuardOp op = GuardOp::kInt;
  uint32_t arity = 0;
  int64_t value = 0;  // leaves only

  bool operator==(const GuardNode&) const = default;
};

// A parsed guard: a well-typed expression tree in postfix order. Two GuardExprs are equal iff their trees are.
class GuardExpr {
 public:
  const std::vector<GuardNode>& nodes() const { return nodes_; }
  // 1 + the largest symbol index used, 0 when there is none: evaluation needs this many values.
  size_t num_symbols() const { return num_symbols_; }
  // Whether the expression is boolean (every guard from parse_guard is).
  bool is_bool() const { return is_bool_; }
  // The most operands evaluation holds at once.
  size_t max_stack() const { return max_stack_; }

  bool operator==(const GuardExpr& other) const { return nodes_ == other.nodes_; }

 private:
  friend class internal::GuardBuilder;
  std::vector<GuardNode> nodes_;
  size_t num_symbols_ = 0;
  size_t max_stack_ = 0;
  bool is_bool_ = false;
};

// Parses one guard as torch prints it (`str(expr)` of a ShapeEnv guard, symbols s<i>): the grammar of
// docs/formats/guard-format.md. The result is boolean. Errors:
//  - kInvalidArgument: malformed text (syntax, types, a literal beyond int64, unknown function or identifier) or
//    a limit exceeded; the message gives the byte offset.
//  - kUnsupported: well-formed torch output aotcache does not evaluate (unbacked symbols u<i>, float literals,
//    true division, Piecewise, float functions such as FloorToInt); the message names the construct.
// Either way the entry must not be stored with these guards (bypass the cache for the graph).
Result<GuardExpr> parse_guard(std::string_view text);

// As parse_guard, for an integer expression ("s0*s1 + 1"); for tests and tooling.
Result<GuardExpr> parse_guard_int(std::string_view text);

// The value of a boolean guard when s<i> = symbol_values[i]. 64-bit integer arithmetic; overflow, division or
// modulo by zero, a negative exponent and a non-integral IntTrueDiv are errors (kInvalidArgument), never wrapped or
// undefined. And/Or are order-independent: And is false if any operand is false (even if another errs), else an
// error if any operand errs; Or likewise with true. Errors: kInvalidArgument also when
// symbol_values.size() < expr.num_symbols(). Thread-safe; allocates nothing unless it fails or max_stack() > 64.
Result<bool> evaluate_guard(const GuardExpr& expr, std::span<const int64_t> symbol_values);
// As evaluate_guard, for an integer expression (from parse_guard_int).
Result<int64_t> evaluate_guard_int(const GuardExpr& expr, std::span<const int64_t> symbol_values);

// The canonical text of a guard: parse_guard(to_string(e)) == e for every e from parse_guard. It follows sympy's
// printing where torch's output is canonical already (Eq(Mod(s0, 8), 0), 2 <= s0, (s0//2), -s0 + 5, Max(1, s0)), so
// most torch guards print back unchanged; `%` prints as Mod(a, b), PythonMod as Mod, CleanDiv as (a//b).
std::string to_string(const GuardExpr& expr);

// The guards of one cache entry, parsed once.
class GuardSet {
 public:
  // Parses every guard; the error names the index and text of the first one that fails to parse.
  static Result<GuardSet> parse(std::span<const std::string> texts);

  size_t size() const { return guards_.size(); }
  const std::vector<GuardExpr>& guards() const { return guards_; }
  // 1 + the largest symbol index over all guards.
  size_t num_symbols() const { return num_symbols_; }

  // The index of the first guard (in stored order) that does not hold, nullopt when all hold. An evaluation error
  // of a guard is returned as that error (prefixed with the guard's index); callers treat it as a miss.
  Result<std::optional<size_t>> first_failing(std::span<const int64_t> symbol_values) const;

 private:
  std::vector<GuardExpr> guards_;
  size_t num_symbols_ = 0;
};

// Lookup among the entries of one key: the index of the first entry whose guards all hold, nullopt when none does.
// An entry whose guards fail to evaluate (overflow, division by zero) does not match. Errors: kInvalidArgument when
// an entry needs more symbols than symbol_values holds (the caller passed sizes of a different graph).
Result<std::optional<size_t>> first_matching_entry(std::span<const GuardSet> entries,
                                                   std::span<const int64_t> symbol_values);

}  // namespace aotcache
