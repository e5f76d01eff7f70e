// Graphs built through the IR, without torch, shared by the C++ tests.
#pragma once

#include "aotcache/ir.h"
#include "aotcache/key.h"

namespace aotcache::testing {

// x -> linear(x, w, b) -> relu -> output, as Dynamo would capture an nn.Linear + ReLU with inlined parameters.
inline Graph linear_relu_graph() {
  Graph g;
  auto placeholder = [&](const char* name) {
    Node n;
    n.name = name;
    n.op = NodeOp::kPlaceholder;
    n.target = name;
    g.nodes.push_back(n);
  };
  placeholder("l_x_");
  placeholder("l_self_weight_");
  placeholder("l_self_bias_");
  Node lin;
  lin.name = "linear";
  lin.op = NodeOp::kCallFunction;
  lin.target_kind = TargetKind::kTorchFunction;
  lin.target = "torch._C._nn.linear";
  lin.args = {Value::node_ref(0), Value::node_ref(1), Value::node_ref(2)};
  g.nodes.push_back(lin);
  Node relu;
  relu.name = "relu";
  relu.op = NodeOp::kCallFunction;
  relu.target_kind = TargetKind::kTorchFunction;
  relu.target = "torch.relu";
  relu.args = {Value::node_ref(3)};
  relu.kwargs = {{"inplace", Value::boolean(false)}};
  g.nodes.push_back(relu);
  Node out;
  out.name = "output";
  out.op = NodeOp::kOutput;
  out.target = "output";
  out.args = {Value::tuple({Value::node_ref(4)})};
  g.nodes.push_back(out);
  return g;
}

inline TensorMeta tensor(std::vector<int64_t> sizes, bool requires_grad = false) {
  TensorMeta m;
  m.dtype = "float32";
  m.device = "cpu";
  m.sizes = sizes;
  int64_t stride = 1;
  m.strides.resize(sizes.size());
  for (size_t k = sizes.size(); k-- > 0;) {
    m.strides[k] = stride;
    stride *= sizes[k];
  }
  m.requires_grad = requires_grad;
  return m;
}

inline KeyInputs linear_relu_inputs(const Graph* g) {
  KeyInputs in;
  in.graph = g;
  in.inputs = {InputMeta{tensor({8, 16}), {}}, InputMeta{tensor({32, 16}, true), {}},
               InputMeta{tensor({32}, true), {}}};
  in.inputs[1].tensor->tensor_type = "Parameter";
  in.inputs[2].tensor->tensor_type = "Parameter";
  in.autograd_state = Value::dict({Value::string("grad_enabled"), Value::boolean(true)});
  in.config =
      Value::dict({Value::string("inductor"), Value::dict({Value::string("max_autotune"), Value::boolean(false)})});
  in.environment =
      Value::dict({Value::string("torch"), Value::string("2.13.0"), Value::string("python"), Value::string("3.11")});
  in.user = Value::dict({});
  return in;
}

}  // namespace aotcache::testing
