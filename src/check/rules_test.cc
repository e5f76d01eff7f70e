// The rule table: allowed targets pass; each bypass names its reason, node and target.
#include <gtest/gtest.h>

#include "aotcache/check.h"
#include "testing/sample_graphs.h"

namespace aotcache {
namespace {

TEST(Rules, AllowsTorchFunctionsAndAtenOps) {
  Graph g = testing::linear_relu_graph();
  g.nodes[4].target_kind = TargetKind::kAtenOp;
  g.nodes[4].target = "aten::relu.default";
  EXPECT_EQ(check_graph(g), std::nullopt);
}

TEST(Rules, PythonFunctionBypassesWithNodeAndTarget) {
  Graph g = testing::linear_relu_graph();
  g.nodes[4].target_kind = TargetKind::kPythonFunction;
  g.nodes[4].target = "mymodule.my_helper";
  auto r = check_graph(g);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, "python_function");
  EXPECT_NE(r->message.find("relu"), std::string::npos);
  EXPECT_NE(r->message.find("mymodule.my_helper"), std::string::npos);
}

TEST(Rules, UnknownHigherOrderOpBypassesKnownOneIsAllowed) {
  Graph g = testing::linear_relu_graph();
  g.nodes[3].target_kind = TargetKind::kHigherOrderOp;
  g.nodes[3].target = "torch.ops.higher_order.my_new_hop";
  auto r = check_graph(g);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, "higher_order_op_unknown");
  EXPECT_NE(r->message.find("my_new_hop"), std::string::npos);
  for (const std::string& hop : known_higher_order_ops()) {
    g.nodes[3].target = hop;
    EXPECT_EQ(check_graph(g), std::nullopt) << hop;
  }
}

// A subgraph node wrapping `body` (what Dynamo emits for a higher-order op's callable).
Node subgraph_node(const char* name, Graph body) {
  Node n;
  n.name = name;
  n.op = NodeOp::kGetAttr;
  n.target_kind = TargetKind::kSubgraph;
  n.target = name;
  n.subgraphs.push_back(std::move(body));
  return n;
}

TEST(Rules, SubgraphsAreCheckedRecursivelyAndNamedByPath) {
  Graph inner = testing::linear_relu_graph();
  Graph middle;
  middle.nodes.push_back(subgraph_node("cond_true_0", inner));
  Graph outer;
  outer.nodes.push_back(subgraph_node("wrap_body_0", middle));
  EXPECT_EQ(check_graph(outer), std::nullopt);

  outer.nodes[0].subgraphs[0].nodes[0].subgraphs[0].nodes[4].target_kind = TargetKind::kPythonFunction;
  auto r = check_graph(outer);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, "python_function");
  EXPECT_NE(r->message.find("wrap_body_0/cond_true_0/relu"), std::string::npos) << r->message;
}

TEST(Rules, SubgraphNodeWithoutItsGraphBypasses) {
  Graph g;
  g.nodes.push_back(subgraph_node("body", Graph{}));
  g.nodes[0].subgraphs.clear();
  EXPECT_EQ(check_graph(g)->code, "unknown_node");
}

TEST(Rules, DeeplyNestedSubgraphsBypassInsteadOfRecursingWithoutBound) {
  Graph g = testing::linear_relu_graph();
  for (int i = 0; i < 40; ++i) {
    Graph outer;
    outer.nodes.push_back(subgraph_node("body", std::move(g)));
    g = std::move(outer);
  }
  EXPECT_EQ(check_graph(g)->code, "subgraph_too_deep");
}

TEST(Rules, CustomOpNeedsAPinnedVersion) {
  Graph g = testing::linear_relu_graph();
  g.nodes[3].target_kind = TargetKind::kCustomOp;
  g.nodes[3].target = "mylib::twice.default";
  auto r = check_graph(g);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, "custom_op_unpinned");
  EXPECT_NE(r->message.find("mylib::twice.default"), std::string::npos);
  EXPECT_NE(r->message.find("register_op_version"), std::string::npos);
  g.nodes[3].meta = {{"aotcache.op_version", Value::string("registered:2")}};
  EXPECT_EQ(check_graph(g), std::nullopt);
}

TEST(Rules, ModulesNeedABuiltinTypeAndTheirEncoding) {
  Graph m = testing::linear_relu_graph();
  m.nodes[3].op = NodeOp::kCallModule;
  m.nodes[3].target_kind = TargetKind::kModule;
  m.nodes[3].target = "torch.nn.modules.linear.Linear";
  EXPECT_EQ(check_graph(m)->code, "call_module_unknown_type");  // not encoded by the capture layer
  m.nodes[3].meta = {{"aotcache.module", Value::dict({})}};
  EXPECT_EQ(check_graph(m), std::nullopt);
  m.nodes[3].target = "mymodels.Block";
  EXPECT_EQ(check_graph(m)->code, "call_module_unknown_type");
}

TEST(Rules, DynamoRuntimeHelpersBypass) {
  Graph g = testing::linear_relu_graph();
  g.nodes[3].target = "torch._dynamo.external_utils.call_hook";
  EXPECT_EQ(check_graph(g)->code, "dynamo_internal_function");
}

TEST(Rules, TableIsDescribedInOrder) {
  auto rules = describe_rules();
  ASSERT_GE(rules.size(), 10u);
  EXPECT_EQ(rules[0].op, "placeholder");
  bool saw_custom_pin = false;
  for (const auto& r : rules) {
    if (r.kind == "custom_op" && r.allow) saw_custom_pin = r.condition == "aotcache.op_version";
    if (!r.allow) {
      EXPECT_FALSE(r.code.empty()) << r.op << " " << r.kind;
    }
  }
  EXPECT_TRUE(saw_custom_pin);
}

TEST(Rules, GetAttrWithoutConstantBypasses) {
  Graph g = testing::linear_relu_graph();
  g.nodes[3].op = NodeOp::kGetAttr;
  g.nodes[3].target_kind = TargetKind::kAttribute;
  EXPECT_EQ(check_graph(g)->code, "get_attr_non_tensor");
}

TEST(Rules, UnknownCombinationBypasses) {
  Graph g = testing::linear_relu_graph();
  g.nodes[3].op = NodeOp::kCallMethod;
  g.nodes[3].target_kind = TargetKind::kAtenOp;
  EXPECT_EQ(check_graph(g)->code, "unknown_node");
}

}  // namespace
}  // namespace aotcache
