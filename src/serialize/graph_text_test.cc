// Readable forms of a captured graph: the exact FX-like text and JSON of the golden graph, and hostile metadata.
#include "aotcache/graph_text.h"

#include <gtest/gtest.h>

#include "testing/golden_graph.h"

namespace aotcache {
namespace {

TEST(GraphText, GoldenGraphText) {
  EXPECT_EQ(graph_to_text(testing::golden_graph()),
            "inputs:\n"
            "  0: float32[2, 3] cpu requires_grad\n"
            "  1: 7\n"
            "graph():\n"
            "  %x = placeholder[x]() : float32[2, 3] cpu requires_grad\n"
            "  %n = placeholder[n]() : 7\n"
            "  %body = get_attr[body]() : subgraph\n"
            "    %x = placeholder[x]()\n"
            "    %output = output[output]((%x,))\n"
            "  %add = call_function[aten::add.Tensor](%x, 2.5, alpha=sym(s0))  # meta {recompute=True}\n"
            "  %output = output[output]((%add, %body))\n");
}

TEST(GraphText, GoldenGraphJson) {
  EXPECT_EQ(graph_to_json(testing::golden_graph()),
            "{\"inputs\":[{\"tensor\":{\"dtype\":\"float32\",\"device\":\"cpu\",\"sizes\":[2,3],\"strides\":[3,"
            "1],\"storage_offset\":0,\"layout\":\"strided\",\"tensor_type\":\"Tensor\",\"requires_grad\":true,"
            "\"is_pinned\":false,\"is_inference\":false},\"scalar\":null},{\"scalar\":7}],"
            "\"nodes\":[{\"name\":\"x\",\"op\":\"placeholder\",\"target_kind\":\"none\",\"target\":\"x\","
            "\"args\":[],\"kwargs\":{}},{\"name\":\"n\",\"op\":\"placeholder\",\"target_kind\":\"none\","
            "\"target\":\"n\",\"args\":[],\"kwargs\":{}},{\"name\":\"body\",\"op\":\"get_attr\","
            "\"target_kind\":\"subgraph\",\"target\":\"body\",\"args\":[],\"kwargs\":{},"
            "\"subgraphs\":[[{\"name\":\"x\",\"op\":\"placeholder\",\"target_kind\":\"none\",\"target\":\"x\","
            "\"args\":[],\"kwargs\":{}},{\"name\":\"output\",\"op\":\"output\",\"target_kind\":\"none\","
            "\"target\":\"output\",\"args\":[{\"tuple\":[{\"ref\":0}]}],\"kwargs\":{}}]]},{\"name\":\"add\","
            "\"op\":\"call_function\",\"target_kind\":\"aten_op\",\"target\":\"aten::add.Tensor\","
            "\"args\":[{\"ref\":0},{\"float\":\"2.5\"}],\"kwargs\":{\"alpha\":{\"sym\":\"s0\"}},"
            "\"meta\":{\"recompute\":true}},{\"name\":\"output\",\"op\":\"output\",\"target_kind\":\"none\","
            "\"target\":\"output\",\"args\":[{\"tuple\":[{\"ref\":3},{\"ref\":2}]}],\"kwargs\":{}}],"
            "\"constants\":[{\"digest\":\"2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6\","
            "\"bytes\":1}]}");
}

TEST(GraphText, ValuesPrintAsPythonWouldWithNodeNames) {
  CapturedGraph cg;
  Node a;
  a.name = "a";
  a.op = NodeOp::kPlaceholder;
  a.target = "a";
  Node b;
  b.name = "getitem";
  b.target_kind = TargetKind::kOperator;
  b.target = "operator.getitem";
  b.args = {Value::node_ref(0), Value::tuple({Value::slice(Value::none(), Value::integer(-1), Value::none()),
                                              Value::ellipsis(), Value::floating(1.0), Value::floating(1e-05),
                                              Value::string("it's\n\xff"), Value::torch_enum("dtype", "bfloat16"),
                                              Value::dict({Value::string("k"), Value::list({Value::boolean(true)})})})};
  cg.graph.nodes = {a, b};
  EXPECT_EQ(
      graph_to_text(cg),
      "inputs:\n"
      "graph():\n"
      "  %a = placeholder[a]()\n"
      "  %getitem = call_function[operator.getitem](%a, (slice(None, -1, None), ..., 1.0, 1e-05, 'it\\'s\\x0a\\xff', "
      "torch.bfloat16, {'k': [True]}))\n");
  // Invalid UTF-8 becomes \u00XX in JSON, so the output is always valid JSON.
  EXPECT_NE(graph_to_json(cg).find("\"it's\\u000a\\u00ff\""), std::string::npos) << graph_to_json(cg);
}

// Regression (fuzzer, UBSan signed overflow): sizes whose row-major product overflows int64 are not contiguous.
// Before the fix the product wrapped to 0 and the zero stride below passed for contiguous, hiding the strides.
TEST(GraphText, HugeSizesDoNotOverflow) {
  CapturedGraph cg;
  TensorMeta m;
  m.dtype = "float32";
  m.device = "cpu";
  m.sizes = {3, int64_t{1} << 62, 4};
  m.strides = {0, 4, 1};
  cg.inputs.push_back(InputMeta{m, {}});
  EXPECT_EQ(graph_to_text(cg), "inputs:\n  0: float32[3, 4611686018427387904, 4] cpu stride=[0, 4, 1]\ngraph():\n");
}

TEST(GraphText, SymbolicTensorsShowTheirExpressions) {
  CapturedGraph cg;
  TensorMeta m = testing::tensor({4, 16});
  m.size_exprs = {"s0", "16"};
  m.stride_exprs = {"16", "1"};
  m.storage_offset_expr = "0";
  cg.inputs.push_back(InputMeta{m, {}});
  EXPECT_EQ(graph_to_text(cg),
            "inputs:\n  0: float32[s0, 16] cpu stride=[16, 1] offset=0 (example [4, 16])\ngraph():\n");
  EXPECT_NE(graph_to_json(cg).find("\"size_exprs\":[\"s0\",\"16\"],\"stride_exprs\":[\"16\",\"1\"],"
                                   "\"storage_offset_expr\":\"0\""),
            std::string::npos)
      << graph_to_json(cg);
}

TEST(GraphText, InputsSharingAStorageShowTheirAliasGroup) {
  CapturedGraph cg;
  TensorMeta a = testing::tensor({6});
  a.alias_group = 0;
  a.alias_storage_nbytes = 40;
  a.alias_base = AliasBase{{10}, {1}, 0};
  TensorMeta b = a;
  b.storage_offset = 4;
  cg.inputs = {InputMeta{a, {}}, InputMeta{b, {}}, InputMeta{testing::tensor({6}), {}}};
  EXPECT_EQ(graph_to_text(cg),
            "inputs:\n"
            "  0: float32[6] cpu alias=0 storage=40B base=[10] stride=[1] offset=0\n"
            "  1: float32[6] cpu offset=4 alias=0 storage=40B base=[10] stride=[1] offset=0\n"
            "  2: float32[6] cpu\n"
            "graph():\n");
  EXPECT_NE(graph_to_json(cg).find("\"alias_group\":0,\"alias_storage_nbytes\":40,"
                                   "\"alias_base\":{\"sizes\":[10],\"strides\":[1],\"storage_offset\":0}}"),
            std::string::npos)
      << graph_to_json(cg);
  const std::string json = graph_to_json(cg);
  size_t groups = 0;
  for (size_t at = json.find("\"alias_group\""); at != std::string::npos; at = json.find("\"alias_group\"", at + 1)) {
    ++groups;
  }
  EXPECT_EQ(groups, 2u) << "an input that shares nothing has no alias fields: " << json;
}

}  // namespace
}  // namespace aotcache
