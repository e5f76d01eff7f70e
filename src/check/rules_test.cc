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

TEST(Rules, HigherOrderOpAndModulesBypass) {
  Graph g = testing::linear_relu_graph();
  g.nodes[3].target_kind = TargetKind::kHigherOrderOp;
  EXPECT_EQ(check_graph(g)->code, "higher_order_op");
  Graph m = testing::linear_relu_graph();
  m.nodes[3].op = NodeOp::kCallModule;
  m.nodes[3].target_kind = TargetKind::kModule;
  EXPECT_EQ(check_graph(m)->code, "call_module");
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
