// Builds a GuardExpr in postfix order, node by node, checking operand types, arities and the size limits as it goes;
// the parser is its only producer (tests build expressions by parsing text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aotcache/guard.h"
#include "aotcache/status.h"

namespace aotcache::internal {

enum class GuardType : uint8_t { kInt, kBool };

// Operator names as the parser's error messages and the printer spell them.
const char* guard_op_name(GuardOp op);

class GuardBuilder {
 public:
  // Leaves.
  Status add_int(int64_t value);
  Status add_bool(bool value);
  Status add_symbol(uint32_t index);
  // An operator over the `arity` subtrees added last. Unary minus of an integer literal folds into the literal
  // (except -(-2**63), which stays a negation and overflows when evaluated), so "-5" is the literal -5.
  Status add_op(GuardOp op, uint32_t arity);

  // The number of complete subtrees added and not yet consumed.
  size_t pending() const { return stack_.size(); }
  GuardType type_of_last() const { return stack_.back().type; }

  // REQUIRES: pending() == 1.
  GuardExpr finish() &&;

 private:
  struct Subtree {
    GuardType type;
    uint32_t height;
  };
  Status push_leaf(GuardNode node, GuardType type);

  std::vector<GuardNode> nodes_;
  std::vector<Subtree> stack_;
  size_t max_stack_ = 0;
  size_t num_symbols_ = 0;
};

}  // namespace aotcache::internal
