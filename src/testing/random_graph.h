// A seeded generator of random captured graphs for round-trip tests, the fuzzer's seeds and the benchmark.
// Deterministic on every platform and compiler (own PRNG and mapping, no std distributions, one draw per
// statement). Every graph it makes is
// well-formed for both the graph format and the key: references point backwards, dicts are even, kwarg and meta
// names are unique per node, exactly subgraph nodes hold exactly one subgraph, constants hash to their digests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "aotcache/serialize.h"
#include "base/sha256.h"

namespace aotcache::testing {

struct RandomGraphOptions {
  int nodes = 40;              // nodes of the top-level graph
  int max_value_depth = 4;     // nesting of containers in arguments
  int max_subgraph_depth = 2;  // nesting of subgraphs
  bool realistic = false;      // FX-like: mostly call_function with a few node references and scalar kwargs
};

class RandomGraphGenerator {
 public:
  explicit RandomGraphGenerator(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ULL + 1) {}

  CapturedGraph captured(const RandomGraphOptions& o) {
    CapturedGraph cg;
    const int inputs = 1 + static_cast<int>(below(6));
    for (int k = 0; k < inputs; ++k) {
      InputMeta in;
      if (below(4) != 0) {
        in.tensor = tensor_meta();
      } else {
        in.scalar = below(2) ? Value::integer(static_cast<int64_t>(next())) : Value::boolean(below(2) == 1);
      }
      cg.inputs.push_back(std::move(in));
    }
    if (below(4) == 0) alias(&cg.inputs);
    cg.graph = graph(o, o.nodes, 0, &cg.constants);
    return cg;
  }

  uint64_t next() {  // splitmix64
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  std::string text() {
    static const char* const k_words[] = {
        "x", "add", "aten::mm.default", "torch.relu", "weight",   "float32",
        "",  "cpu", "cuda:0",           "s0",         "2*s0 + 1", "l_self_modules_layers_0_weight_"};
    if (below(8) != 0) return k_words[below(sizeof k_words / sizeof *k_words)];
    std::string s(below(24), '\0');
    for (char& c : s) c = static_cast<char>(next());  // any bytes, NUL and non-UTF-8 included
    return s;
  }

  double finite_float() {
    for (;;) {
      uint64_t bits = next();
      double f = 0;
      std::memcpy(&f, &bits, sizeof f);
      if (!std::isnan(f)) return below(3) == 0 ? -0.0 : f;  // NaN != NaN would defeat equality checks
    }
  }

  TensorMeta tensor_meta() {
    TensorMeta m;
    static const char* const k_dtypes[] = {"float32", "bfloat16", "int64", "bool"};
    m.dtype = k_dtypes[below(4)];
    m.device = below(3) ? "cpu" : "cuda:" + std::to_string(below(4));
    const size_t rank = below(5);
    for (size_t k = 0; k < rank; ++k) m.sizes.push_back(static_cast<int64_t>(below(4096)));
    for (size_t k = 0; k < rank; ++k) m.strides.push_back(static_cast<int64_t>(below(1 << 20)) - 8);
    m.storage_offset = static_cast<int64_t>(below(100));
    m.requires_grad = below(2);
    m.is_pinned = below(5) == 0;
    m.is_inference = below(7) == 0;
    m.layout = below(9) ? "strided" : "sparse_coo";
    m.tensor_type = below(3) ? "Tensor" : "Parameter";
    if (below(4) == 0) {  // dynamic shapes: one expression per size and stride, as the key requires
      for (size_t k = 0; k < rank; ++k) m.size_exprs.push_back(below(2) ? "s" + std::to_string(k) : "8");
      for (size_t k = 0; k < rank; ++k) m.stride_exprs.push_back(k + 1 == rank ? "1" : "2*s" + std::to_string(k));
      m.storage_offset_expr = "0";
    }
    return m;
  }

  // The first two tensor inputs share one storage, as the key requires: a group of two, one storage size.
  void alias(std::vector<InputMeta>* inputs) {
    std::vector<TensorMeta*> tensors;
    for (InputMeta& in : *inputs) {
      if (in.tensor.has_value()) tensors.push_back(&*in.tensor);
    }
    if (tensors.size() < 2) return;
    const auto group = static_cast<int32_t>(below(3));  // any number: the key renumbers
    const auto nbytes = static_cast<int64_t>(1 + below(1 << 20));
    for (size_t k = 0; k < 2; ++k) {
      tensors[k]->alias_group = group;
      tensors[k]->alias_storage_nbytes = nbytes;
      if (below(2)) tensors[k]->alias_base = AliasBase{{static_cast<int64_t>(below(64))}, {1}, 0};
    }
  }

  Value value(int64_t refs, int depth, int max_depth) {
    const uint64_t kinds = depth >= max_depth ? 6 : 13;  // containers only while depth allows
    static const Value::Kind k_leaf[] = {Value::Kind::kNone,   Value::Kind::kBool,      Value::Kind::kInt,
                                         Value::Kind::kFloat,  Value::Kind::kString,    Value::Kind::kNodeRef,
                                         Value::Kind::kList,   Value::Kind::kTuple,     Value::Kind::kDict,
                                         Value::Kind::kSlice,  Value::Kind::kTorchEnum, Value::Kind::kEllipsis,
                                         Value::Kind::kSymExpr};
    Value::Kind kind = k_leaf[below(kinds)];
    if (depth >= max_depth && kind == Value::Kind::kNodeRef && refs == 0) kind = Value::Kind::kSymExpr;
    switch (kind) {
      case Value::Kind::kNone: return Value::none();
      case Value::Kind::kBool: return Value::boolean(below(2) == 1);
      case Value::Kind::kInt:
        return Value::integer(below(2) ? static_cast<int64_t>(below(100)) - 50 : static_cast<int64_t>(next()));
      case Value::Kind::kFloat: return Value::floating(finite_float());
      case Value::Kind::kString: return Value::string(text());
      case Value::Kind::kNodeRef:
        return refs > 0 ? Value::node_ref(static_cast<int64_t>(below(static_cast<uint64_t>(refs)))) : Value::none();
      case Value::Kind::kList:
      case Value::Kind::kTuple:
      case Value::Kind::kDict: {
        std::vector<Value> items;
        const uint64_t n = below(5);
        for (uint64_t k = 0; k < n; ++k) {
          if (kind == Value::Kind::kDict) items.push_back(Value::string(text()));
          items.push_back(value(refs, depth + 1, max_depth));
        }
        return kind == Value::Kind::kList    ? Value::list(std::move(items))
               : kind == Value::Kind::kTuple ? Value::tuple(std::move(items))
                                             : Value::dict(std::move(items));
      }
      // Each draw in its own statement: the order in which function arguments and operands are evaluated is
      // unspecified (GCC and clang differ), and the graphs must be the same whatever the compiler.
      case Value::Kind::kSlice: {
        Value start = value(refs, depth + 1, max_depth);
        Value stop = value(refs, depth + 1, max_depth);
        Value step = value(refs, depth + 1, max_depth);
        return Value::slice(std::move(start), std::move(stop), std::move(step));
      }
      case Value::Kind::kTorchEnum: {
        const char* category = below(2) ? "dtype" : "device";
        return Value::torch_enum(category, text());
      }
      case Value::Kind::kEllipsis: return Value::ellipsis();
      case Value::Kind::kSymExpr: {
        const std::string symbol = "s" + std::to_string(below(4));
        return Value::sym_expr(symbol + "*" + std::to_string(below(9)));
      }
    }
    return Value::none();
  }

  // Unique names: the key refuses a node with a repeated kwarg or meta name.
  std::vector<std::pair<std::string, Value>> named(int64_t refs, int max_depth, uint64_t max_count) {
    std::vector<std::pair<std::string, Value>> out;
    const uint64_t n = below(max_count + 1);
    for (uint64_t k = 0; k < n; ++k) {
      std::string name = "k" + std::to_string(k) + text();
      out.emplace_back(std::move(name), value(refs, 0, max_depth));
    }
    return out;
  }

  Graph graph(const RandomGraphOptions& o, int nodes, int depth, std::map<std::string, std::string>* constants) {
    Graph g;
    for (int pos = 0; pos < nodes; ++pos) {
      Node n;
      n.name = "n" + std::to_string(pos) + (below(4) == 0 ? "_" + text() : "");
      const auto refs = static_cast<int64_t>(pos);
      if (o.realistic) {
        realistic_node(pos, nodes, &n);
        g.nodes.push_back(std::move(n));
        continue;
      }
      n.op = static_cast<NodeOp>(below(6));
      n.target_kind = static_cast<TargetKind>(below(11));  // kSubgraph only below, with its graph
      n.target = text();
      const uint64_t nargs = below(5);
      for (uint64_t k = 0; k < nargs; ++k) n.args.push_back(value(refs, 0, o.max_value_depth));
      n.kwargs = named(refs, o.max_value_depth, 3);
      if (below(4) == 0) n.meta = named(refs, 2, 2);
      const uint64_t special = below(10);
      if (special == 0) {
        n.op = NodeOp::kGetAttr;
        n.target_kind = TargetKind::kAttribute;
        n.constant_meta = tensor_meta();
        std::string bytes(below(64), '\0');
        for (char& c : bytes) c = static_cast<char>(next());
        n.constant_digest = internal::sha256(bytes);
        (*constants)[n.constant_digest] = bytes;
      } else if (special == 1 && depth < o.max_subgraph_depth) {
        n.op = NodeOp::kGetAttr;
        n.target_kind = TargetKind::kSubgraph;
        n.subgraphs.push_back(graph(o, static_cast<int>(below(8)), depth + 1, constants));
      }
      g.nodes.push_back(std::move(n));
    }
    return g;
  }

  // placeholder x3, then call_function nodes on earlier nodes, then one output of the last few.
  void realistic_node(int pos, int nodes, Node* n) {
    static const char* const k_ops[] = {"aten::mm.default",    "aten::add.Tensor",   "aten::relu.default",
                                        "torch._C._nn.linear", "aten::view.default", "operator.getitem"};
    if (pos < 3) {
      n->op = NodeOp::kPlaceholder;
      n->target = n->name;
      return;
    }
    if (pos == nodes - 1) {
      n->op = NodeOp::kOutput;
      n->target = "output";
      n->args = {Value::tuple({Value::node_ref(pos - 1), Value::node_ref(pos - 2)})};
      return;
    }
    n->op = NodeOp::kCallFunction;
    n->target_kind = TargetKind::kAtenOp;
    n->target = k_ops[below(6)];
    n->args = {Value::node_ref(static_cast<int64_t>(below(static_cast<uint64_t>(pos)))), Value::node_ref(pos - 1)};
    if (below(3) == 0) n->args.push_back(Value::list({Value::integer(64), Value::integer(-1)}));
    if (below(4) == 0) n->kwargs = {{"alpha", Value::integer(1)}};
    if (below(8) == 0) n->kwargs.emplace_back("dtype", Value::torch_enum("dtype", "float32"));
  }

  uint64_t state_;
};

}  // namespace aotcache::testing
