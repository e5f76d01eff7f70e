// Graph format v2.0 (and v1.x, read): writer and bounds-checked reader. Layout and rules: docs/formats/graph-format.md.
#include <bit>
#include <cstring>
#include <string>

#include "aotcache/serialize.h"
#include "base/bytes.h"
#include "base/sha256.h"

namespace aotcache {
namespace {

using internal::ByteReader;

enum SectionId : uint16_t {
  k_section_strings = 1,
  k_section_inputs = 2,
  k_section_graph = 3,
  k_section_constants = 4,
};
constexpr uint16_t k_section_required = 1;  // section flag: a reader that does not know the id must refuse the graph

constexpr size_t k_header_size = 4 + 2 + 2 + 4;
constexpr size_t k_section_header_size = 2 + 2 + 8;
// op, target kind, flags, name, target, arg/kwarg/meta counts, constant digest, subgraph count.
constexpr size_t k_min_node_size = 3 + 4 + 4 + 4 + 4 + 4 + 4 + 4;
constexpr size_t k_min_tensor_meta_size = 4 * 4 + 4 + 4 + 8 + 1;
constexpr uint8_t k_node_has_constant_meta = 1;
constexpr uint8_t k_input_has_tensor = 1;
constexpr uint8_t k_tensor_requires_grad = 1, k_tensor_is_pinned = 2, k_tensor_is_inference = 4;
constexpr uint8_t k_tensor_symbolic = 8;  // size, stride and offset expressions follow (dynamic shapes)
constexpr uint8_t k_tensor_aliased = 16;  // v2: an alias record follows (inputs sharing one storage)

// Appends little-endian integers; a local writer because this path is hot (10,000-node graphs in about a ms).
class Out {
 public:
  void u8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void raw(std::string_view b) { buf_.append(b.data(), b.size()); }
  std::string& buf() { return buf_; }

 private:
  void le(uint64_t v, int n) {
    char b[8];
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(b, &v, sizeof v);
    } else {
      for (int k = 0; k < n; ++k) b[k] = static_cast<char>((v >> (8 * k)) & 0xff);
    }
    buf_.append(b, static_cast<size_t>(n));
  }
  std::string buf_;
};

Status too_large(const char* what) {
  return Status::invalid_argument(std::string(what) + " too large for the graph format");
}

// Interns strings: index of first use. Open addressing over views into the graph being written; a graph's
// strings are mostly a few targets and dtypes repeated, plus one name per node, so lookups dominate.
class StringTable {
 public:
  // The index of `s`, adding it when new.
  uint32_t intern(std::string_view s) {
    if (s.empty()) {  // every node without a constant has an empty digest
      if (empty_ == 0) empty_ = add(s, 0);
      return empty_ - 1;
    }
    if ((order_.size() + 1) * 2 > slots_.size()) grow();
    const uint64_t h = hash(s);
    const auto tag = static_cast<uint32_t>(h >> 32);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.index == 0) {
        slot = {add(s, tag), tag};
        return slot.index - 1;
      }
      if (slot.tag == tag && order_[slot.index - 1] == s) return slot.index - 1;
    }
  }
  const std::vector<std::string_view>& strings() const { return order_; }

 private:
  struct Slot {
    uint32_t index = 0;  // 0: empty, else index + 1
    uint32_t tag = 0;    // high half of the hash: most mismatches never touch the string
  };

  uint32_t add(std::string_view s, uint32_t tag) {
    order_.push_back(s);
    tags_.push_back(tag);
    return static_cast<uint32_t>(order_.size());
  }
  static uint64_t hash(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ULL ^ s.size();
    size_t k = 0;
    for (; k + 8 <= s.size(); k += 8) {
      uint64_t w = 0;
      std::memcpy(&w, s.data() + k, 8);
      h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
      h ^= h >> 29;
    }
    for (; k < s.size(); ++k) h = (h ^ static_cast<uint8_t>(s[k])) * 0x100000001b3ULL;
    h ^= h >> 32;
    return h * 0xd6e8feb86659fd93ULL;
  }
  void grow() {
    slots_.assign(slots_.empty() ? 256 : slots_.size() * 2, Slot{});
    const size_t mask = slots_.size() - 1;
    for (size_t k = 0; k < order_.size(); ++k) {
      if (order_[k].empty()) continue;  // not in the slots (fast path above)
      size_t i = hash(order_[k]) & mask;
      while (slots_[i].index != 0) i = (i + 1) & mask;
      slots_[i] = {static_cast<uint32_t>(k + 1), tags_[k]};
    }
  }

  std::vector<Slot> slots_;
  std::vector<std::string_view> order_;
  std::vector<uint32_t> tags_;
  uint32_t empty_ = 0;  // index + 1 of "", 0 while unused
};

class Writer {
 public:
  Status inputs(const std::vector<InputMeta>& inputs, Out* out) {
    if (inputs.size() > UINT32_MAX) return too_large("input list");
    out->u32(static_cast<uint32_t>(inputs.size()));
    for (const InputMeta& in : inputs) {
      out->u8(in.tensor.has_value() ? k_input_has_tensor : 0);
      if (in.tensor.has_value()) AOTCACHE_RETURN_IF_ERROR(tensor_meta(*in.tensor, out));
      AOTCACHE_RETURN_IF_ERROR(value(in.scalar, 0, 0, out));
    }
    return Status();
  }

  Status graph(const Graph& g, int depth, Out* out) {
    if (depth > k_graph_max_subgraph_depth) {
      return Status::invalid_argument("subgraphs nested deeper than " + std::to_string(k_graph_max_subgraph_depth));
    }
    nodes_ += g.nodes.size();
    if (nodes_ > k_graph_max_nodes) {
      return Status::invalid_argument("graph has more than " + std::to_string(k_graph_max_nodes) + " nodes");
    }
    out->u32(static_cast<uint32_t>(g.nodes.size()));
    for (size_t pos = 0; pos < g.nodes.size(); ++pos) {
      const Node& n = g.nodes[pos];
      const auto limit = static_cast<int64_t>(pos);
      out->u8(static_cast<uint8_t>(n.op));
      out->u8(static_cast<uint8_t>(n.target_kind));
      if (static_cast<uint8_t>(n.op) > static_cast<uint8_t>(NodeOp::kOutput) ||
          static_cast<uint8_t>(n.target_kind) > static_cast<uint8_t>(TargetKind::kSubgraph)) {
        return Status::invalid_argument("node " + n.name + " has an op or target kind outside the IR");
      }
      out->u8(n.constant_meta.has_value() ? k_node_has_constant_meta : 0);
      AOTCACHE_RETURN_IF_ERROR(str(n.name, out));
      AOTCACHE_RETURN_IF_ERROR(str(n.target, out));
      if (n.args.size() > UINT32_MAX) return too_large("argument list");
      out->u32(static_cast<uint32_t>(n.args.size()));
      for (const Value& a : n.args) AOTCACHE_RETURN_IF_ERROR(value(a, limit, 0, out));
      AOTCACHE_RETURN_IF_ERROR(named(n.kwargs, limit, out));
      AOTCACHE_RETURN_IF_ERROR(named(n.meta, limit, out));
      if (n.constant_meta.has_value()) AOTCACHE_RETURN_IF_ERROR(tensor_meta(*n.constant_meta, out));
      AOTCACHE_RETURN_IF_ERROR(str(n.constant_digest, out));
      out->u32(static_cast<uint32_t>(n.subgraphs.size()));
      for (const Graph& sub : n.subgraphs) AOTCACHE_RETURN_IF_ERROR(graph(sub, depth + 1, out));
    }
    return Status();
  }

  // u32 count || per string: u32 length || bytes, in order of first use.
  Status strings(Out* out) const {
    out->u32(static_cast<uint32_t>(table_.strings().size()));
    for (std::string_view s : table_.strings()) {
      out->u32(static_cast<uint32_t>(s.size()));
      out->raw(s);
    }
    return Status();
  }

 private:
  // A string is written as its u32 index in the string table. The views point into the graph being written.
  Status str(std::string_view s, Out* out) {
    // Indices are u32: the table would need 2^32 distinct strings (64 GiB of views alone) to overflow them.
    if (s.size() > UINT32_MAX) return too_large("string");
    out->u32(table_.intern(s));
    return Status();
  }

  Status tensor_meta(const TensorMeta& m, Out* out) {
    AOTCACHE_RETURN_IF_ERROR(str(m.tensor_type, out));
    AOTCACHE_RETURN_IF_ERROR(str(m.dtype, out));
    AOTCACHE_RETURN_IF_ERROR(str(m.device, out));
    AOTCACHE_RETURN_IF_ERROR(str(m.layout, out));
    if (m.sizes.size() > UINT32_MAX || m.strides.size() > UINT32_MAX) return too_large("tensor rank");
    out->u32(static_cast<uint32_t>(m.sizes.size()));
    for (int64_t s : m.sizes) out->i64(s);
    out->u32(static_cast<uint32_t>(m.strides.size()));
    for (int64_t s : m.strides) out->i64(s);
    out->i64(m.storage_offset);
    const bool symbolic = !m.size_exprs.empty() || !m.stride_exprs.empty() || !m.storage_offset_expr.empty();
    out->u8(static_cast<uint8_t>((m.requires_grad ? k_tensor_requires_grad : 0) |
                                 (m.is_pinned ? k_tensor_is_pinned : 0) | (m.is_inference ? k_tensor_is_inference : 0) |
                                 (symbolic ? k_tensor_symbolic : 0) | (m.is_aliased() ? k_tensor_aliased : 0)));
    if (symbolic) {
      for (const std::vector<std::string>* exprs : {&m.size_exprs, &m.stride_exprs}) {
        if (exprs->size() > UINT32_MAX) return too_large("tensor rank");
        out->u32(static_cast<uint32_t>(exprs->size()));
        for (const std::string& e : *exprs) AOTCACHE_RETURN_IF_ERROR(str(e, out));
      }
      AOTCACHE_RETURN_IF_ERROR(str(m.storage_offset_expr, out));
    }
    if (m.is_aliased()) {
      out->u32(static_cast<uint32_t>(m.alias_group));
      out->i64(m.alias_storage_nbytes);
      out->u8(m.alias_base.has_value() ? 1 : 0);
      if (m.alias_base.has_value()) {
        const AliasBase& b = *m.alias_base;
        if (b.sizes.size() > UINT32_MAX || b.strides.size() > UINT32_MAX) return too_large("tensor rank");
        out->u32(static_cast<uint32_t>(b.sizes.size()));
        for (int64_t d : b.sizes) out->i64(d);
        out->u32(static_cast<uint32_t>(b.strides.size()));
        for (int64_t d : b.strides) out->i64(d);
        out->i64(b.storage_offset);
      }
    }
    return Status();
  }

  Status named(const std::vector<std::pair<std::string, Value>>& values, int64_t limit, Out* out) {
    if (values.size() > UINT32_MAX) return too_large("keyword list");
    out->u32(static_cast<uint32_t>(values.size()));
    for (const auto& [name, v] : values) {
      AOTCACHE_RETURN_IF_ERROR(str(name, out));
      AOTCACHE_RETURN_IF_ERROR(value(v, limit, 0, out));
    }
    return Status();
  }

  Status value(const Value& v, int64_t limit, int depth, Out* out) {
    if (depth > k_graph_max_value_depth) {
      return Status::invalid_argument("value nested deeper than " + std::to_string(k_graph_max_value_depth));
    }
    out->u8(static_cast<uint8_t>(v.kind));
    switch (v.kind) {
      case Value::Kind::kNone:
      case Value::Kind::kEllipsis: return Status();
      case Value::Kind::kBool: out->u8(v.b ? 1 : 0); return Status();
      case Value::Kind::kInt: out->i64(v.i); return Status();
      case Value::Kind::kFloat: {
        uint64_t bits = 0;
        std::memcpy(&bits, &v.f, sizeof bits);  // raw bits: NaN payloads and -0.0 survive
        out->u64(bits);
        return Status();
      }
      case Value::Kind::kString:
      case Value::Kind::kSymExpr: return str(v.s, out);
      case Value::Kind::kNodeRef:
        if (v.i < 0 || v.i >= limit) {
          return Status::invalid_argument("node reference " + std::to_string(v.i) +
                                          " does not point to an earlier node (limit " + std::to_string(limit) + ")");
        }
        out->u32(static_cast<uint32_t>(v.i));
        return Status();
      case Value::Kind::kList:
      case Value::Kind::kTuple:
      case Value::Kind::kDict: {
        if (v.kind == Value::Kind::kDict && v.items.size() % 2 != 0) {
          return Status::invalid_argument("dict value with an odd number of items");
        }
        const size_t count = v.kind == Value::Kind::kDict ? v.items.size() / 2 : v.items.size();
        if (count > UINT32_MAX) return too_large("container");
        out->u32(static_cast<uint32_t>(count));
        for (const Value& item : v.items) AOTCACHE_RETURN_IF_ERROR(value(item, limit, depth + 1, out));
        return Status();
      }
      case Value::Kind::kTorchEnum: AOTCACHE_RETURN_IF_ERROR(str(v.s, out)); return str(v.name, out);
      case Value::Kind::kSlice:
        if (v.items.size() != 3) return Status::invalid_argument("slice value without exactly three items");
        for (const Value& item : v.items) AOTCACHE_RETURN_IF_ERROR(value(item, limit, depth + 1, out));
        return Status();
    }
    return Status::invalid_argument("value of unknown kind " + std::to_string(static_cast<int>(v.kind)));
  }

  StringTable table_;
  uint64_t nodes_ = 0;
};

void section(uint16_t id, uint16_t flags, std::string_view body, Out* out) {
  out->u16(id);
  out->u16(flags);
  out->u64(body.size());
  out->raw(body);
}

// ---- reader ----

Status corrupt(const std::string& what) {
  return Status::corruption(what);
}

class Reader {
 public:
  Reader(uint64_t budget, uint16_t major) : budget_(budget), major_(major) {}

  // The table holds views into the input: a string is copied only where a node or value refers to it.
  Status strings(ByteReader* r) {
    uint32_t count = 0;
    AOTCACHE_RETURN_IF_ERROR(r->u32(&count));
    if (count > r->remaining() / 4) return corrupt("string table claims more strings than bytes remain");
    AOTCACHE_RETURN_IF_ERROR(charge(uint64_t{count} * sizeof(std::string_view)));
    strings_.reserve(count);
    for (uint32_t k = 0; k < count; ++k) {
      std::string_view s;
      AOTCACHE_RETURN_IF_ERROR(r->str(&s));
      strings_.push_back(s);
    }
    return Status();
  }

  Status inputs(ByteReader* r, std::vector<InputMeta>* out) {
    uint32_t count = 0;
    AOTCACHE_RETURN_IF_ERROR(r->u32(&count));
    if (count > r->remaining() / 2) return corrupt("input list claims more inputs than bytes remain");
    AOTCACHE_RETURN_IF_ERROR(charge(uint64_t{count} * sizeof(InputMeta)));
    out->resize(count);
    for (InputMeta& in : *out) {
      uint8_t flags = 0;
      AOTCACHE_RETURN_IF_ERROR(r->u8(&flags));
      if ((flags & ~k_input_has_tensor) != 0) return corrupt("input flags " + std::to_string(flags));
      if (flags & k_input_has_tensor) {
        in.tensor.emplace();
        AOTCACHE_RETURN_IF_ERROR(tensor_meta(r, &*in.tensor));
      }
      AOTCACHE_RETURN_IF_ERROR(value(r, 0, 0, &in.scalar));
    }
    return Status();
  }

  Status graph(ByteReader* r, int depth, Graph* out) {
    if (depth > k_graph_max_subgraph_depth) {
      return corrupt("subgraphs nested deeper than " + std::to_string(k_graph_max_subgraph_depth));
    }
    uint32_t count = 0;
    AOTCACHE_RETURN_IF_ERROR(r->u32(&count));
    if (count > r->remaining() / k_min_node_size) return corrupt("graph claims more nodes than bytes remain");
    nodes_ += count;
    if (nodes_ > k_graph_max_nodes)
      return corrupt("graph has more than " + std::to_string(k_graph_max_nodes) + " nodes");
    AOTCACHE_RETURN_IF_ERROR(charge(uint64_t{count} * sizeof(Node)));
    out->nodes.resize(count);
    for (uint32_t pos = 0; pos < count; ++pos) {
      Node& n = out->nodes[pos];
      uint8_t op = 0, kind = 0, flags = 0;
      AOTCACHE_RETURN_IF_ERROR(r->u8(&op));
      AOTCACHE_RETURN_IF_ERROR(r->u8(&kind));
      AOTCACHE_RETURN_IF_ERROR(r->u8(&flags));
      if (op > static_cast<uint8_t>(NodeOp::kOutput)) return corrupt("node op " + std::to_string(op));
      if (kind > static_cast<uint8_t>(TargetKind::kSubgraph)) return corrupt("target kind " + std::to_string(kind));
      if ((flags & ~k_node_has_constant_meta) != 0) return corrupt("node flags " + std::to_string(flags));
      n.op = static_cast<NodeOp>(op);
      n.target_kind = static_cast<TargetKind>(kind);
      AOTCACHE_RETURN_IF_ERROR(str(r, &n.name));
      AOTCACHE_RETURN_IF_ERROR(str(r, &n.target));
      uint32_t nargs = 0;
      AOTCACHE_RETURN_IF_ERROR(r->u32(&nargs));
      AOTCACHE_RETURN_IF_ERROR(values(r, nargs, pos, &n.args));
      AOTCACHE_RETURN_IF_ERROR(named(r, pos, &n.kwargs));
      AOTCACHE_RETURN_IF_ERROR(named(r, pos, &n.meta));
      if (flags & k_node_has_constant_meta) {
        n.constant_meta.emplace();
        AOTCACHE_RETURN_IF_ERROR(tensor_meta(r, &*n.constant_meta));
      }
      AOTCACHE_RETURN_IF_ERROR(str(r, &n.constant_digest));
      uint32_t subgraphs = 0;
      AOTCACHE_RETURN_IF_ERROR(r->u32(&subgraphs));
      if (subgraphs > r->remaining() / 4) return corrupt("node claims more subgraphs than bytes remain");
      AOTCACHE_RETURN_IF_ERROR(charge(uint64_t{subgraphs} * sizeof(Graph)));
      n.subgraphs.resize(subgraphs);
      for (Graph& sub : n.subgraphs) AOTCACHE_RETURN_IF_ERROR(graph(r, depth + 1, &sub));
    }
    return Status();
  }

  // u32 count || per constant: 32-byte digest || u64 length || bytes. The bytes must hash to the digest.
  Status constants(ByteReader* r, std::map<std::string, std::string>* out) {
    uint32_t count = 0;
    AOTCACHE_RETURN_IF_ERROR(r->u32(&count));
    if (count > r->remaining() / (internal::k_digest_size + 8)) {
      return corrupt("constants section claims more constants than bytes remain");
    }
    for (uint32_t k = 0; k < count; ++k) {
      std::string_view digest, bytes;
      uint64_t len = 0;
      AOTCACHE_RETURN_IF_ERROR(r->raw(internal::k_digest_size, &digest));
      AOTCACHE_RETURN_IF_ERROR(r->u64(&len));
      if (len > r->remaining()) return corrupt("constant longer than its section");
      AOTCACHE_RETURN_IF_ERROR(r->raw(static_cast<size_t>(len), &bytes));
      if (internal::sha256(bytes) != digest) return corrupt("constant bytes do not hash to their digest");
      AOTCACHE_RETURN_IF_ERROR(charge(len + digest.size()));
      if (!out->emplace(std::string(digest), std::string(bytes)).second) return corrupt("constant stored twice");
    }
    return Status();
  }

 private:
  Status charge(uint64_t n) {
    if (n > budget_) return corrupt("decoded graph would exceed its memory bound");
    budget_ -= n;
    return Status();
  }

  Status str(ByteReader* r, std::string* out) {
    uint32_t idx = 0;
    AOTCACHE_RETURN_IF_ERROR(r->u32(&idx));
    if (idx >= strings_.size()) return corrupt("string index " + std::to_string(idx) + " outside the string table");
    const std::string_view s = strings_[idx];
    AOTCACHE_RETURN_IF_ERROR(charge(s.size()));
    out->assign(s.data(), s.size());
    return Status();
  }

  Status tensor_meta(ByteReader* r, TensorMeta* m) {
    if (r->remaining() < k_min_tensor_meta_size) return corrupt("truncated tensor metadata");
    AOTCACHE_RETURN_IF_ERROR(str(r, &m->tensor_type));
    AOTCACHE_RETURN_IF_ERROR(str(r, &m->dtype));
    AOTCACHE_RETURN_IF_ERROR(str(r, &m->device));
    AOTCACHE_RETURN_IF_ERROR(str(r, &m->layout));
    AOTCACHE_RETURN_IF_ERROR(dims(r, &m->sizes, &m->strides));
    uint64_t offset = 0;
    uint8_t bits = 0;
    AOTCACHE_RETURN_IF_ERROR(r->u64(&offset));
    AOTCACHE_RETURN_IF_ERROR(r->u8(&bits));
    const uint8_t known = k_tensor_requires_grad | k_tensor_is_pinned | k_tensor_is_inference | k_tensor_symbolic |
                          (major_ >= 2 ? k_tensor_aliased : 0);
    if ((bits & ~known) != 0) return corrupt("tensor flags " + std::to_string(bits));
    m->storage_offset = static_cast<int64_t>(offset);
    m->requires_grad = (bits & k_tensor_requires_grad) != 0;
    m->is_pinned = (bits & k_tensor_is_pinned) != 0;
    m->is_inference = (bits & k_tensor_is_inference) != 0;
    if (bits & k_tensor_symbolic) {
      for (std::vector<std::string>* exprs : {&m->size_exprs, &m->stride_exprs}) {
        uint32_t rank = 0;
        AOTCACHE_RETURN_IF_ERROR(r->u32(&rank));
        if (rank > r->remaining() / 4) return corrupt("symbolic rank beyond the remaining bytes");
        AOTCACHE_RETURN_IF_ERROR(charge(uint64_t{rank} * sizeof(std::string)));
        exprs->resize(rank);
        for (std::string& e : *exprs) AOTCACHE_RETURN_IF_ERROR(str(r, &e));
      }
      AOTCACHE_RETURN_IF_ERROR(str(r, &m->storage_offset_expr));
    }
    if (bits & k_tensor_aliased) {
      uint32_t group = 0;
      uint64_t nbytes = 0;
      uint8_t has_base = 0;
      AOTCACHE_RETURN_IF_ERROR(r->u32(&group));
      AOTCACHE_RETURN_IF_ERROR(r->u64(&nbytes));
      AOTCACHE_RETURN_IF_ERROR(r->u8(&has_base));
      if (has_base > 1) return corrupt("alias base flag " + std::to_string(has_base));
      m->alias_group = static_cast<int32_t>(group);
      m->alias_storage_nbytes = static_cast<int64_t>(nbytes);
      if (has_base) {
        AliasBase& b = m->alias_base.emplace();
        AOTCACHE_RETURN_IF_ERROR(dims(r, &b.sizes, &b.strides));
        uint64_t base_offset = 0;
        AOTCACHE_RETURN_IF_ERROR(r->u64(&base_offset));
        b.storage_offset = static_cast<int64_t>(base_offset);
      }
    }
    return Status();
  }

  // u32 rank || rank x i64, twice: sizes then strides.
  Status dims(ByteReader* r, std::vector<int64_t>* sizes, std::vector<int64_t>* strides) {
    for (std::vector<int64_t>* v : {sizes, strides}) {
      uint32_t rank = 0;
      AOTCACHE_RETURN_IF_ERROR(r->u32(&rank));
      if (rank > r->remaining() / 8) return corrupt("tensor rank beyond the remaining bytes");
      AOTCACHE_RETURN_IF_ERROR(charge(uint64_t{rank} * 8));
      v->resize(rank);
      for (int64_t& d : *v) {
        uint64_t u = 0;
        AOTCACHE_RETURN_IF_ERROR(r->u64(&u));
        d = static_cast<int64_t>(u);
      }
    }
    return Status();
  }

  Status named(ByteReader* r, uint32_t limit, std::vector<std::pair<std::string, Value>>* out) {
    uint32_t count = 0;
    AOTCACHE_RETURN_IF_ERROR(r->u32(&count));
    if (count > r->remaining() / 5) return corrupt("keyword list claims more entries than bytes remain");
    AOTCACHE_RETURN_IF_ERROR(charge(uint64_t{count} * sizeof(std::pair<std::string, Value>)));
    out->resize(count);
    for (auto& [name, v] : *out) {
      AOTCACHE_RETURN_IF_ERROR(str(r, &name));
      AOTCACHE_RETURN_IF_ERROR(value(r, limit, 0, &v));
    }
    return Status();
  }

  // `count` values, each at least one byte: a count beyond the remaining bytes is refused before allocating.
  Status values(ByteReader* r, uint64_t count, uint32_t limit, std::vector<Value>* out, int depth = 0) {
    if (count > r->remaining()) return corrupt("value list claims more items than bytes remain");
    AOTCACHE_RETURN_IF_ERROR(charge(count * sizeof(Value)));
    out->resize(static_cast<size_t>(count));
    for (Value& v : *out) AOTCACHE_RETURN_IF_ERROR(value(r, limit, depth, &v));
    return Status();
  }

  Status value(ByteReader* r, uint32_t limit, int depth, Value* out) {
    if (depth > k_graph_max_value_depth) {
      return corrupt("value nested deeper than " + std::to_string(k_graph_max_value_depth));
    }
    uint8_t kind = 0;
    AOTCACHE_RETURN_IF_ERROR(r->u8(&kind));
    if (kind > static_cast<uint8_t>(Value::Kind::kSymExpr)) return corrupt("value kind " + std::to_string(kind));
    out->kind = static_cast<Value::Kind>(kind);
    switch (out->kind) {
      case Value::Kind::kNone:
      case Value::Kind::kEllipsis: return Status();
      case Value::Kind::kBool: {
        uint8_t b = 0;
        AOTCACHE_RETURN_IF_ERROR(r->u8(&b));
        if (b > 1) return corrupt("bool value " + std::to_string(b));
        out->b = b == 1;
        return Status();
      }
      case Value::Kind::kInt: {
        uint64_t u = 0;
        AOTCACHE_RETURN_IF_ERROR(r->u64(&u));
        out->i = static_cast<int64_t>(u);
        return Status();
      }
      case Value::Kind::kFloat: {
        uint64_t u = 0;
        AOTCACHE_RETURN_IF_ERROR(r->u64(&u));
        std::memcpy(&out->f, &u, sizeof u);
        return Status();
      }
      case Value::Kind::kString:
      case Value::Kind::kSymExpr: return str(r, &out->s);
      case Value::Kind::kNodeRef: {
        uint32_t pos = 0;
        AOTCACHE_RETURN_IF_ERROR(r->u32(&pos));
        if (pos >= limit)
          return corrupt("node reference " + std::to_string(pos) + " does not point to an earlier node");
        out->i = pos;
        return Status();
      }
      case Value::Kind::kList:
      case Value::Kind::kTuple:
      case Value::Kind::kDict: {
        uint32_t count = 0;
        AOTCACHE_RETURN_IF_ERROR(r->u32(&count));
        const uint64_t items = out->kind == Value::Kind::kDict ? 2ULL * count : count;
        return values(r, items, limit, &out->items, depth + 1);
      }
      case Value::Kind::kTorchEnum: AOTCACHE_RETURN_IF_ERROR(str(r, &out->s)); return str(r, &out->name);
      case Value::Kind::kSlice: return values(r, 3, limit, &out->items, depth + 1);
    }
    return corrupt("value kind " + std::to_string(kind));  // unreachable: checked above
  }

  std::vector<std::string_view> strings_;
  uint64_t budget_;
  uint16_t major_;  // the graph's format version: v1 has no alias records
  uint64_t nodes_ = 0;
};

// Runs `decode` over a whole section: it must consume every byte. Errors name the section and its offset.
template <typename F>
Status decode_section(const char* name, std::string_view bytes, size_t offset, F decode) {
  ByteReader r(bytes);
  Status s = decode(&r);
  if (s.ok() && !r.done()) s = corrupt("trailing bytes");
  if (s.ok()) return s;
  return Status(s.code(), std::string(name) + " section at byte " + std::to_string(offset) + " (+" +
                              std::to_string(r.position()) + "): " + s.message());
}

}  // namespace

Result<std::string> serialize_graph(const CapturedGraph& cg, const SerializeOptions& options) {
  Writer w;
  Out inputs, graph, constants;
  AOTCACHE_RETURN_IF_ERROR(w.inputs(cg.inputs, &inputs));
  graph.buf().reserve(cg.graph.nodes.size() * 64);  // about the size of an FX call node
  AOTCACHE_RETURN_IF_ERROR(w.graph(cg.graph, 0, &graph));
  uint32_t written = 0;
  for (const auto& [digest, bytes] : cg.constants) {
    if (bytes.size() > options.max_constant_bytes) continue;
    if (digest.size() != internal::k_digest_size || internal::sha256(bytes) != digest) {
      return Status::invalid_argument("constant bytes do not hash to their digest " + internal::to_hex(digest));
    }
    constants.raw(digest);
    constants.u64(bytes.size());
    constants.raw(bytes);
    ++written;
  }
  Out strings;
  AOTCACHE_RETURN_IF_ERROR(w.strings(&strings));

  Out out;
  out.buf().reserve(k_header_size + 4 * k_section_header_size + strings.buf().size() + inputs.buf().size() +
                    graph.buf().size() + constants.buf().size() + 4);
  out.raw(k_graph_magic);
  out.u16(k_graph_format_major);
  out.u16(k_graph_format_minor);
  out.u32(written > 0 ? 4 : 3);
  section(k_section_strings, k_section_required, strings.buf(), &out);
  section(k_section_inputs, k_section_required, inputs.buf(), &out);
  section(k_section_graph, k_section_required, graph.buf(), &out);
  if (written > 0) {
    Out body;
    body.u32(written);
    body.raw(constants.buf());
    section(k_section_constants, 0, body.buf(), &out);
  }
  return std::move(out.buf());
}

Result<GraphFormatVersion> graph_format_version(std::string_view bytes) {
  if (bytes.size() < k_header_size) {
    return Status::corruption("serialized graph of " + std::to_string(bytes.size()) +
                              " bytes is shorter than a header");
  }
  if (bytes.substr(0, k_graph_magic.size()) != k_graph_magic) return Status::corruption("not a serialized graph");
  ByteReader r(bytes.substr(k_graph_magic.size()));
  GraphFormatVersion v;
  AOTCACHE_RETURN_IF_ERROR(r.u16(&v.major));
  AOTCACHE_RETURN_IF_ERROR(r.u16(&v.minor));
  return v;
}

Result<CapturedGraph> deserialize_graph(std::string_view bytes, const DeserializeOptions& options) {
  AOTCACHE_ASSIGN_OR_RETURN(GraphFormatVersion version, graph_format_version(bytes));
  if (version.major == 0) return Status::corruption("graph format major version 0");
  if (version.major > k_graph_format_major) {
    return Status::unsupported("graph format v" + std::to_string(version.major) + "." + std::to_string(version.minor) +
                               " is newer than this reader (v" + std::to_string(k_graph_format_major) + "." +
                               std::to_string(k_graph_format_minor) + ")");
  }
  ByteReader r(bytes);
  std::string_view skip;
  AOTCACHE_RETURN_IF_ERROR(r.raw(k_header_size - 4, &skip));
  uint32_t count = 0;
  AOTCACHE_RETURN_IF_ERROR(r.u32(&count));
  if (count > r.remaining() / k_section_header_size) return Status::corruption("more sections claimed than fit");
  std::string_view known[5];
  size_t offsets[5] = {0, 0, 0, 0, 0};
  bool seen[5] = {false, false, false, false, false};
  for (uint32_t k = 0; k < count; ++k) {
    uint16_t id = 0, flags = 0;
    uint64_t len = 0;
    AOTCACHE_RETURN_IF_ERROR(r.u16(&id));
    AOTCACHE_RETURN_IF_ERROR(r.u16(&flags));
    AOTCACHE_RETURN_IF_ERROR(r.u64(&len));
    if (len > r.remaining()) {
      return Status::corruption("section " + std::to_string(id) + " at byte " + std::to_string(r.position()) +
                                " is longer than the graph");
    }
    const size_t offset = r.position();
    std::string_view data;
    AOTCACHE_RETURN_IF_ERROR(r.raw(static_cast<size_t>(len), &data));
    if (id < k_section_strings || id > k_section_constants) {
      if (flags & k_section_required) {
        return Status::unsupported("graph requires section " + std::to_string(id) + ", unknown to this reader (v" +
                                   std::to_string(k_graph_format_major) + "." + std::to_string(k_graph_format_minor) +
                                   ")");
      }
      continue;  // an optional section of a later minor version
    }
    if (seen[id]) return Status::corruption("section " + std::to_string(id) + " appears twice");
    seen[id] = true;
    known[id] = data;
    offsets[id] = offset;
  }
  if (!r.done())
    return Status::corruption("trailing bytes after the last section at byte " + std::to_string(r.position()));
  if (!seen[k_section_strings] || !seen[k_section_inputs] || !seen[k_section_graph]) {
    return Status::corruption("serialized graph lacks a required section");
  }

  const uint64_t budget =
      options.max_decoded_bytes != 0 ? options.max_decoded_bytes : (uint64_t{64} << 20) + 128 * uint64_t{bytes.size()};
  Reader reader(budget, version.major);
  CapturedGraph out;
  AOTCACHE_RETURN_IF_ERROR(decode_section("strings", known[k_section_strings], offsets[k_section_strings],
                                          [&](ByteReader* sr) { return reader.strings(sr); }));
  AOTCACHE_RETURN_IF_ERROR(decode_section("inputs", known[k_section_inputs], offsets[k_section_inputs],
                                          [&](ByteReader* sr) { return reader.inputs(sr, &out.inputs); }));
  AOTCACHE_RETURN_IF_ERROR(decode_section("graph", known[k_section_graph], offsets[k_section_graph],
                                          [&](ByteReader* sr) { return reader.graph(sr, 0, &out.graph); }));
  if (seen[k_section_constants]) {
    AOTCACHE_RETURN_IF_ERROR(decode_section("constants", known[k_section_constants], offsets[k_section_constants],
                                            [&](ByteReader* sr) { return reader.constants(sr, &out.constants); }));
  }
  return out;
}

}  // namespace aotcache
