// The small captured graph whose bytes are the golden vector of docs/formats/graph-format.md §8, shared by the
// C++ tests.
#pragma once

#include "aotcache/serialize.h"
#include "base/sha256.h"
#include "testing/sample_graphs.h"

namespace aotcache::testing {

// The graph of docs/formats/graph-format.md §8: every section, a subgraph, a sym expression, kwargs and meta.
inline CapturedGraph golden_graph() {
  CapturedGraph cg;
  cg.inputs.push_back(InputMeta{tensor({2, 3}, true), {}});
  cg.inputs.push_back(InputMeta{std::nullopt, Value::integer(7)});
  Node x;
  x.name = "x";
  x.op = NodeOp::kPlaceholder;
  x.target = "x";
  Node n;
  n.name = "n";
  n.op = NodeOp::kPlaceholder;
  n.target = "n";
  Node body;
  body.name = "body";
  body.op = NodeOp::kGetAttr;
  body.target_kind = TargetKind::kSubgraph;
  body.target = "body";
  Node a;
  a.name = "x";
  a.op = NodeOp::kPlaceholder;
  a.target = "x";
  Node sub_out;
  sub_out.name = "output";
  sub_out.op = NodeOp::kOutput;
  sub_out.target = "output";
  sub_out.args = {Value::tuple({Value::node_ref(0)})};
  body.subgraphs.push_back(Graph{{a, sub_out}});
  Node add;
  add.name = "add";
  add.target_kind = TargetKind::kAtenOp;
  add.target = "aten::add.Tensor";
  add.args = {Value::node_ref(0), Value::floating(2.5)};
  add.kwargs = {{"alpha", Value::sym_expr("s0")}};
  add.meta = {{"recompute", Value::boolean(true)}};
  Node out;
  out.name = "output";
  out.op = NodeOp::kOutput;
  out.target = "output";
  out.args = {Value::tuple({Value::node_ref(3), Value::node_ref(2)})};
  cg.graph.nodes = {x, n, body, add, out};
  cg.constants[internal::sha256("c")] = "c";
  return cg;
}

}  // namespace aotcache::testing
