// The canonical byte encoding of IR values, tensor metadata, nodes and graphs (docs/formats/key-encoding.md).
// Names are never encoded: nodes are referred to by position, so renaming a variable keeps the key.
#pragma once

#include <string>

#include "aotcache/ir.h"
#include "aotcache/status.h"
#include "base/bytes.h"

namespace aotcache::internal {

// Value tags, one byte each. Never reuse a number; add new kinds at the end.
enum class ValueTag : uint8_t {
  kNone = 0x00,
  kBool = 0x01,
  kInt = 0x02,
  kFloat = 0x03,
  kString = 0x04,
  kNodeRef = 0x05,
  kList = 0x06,
  kTuple = 0x07,
  kDict = 0x08,
  kTorchEnum = 0x09,
  kSlice = 0x0a,
  kEllipsis = 0x0b,
  kSymExpr = 0x0c,
};

// `node_limit`: node references must be < node_limit (the position of the node being encoded).
[[nodiscard]] Status encode_value(const Value& v, int64_t node_limit, ByteWriter* out);
void encode_tensor_meta(const TensorMeta& m, ByteWriter* out);
[[nodiscard]] Status encode_inputs(const std::vector<InputMeta>& inputs, ByteWriter* out);

// Each input's alias group renumbered 0, 1, ... by first appearance (-1 stays -1, as for scalars), so that the key
// holds the partition of the inputs by storage, not the producer's numbers. InvalidArgument for a group number below
// -1, a group of a single input, a group whose inputs disagree on the storage size or have none, and alias fields
// on an input outside any group.
[[nodiscard]] Result<std::vector<int32_t>> canonical_alias_groups(const std::vector<InputMeta>& inputs);
[[nodiscard]] Status encode_graph(const Graph& graph, ByteWriter* out);

// Reads one value written by encode_value. Bounds-checked, with a nesting limit, so untrusted bytes fail with
// Corruption instead of crashing or exhausting memory.
[[nodiscard]] Status decode_value(ByteReader* in, Value* out, int depth = 0);

// The IEEE-754 bits with every NaN mapped to the one quiet NaN 0x7ff8000000000000; -0.0 stays distinct from 0.0.
uint64_t canonical_float_bits(double f);

}  // namespace aotcache::internal
