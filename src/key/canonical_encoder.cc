// Canonical encoding: typed, tagged and length-prefixed so that two different inputs never encode alike.
#include "key/canonical_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

namespace aotcache::internal {

uint64_t canonical_float_bits(double f) {
  if (std::isnan(f)) return 0x7ff8000000000000ULL;
  uint64_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

namespace {

// Lengths and counts are u32 on the wire: anything larger must fail, never wrap.
Status check_u32(size_t n, const char* what) {
  if (n > UINT32_MAX) return Status::invalid_argument(std::string(what) + " too large for the encoding");
  return Status();
}

}  // namespace

Status encode_value(const Value& v, int64_t node_limit, ByteWriter* out) {
  switch (v.kind) {
    case Value::Kind::kNone: out->u8(static_cast<uint8_t>(ValueTag::kNone)); return Status();
    case Value::Kind::kBool:
      out->u8(static_cast<uint8_t>(ValueTag::kBool));
      out->u8(v.b ? 1 : 0);
      return Status();
    case Value::Kind::kInt:
      out->u8(static_cast<uint8_t>(ValueTag::kInt));
      out->i64(v.i);
      return Status();
    case Value::Kind::kFloat:
      out->u8(static_cast<uint8_t>(ValueTag::kFloat));
      out->u64(canonical_float_bits(v.f));
      return Status();
    case Value::Kind::kString:
      AOTCACHE_RETURN_IF_ERROR(check_u32(v.s.size(), "string"));
      out->u8(static_cast<uint8_t>(ValueTag::kString));
      out->str(v.s);
      return Status();
    case Value::Kind::kNodeRef:
      if (v.i < 0 || v.i >= node_limit) {
        return Status::invalid_argument("node reference " + std::to_string(v.i) +
                                        " does not point to an earlier node (limit " + std::to_string(node_limit) +
                                        ")");
      }
      out->u8(static_cast<uint8_t>(ValueTag::kNodeRef));
      out->u32(static_cast<uint32_t>(v.i));
      return Status();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kDict: {
      if (v.kind == Value::Kind::kDict && v.items.size() % 2 != 0) {
        return Status::invalid_argument("dict value with an odd number of items");
      }
      AOTCACHE_RETURN_IF_ERROR(check_u32(v.items.size(), "container"));
      ValueTag tag = v.kind == Value::Kind::kList    ? ValueTag::kList
                     : v.kind == Value::Kind::kTuple ? ValueTag::kTuple
                                                     : ValueTag::kDict;
      out->u8(static_cast<uint8_t>(tag));
      out->u32(static_cast<uint32_t>(v.kind == Value::Kind::kDict ? v.items.size() / 2 : v.items.size()));
      for (const Value& item : v.items) AOTCACHE_RETURN_IF_ERROR(encode_value(item, node_limit, out));
      return Status();
    }
    case Value::Kind::kTorchEnum:
      AOTCACHE_RETURN_IF_ERROR(check_u32(v.s.size() + v.name.size(), "torch constant name"));
      out->u8(static_cast<uint8_t>(ValueTag::kTorchEnum));
      out->str(v.s);
      out->str(v.name);
      return Status();
    case Value::Kind::kSlice:
      if (v.items.size() != 3) return Status::invalid_argument("slice value without exactly three items");
      out->u8(static_cast<uint8_t>(ValueTag::kSlice));
      for (const Value& item : v.items) AOTCACHE_RETURN_IF_ERROR(encode_value(item, node_limit, out));
      return Status();
    case Value::Kind::kEllipsis: out->u8(static_cast<uint8_t>(ValueTag::kEllipsis)); return Status();
    case Value::Kind::kSymExpr:
      AOTCACHE_RETURN_IF_ERROR(check_u32(v.s.size(), "symbolic expression"));
      out->u8(static_cast<uint8_t>(ValueTag::kSymExpr));
      out->str(v.s);
      return Status();
  }
  return Status::invalid_argument("value of unknown kind " + std::to_string(static_cast<int>(v.kind)));
}

Status decode_value(ByteReader* in, Value* out, int depth) {
  constexpr int k_max_depth = 64;
  if (depth > k_max_depth) return Status::corruption("value nested deeper than " + std::to_string(k_max_depth));
  uint8_t tag = 0;
  AOTCACHE_RETURN_IF_ERROR(in->u8(&tag));
  switch (static_cast<ValueTag>(tag)) {
    case ValueTag::kNone: *out = Value::none(); return Status();
    case ValueTag::kBool: {
      uint8_t b = 0;
      AOTCACHE_RETURN_IF_ERROR(in->u8(&b));
      if (b > 1) return Status::corruption("bool value " + std::to_string(b));
      *out = Value::boolean(b == 1);
      return Status();
    }
    case ValueTag::kInt: {
      uint64_t u = 0;
      AOTCACHE_RETURN_IF_ERROR(in->u64(&u));
      *out = Value::integer(static_cast<int64_t>(u));
      return Status();
    }
    case ValueTag::kFloat: {
      uint64_t u = 0;
      AOTCACHE_RETURN_IF_ERROR(in->u64(&u));
      double f = 0;
      std::memcpy(&f, &u, sizeof f);
      *out = Value::floating(f);
      return Status();
    }
    case ValueTag::kString: {
      std::string_view s;
      AOTCACHE_RETURN_IF_ERROR(in->str(&s));
      *out = Value::string(std::string(s));
      return Status();
    }
    case ValueTag::kNodeRef: {
      uint32_t pos = 0;
      AOTCACHE_RETURN_IF_ERROR(in->u32(&pos));
      *out = Value::node_ref(pos);
      return Status();
    }
    case ValueTag::kList:
    case ValueTag::kTuple:
    case ValueTag::kDict: {
      uint32_t count = 0;
      AOTCACHE_RETURN_IF_ERROR(in->u32(&count));
      const uint64_t items = static_cast<ValueTag>(tag) == ValueTag::kDict ? 2ULL * count : count;
      // Each item takes at least one byte: a count beyond the remaining bytes is a lie, refuse before allocating.
      if (items > in->remaining()) return Status::corruption("container claims more items than bytes remain");
      std::vector<Value> v(items);
      for (auto& item : v) AOTCACHE_RETURN_IF_ERROR(decode_value(in, &item, depth + 1));
      *out = static_cast<ValueTag>(tag) == ValueTag::kList    ? Value::list(std::move(v))
             : static_cast<ValueTag>(tag) == ValueTag::kTuple ? Value::tuple(std::move(v))
                                                              : Value::dict(std::move(v));
      return Status();
    }
    case ValueTag::kTorchEnum: {
      std::string_view category, name;
      AOTCACHE_RETURN_IF_ERROR(in->str(&category));
      AOTCACHE_RETURN_IF_ERROR(in->str(&name));
      *out = Value::torch_enum(std::string(category), std::string(name));
      return Status();
    }
    case ValueTag::kSlice: {
      Value start, stop, step;
      AOTCACHE_RETURN_IF_ERROR(decode_value(in, &start, depth + 1));
      AOTCACHE_RETURN_IF_ERROR(decode_value(in, &stop, depth + 1));
      AOTCACHE_RETURN_IF_ERROR(decode_value(in, &step, depth + 1));
      *out = Value::slice(std::move(start), std::move(stop), std::move(step));
      return Status();
    }
    case ValueTag::kEllipsis: *out = Value::ellipsis(); return Status();
    case ValueTag::kSymExpr: {
      std::string_view expr;
      AOTCACHE_RETURN_IF_ERROR(in->str(&expr));
      *out = Value::sym_expr(std::string(expr));
      return Status();
    }
  }
  return Status::corruption("unknown value tag " + std::to_string(tag));
}

void encode_tensor_meta(const TensorMeta& m, ByteWriter* out) {
  out->str(m.tensor_type);
  out->str(m.dtype);
  out->str(m.device);
  out->str(m.layout);
  out->u32(static_cast<uint32_t>(m.sizes.size()));
  for (int64_t s : m.sizes) out->i64(s);
  out->u32(static_cast<uint32_t>(m.strides.size()));
  for (int64_t s : m.strides) out->i64(s);
  out->i64(m.storage_offset);
  out->u8(m.requires_grad ? 1 : 0);
  out->u8(m.is_pinned ? 1 : 0);
  out->u8(m.is_inference ? 1 : 0);
}

namespace {

// Like encode_tensor_meta with the size, stride and offset expressions in place of the example's values.
Status encode_symbolic_tensor_meta(const TensorMeta& m, ByteWriter* out) {
  if (m.size_exprs.size() != m.sizes.size() || m.stride_exprs.size() != m.strides.size() ||
      m.storage_offset_expr.empty()) {
    return Status::invalid_argument("a symbolic tensor needs one expression per size and stride and its offset");
  }
  out->str(m.tensor_type);
  out->str(m.dtype);
  out->str(m.device);
  out->str(m.layout);
  out->u32(static_cast<uint32_t>(m.size_exprs.size()));
  for (const std::string& e : m.size_exprs) out->str(e);
  out->u32(static_cast<uint32_t>(m.stride_exprs.size()));
  for (const std::string& e : m.stride_exprs) out->str(e);
  out->str(m.storage_offset_expr);
  out->u8(m.requires_grad ? 1 : 0);
  out->u8(m.is_pinned ? 1 : 0);
  out->u8(m.is_inference ? 1 : 0);
  return Status();
}

}  // namespace

Result<std::vector<int32_t>> canonical_alias_groups(const std::vector<InputMeta>& inputs) {
  struct Group {
    int32_t canonical;
    int64_t nbytes;
    size_t members;
  };
  std::map<int32_t, Group> groups;
  std::vector<int32_t> out(inputs.size(), -1);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].tensor.has_value()) continue;
    const TensorMeta& m = *inputs[k].tensor;
    auto invalid = [k](const std::string& what) {
      return Status::invalid_argument("input " + std::to_string(k) + what);
    };
    if (m.alias_group < -1) return invalid(" has alias group " + std::to_string(m.alias_group));
    if (m.alias_group == -1) {
      if (m.is_aliased()) return invalid(" has alias fields but no alias group");
      continue;
    }
    if (m.alias_storage_nbytes <= 0) return invalid(" shares a storage of no bytes");
    auto [it, added] = groups.try_emplace(m.alias_group, Group{static_cast<int32_t>(groups.size()), 0, 0});
    if (added) it->second.nbytes = m.alias_storage_nbytes;
    if (it->second.nbytes != m.alias_storage_nbytes) {
      return invalid(" disagrees with its alias group on the storage size");
    }
    ++it->second.members;
    out[k] = it->second.canonical;
  }
  for (const auto& [number, group] : groups) {
    if (group.members < 2) return Status::invalid_argument("alias group " + std::to_string(number) + " has one input");
  }
  return out;
}

namespace {

// 'N' for an input that shares its storage with no other input, else 'A', its canonical group, the storage size and
// its view base ('V' with the base's sizes, strides and offset, or 'N').
void encode_alias(const TensorMeta& m, int32_t group, ByteWriter* out) {
  if (group < 0) {
    out->u8('N');
    return;
  }
  out->u8('A');
  out->u32(static_cast<uint32_t>(group));
  out->i64(m.alias_storage_nbytes);
  if (!m.alias_base.has_value()) {
    out->u8('N');
    return;
  }
  out->u8('V');
  out->u32(static_cast<uint32_t>(m.alias_base->sizes.size()));
  for (int64_t s : m.alias_base->sizes) out->i64(s);
  out->u32(static_cast<uint32_t>(m.alias_base->strides.size()));
  for (int64_t s : m.alias_base->strides) out->i64(s);
  out->i64(m.alias_base->storage_offset);
}

}  // namespace

Status encode_inputs(const std::vector<InputMeta>& inputs, ByteWriter* out) {
  AOTCACHE_ASSIGN_OR_RETURN(const std::vector<int32_t> groups, canonical_alias_groups(inputs));
  out->u32(static_cast<uint32_t>(inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const InputMeta& in = inputs[k];
    if (in.tensor.has_value() && in.tensor->is_symbolic()) {
      out->u8('D');
      AOTCACHE_RETURN_IF_ERROR(encode_symbolic_tensor_meta(*in.tensor, out));
      encode_alias(*in.tensor, groups[k], out);
    } else if (in.tensor.has_value()) {
      out->u8('T');
      encode_tensor_meta(*in.tensor, out);
      encode_alias(*in.tensor, groups[k], out);
    } else {
      out->u8('S');
      AOTCACHE_RETURN_IF_ERROR(encode_value(in.scalar, 0, out));
    }
  }
  return Status();
}

namespace {

// u32 count, then (str name, value) sorted by name; a repeated name is an error.
Status encode_named_values(const std::vector<std::pair<std::string, Value>>& values, int64_t limit,
                           const std::string& node_name, const char* what, ByteWriter* out) {
  std::vector<const std::pair<std::string, Value>*> sorted;
  sorted.reserve(values.size());
  for (const auto& kv : values) sorted.push_back(&kv);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (size_t k = 1; k < sorted.size(); ++k) {
    if (sorted[k]->first == sorted[k - 1]->first) {
      return Status::invalid_argument("node " + node_name + " has the " + what + " '" + sorted[k]->first + "' twice");
    }
  }
  AOTCACHE_RETURN_IF_ERROR(check_u32(sorted.size(), what));
  out->u32(static_cast<uint32_t>(sorted.size()));
  for (const auto* kv : sorted) {
    AOTCACHE_RETURN_IF_ERROR(check_u32(kv->first.size(), what));
    out->str(kv->first);
    AOTCACHE_RETURN_IF_ERROR(encode_value(kv->second, limit, out));
  }
  return Status();
}

}  // namespace

namespace {

Status encode_graph_at_depth(const Graph& graph, int depth, ByteWriter* out);

}  // namespace

Status encode_graph(const Graph& graph, ByteWriter* out) {
  return encode_graph_at_depth(graph, 0, out);
}

namespace {

// Subgraphs nest (a checkpointed body holding a cond); a bound keeps hostile or cyclic-looking input finite.
constexpr int k_max_subgraph_depth = 32;

Status encode_graph_at_depth(const Graph& graph, int depth, ByteWriter* out) {
  if (depth > k_max_subgraph_depth) {
    return Status::invalid_argument("subgraphs nested deeper than " + std::to_string(k_max_subgraph_depth));
  }
  AOTCACHE_RETURN_IF_ERROR(check_u32(graph.nodes.size(), "graph"));
  out->u32(static_cast<uint32_t>(graph.nodes.size()));
  for (size_t pos = 0; pos < graph.nodes.size(); ++pos) {
    const Node& n = graph.nodes[pos];
    const auto limit = static_cast<int64_t>(pos);
    out->u8(static_cast<uint8_t>(n.op));
    out->u8(static_cast<uint8_t>(n.target_kind));
    // Placeholder targets are argument names and get_attr targets of constants are attribute names: both are
    // identified by position (and the constant by its content), never by name.
    // A subgraph is identified by its content, encoded after the node (its attribute name is Dynamo's choice).
    const bool named_by_user = n.op == NodeOp::kPlaceholder || (n.op == NodeOp::kGetAttr && n.constant_meta) ||
                               n.target_kind == TargetKind::kSubgraph;
    AOTCACHE_RETURN_IF_ERROR(check_u32(n.target.size(), "target"));
    out->str(named_by_user ? std::string_view() : std::string_view(n.target));
    AOTCACHE_RETURN_IF_ERROR(check_u32(n.args.size(), "argument list"));
    out->u32(static_cast<uint32_t>(n.args.size()));
    for (const Value& a : n.args) AOTCACHE_RETURN_IF_ERROR(encode_value(a, limit, out));
    // kwargs and meta are by name: their order carries no meaning, so they are sorted.
    AOTCACHE_RETURN_IF_ERROR(encode_named_values(n.kwargs, limit, n.name, "keyword argument", out));
    AOTCACHE_RETURN_IF_ERROR(encode_named_values(n.meta, limit, n.name, "meta key", out));
    out->u8(n.constant_meta.has_value() ? 1 : 0);
    if (n.constant_meta.has_value()) {
      if (n.constant_meta->is_aliased()) {
        return Status::invalid_argument("constant " + n.name + " has alias fields: only inputs share storages");
      }
      encode_tensor_meta(*n.constant_meta, out);
      out->str(n.constant_digest);
    }
    // Only subgraph nodes carry this part, so graphs without higher-order ops encode as in schema v1 (the
    // target-kind byte above already tells a decoder whether it follows).
    if (n.target_kind == TargetKind::kSubgraph) {
      if (n.subgraphs.size() != 1) {
        return Status::invalid_argument("subgraph node " + n.name + " must hold exactly one graph, holds " +
                                        std::to_string(n.subgraphs.size()));
      }
      AOTCACHE_RETURN_IF_ERROR(encode_graph_at_depth(n.subgraphs[0], depth + 1, out));
    } else if (!n.subgraphs.empty()) {
      return Status::invalid_argument("node " + n.name + " holds a subgraph but is not a subgraph node");
    }
  }
  return Status();
}

}  // namespace

}  // namespace aotcache::internal
