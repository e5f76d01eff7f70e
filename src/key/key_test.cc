// The key: golden digest of a sample graph, stability under renaming, sensitivity to each component.
#include "aotcache/key.h"

#include <gtest/gtest.h>

#include "base/sha256.h"
#include "testing/sample_graphs.h"

namespace aotcache {
namespace {

using testing::linear_relu_graph;
using testing::linear_relu_inputs;

std::string key_hex(const KeyInputs& in) {
  auto k = compute_key(in);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.status().to_string());
  return k.ok() ? k->hex() : "";
}

TEST(Key, GoldenDigest) {
  Graph g = linear_relu_graph();
  // Recompute only for a deliberate change of the encoding, together with k_key_schema_version and the docs.
  EXPECT_EQ(key_hex(linear_relu_inputs(&g)), "0d5df74b2c996e9299d77f31e3644c27473940abe055d0908a6c2d28d4d63e27");
}

TEST(Key, ManifestHasEveryComponentInOrder) {
  Graph g = linear_relu_graph();
  auto k = compute_key(linear_relu_inputs(&g));
  ASSERT_TRUE(k.ok());
  std::vector<std::string> names;
  for (const auto& c : k->manifest.components) names.push_back(c.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"format", "graph", "inputs", "autograd_state", "config", "environment", "user"}));
  EXPECT_EQ(k->manifest.find("graph")->summary, "6 nodes, 3 inputs, 2 calls: torch._C._nn.linear torch.relu");
  EXPECT_EQ(k->manifest.find("inputs")->summary, "3 inputs: float32[8, 16] float32[32, 16](grad) float32[32](grad)");
  EXPECT_EQ(key_digest_of(k->manifest), k->digest);
}

TEST(Key, NamesDoNotChangeTheKey) {
  Graph a = linear_relu_graph();
  Graph b = linear_relu_graph();
  for (auto& n : b.nodes) {
    n.name = "renamed_" + n.name;
    if (n.op == NodeOp::kPlaceholder) n.target = "renamed_" + n.target;
  }
  EXPECT_EQ(key_hex(linear_relu_inputs(&a)), key_hex(linear_relu_inputs(&b)));
}

TEST(Key, KwargOrderDoesNotChangeTheKey) {
  Graph a = linear_relu_graph();
  a.nodes[4].kwargs = {{"x", Value::integer(1)}, {"y", Value::integer(2)}};
  Graph b = linear_relu_graph();
  b.nodes[4].kwargs = {{"y", Value::integer(2)}, {"x", Value::integer(1)}};
  EXPECT_EQ(key_hex(linear_relu_inputs(&a)), key_hex(linear_relu_inputs(&b)));
}

TEST(Key, EachComponentChangesTheKeyAndIsNamed) {
  Graph g = linear_relu_graph();
  const KeyInputs base = linear_relu_inputs(&g);
  auto base_key = compute_key(base);
  ASSERT_TRUE(base_key.ok());

  Graph g2 = linear_relu_graph();
  g2.nodes[4].target = "torch.sigmoid";
  struct Variant {
    std::string component;
    KeyInputs in;
  };
  std::vector<Variant> variants;
  variants.push_back({"graph", base});
  variants.back().in.graph = &g2;
  variants.push_back({"inputs", base});
  variants.back().in.inputs[0].tensor->sizes[0] = 9;
  variants.push_back({"inputs", base});
  variants.back().in.inputs[0].tensor->dtype = "float64";
  variants.push_back({"inputs", base});
  variants.back().in.inputs[0].tensor->requires_grad = true;
  variants.push_back({"autograd_state", base});
  variants.back().in.autograd_state = Value::dict({Value::string("grad_enabled"), Value::boolean(false)});
  variants.push_back({"config", base});
  variants.back().in.config =
      Value::dict({Value::string("inductor"), Value::dict({Value::string("max_autotune"), Value::boolean(true)})});
  variants.push_back({"environment", base});
  variants.back().in.environment.items[1] = Value::string("2.14.0");
  variants.push_back({"user", base});
  variants.back().in.user = Value::dict({Value::string("salt"), Value::string("x")});

  for (const auto& v : variants) {
    auto k = compute_key(v.in);
    ASSERT_TRUE(k.ok());
    EXPECT_NE(k->digest, base_key->digest) << v.component;
    EXPECT_EQ(differing_components(base_key->manifest, k->manifest), std::vector<std::string>{v.component});
  }
}

TEST(Key, SemanticMetaIsKeyedInAnyOrder) {
  Graph plain = testing::linear_relu_graph();
  Graph tagged = testing::linear_relu_graph();
  tagged.nodes[3].meta = {{"recompute", Value::torch_enum("torch.utils.checkpoint.CheckpointPolicy", "MUST_SAVE")},
                          {"custom", Value::dict({Value::string("stage"), Value::integer(0)})}};
  Graph reordered = tagged;
  std::swap(reordered.nodes[3].meta[0], reordered.nodes[3].meta[1]);
  Graph other_tag = tagged;
  other_tag.nodes[3].meta[0].second = Value::torch_enum("torch.utils.checkpoint.CheckpointPolicy", "PREFER_RECOMPUTE");
  EXPECT_NE(key_hex(linear_relu_inputs(&plain)), key_hex(linear_relu_inputs(&tagged)));
  EXPECT_EQ(key_hex(linear_relu_inputs(&tagged)), key_hex(linear_relu_inputs(&reordered)));
  EXPECT_NE(key_hex(linear_relu_inputs(&tagged)), key_hex(linear_relu_inputs(&other_tag)));
}

TEST(Key, TypedScalarArgumentsDiffer) {
  Graph a = linear_relu_graph();
  Graph b = linear_relu_graph();
  Graph c = linear_relu_graph();
  a.nodes[4].kwargs[0].second = Value::integer(1);
  b.nodes[4].kwargs[0].second = Value::floating(1.0);
  c.nodes[4].kwargs[0].second = Value::boolean(true);
  const std::string ka = key_hex(linear_relu_inputs(&a));
  const std::string kb = key_hex(linear_relu_inputs(&b));
  const std::string kc = key_hex(linear_relu_inputs(&c));
  EXPECT_NE(ka, kb);
  EXPECT_NE(kb, kc);
  EXPECT_NE(ka, kc);
}

TEST(Key, ConstantsKeyedByContentNotName) {
  Graph a = linear_relu_graph();
  Node c;
  c.name = "_tensor_constant0";
  c.op = NodeOp::kGetAttr;
  c.target_kind = TargetKind::kAttribute;
  c.target = "_tensor_constant0";
  c.constant_meta = testing::tensor({2});
  c.constant_digest = internal::sha256("bytes-a");
  a.nodes.insert(a.nodes.begin() + 3, c);
  for (auto& n : a.nodes) {
    for (auto& arg : n.args) {
      if (arg.kind == Value::Kind::kNodeRef && arg.i >= 3) ++arg.i;
    }
  }
  a.nodes.back().args = {Value::tuple({Value::node_ref(5)})};
  Graph renamed = a;
  renamed.nodes[3].target = "_tensor_constant7";
  Graph other_bytes = a;
  other_bytes.nodes[3].constant_digest = internal::sha256("bytes-b");
  EXPECT_EQ(key_hex(linear_relu_inputs(&a)), key_hex(linear_relu_inputs(&renamed)));
  EXPECT_NE(key_hex(linear_relu_inputs(&a)), key_hex(linear_relu_inputs(&other_bytes)));
}

TEST(Key, ExplainComponentNamesTheFields) {
  Graph g = linear_relu_graph();
  KeyInputs a = linear_relu_inputs(&g);
  KeyInputs b = a;
  b.config = Value::dict({Value::string("inductor"), Value::dict({Value::string("max_autotune"), Value::boolean(true)}),
                          Value::string("extra"), Value::integer(1)});
  auto ka = compute_key(a), kb = compute_key(b);
  ASSERT_TRUE(ka.ok() && kb.ok());
  ASSERT_EQ(ka->component_values[1].first, "config");
  auto lines = explain_component(ka->component_values[1].second, kb->component_values[1].second);
  ASSERT_TRUE(lines.ok());
  EXPECT_EQ(*lines, (std::vector<std::string>{"inductor.max_autotune: False -> True", "extra: only in B"}));
  EXPECT_EQ(explain_component("\x42", ka->component_values[1].second).status().code(), StatusCode::kCorruption);
}

TEST(Key, MalformedGraphIsAnError) {
  Graph g = linear_relu_graph();
  g.nodes[3].args[0] = Value::node_ref(5);  // refers forward
  auto k = compute_key(linear_relu_inputs(&g));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace aotcache

namespace aotcache {
namespace {

// linear_relu_graph with its linear call moved into a subgraph called through a higher-order op.
Graph graph_with_subgraph(const std::string& attribute_name, const std::string& body_op) {
  Graph body = testing::linear_relu_graph();
  body.nodes[4].target = body_op;
  Graph g;
  Node x;
  x.name = "x";
  x.op = NodeOp::kPlaceholder;
  x.target = "x";
  g.nodes.push_back(x);
  Node sub;
  sub.name = attribute_name;
  sub.op = NodeOp::kGetAttr;
  sub.target_kind = TargetKind::kSubgraph;
  sub.target = attribute_name;
  sub.subgraphs.push_back(std::move(body));
  g.nodes.push_back(std::move(sub));
  Node call;
  call.name = "hop";
  call.op = NodeOp::kCallFunction;
  call.target_kind = TargetKind::kHigherOrderOp;
  call.target = "torch.ops.higher_order.tag_activation_checkpoint";
  call.args = {Value::node_ref(1), Value::node_ref(0)};
  g.nodes.push_back(std::move(call));
  return g;
}

TEST(Key, SubgraphsAreKeyedByContentNotByAttributeName) {
  Graph a = graph_with_subgraph("wrap_body_0", "torch.relu");
  Graph renamed = graph_with_subgraph("wrap_body_7", "torch.relu");
  Graph changed = graph_with_subgraph("wrap_body_0", "torch.sigmoid");
  const std::string ka = key_hex(testing::linear_relu_inputs(&a));
  EXPECT_EQ(ka, key_hex(testing::linear_relu_inputs(&renamed)));
  EXPECT_NE(ka, key_hex(testing::linear_relu_inputs(&changed)));
}

TEST(Key, SubgraphNodeMustHoldExactlyOneGraph) {
  Graph g = graph_with_subgraph("body", "torch.relu");
  g.nodes[1].subgraphs.push_back(g.nodes[1].subgraphs[0]);
  EXPECT_FALSE(compute_key(testing::linear_relu_inputs(&g)).ok());
  Graph h = graph_with_subgraph("body", "torch.relu");
  h.nodes[2].subgraphs.push_back(Graph{});  // a call node carrying a graph
  EXPECT_FALSE(compute_key(testing::linear_relu_inputs(&h)).ok());
}

TEST(Key, SymbolicExpressionsAreTypedValues) {
  Graph a = testing::linear_relu_graph();
  a.nodes[4].kwargs = {{"n", Value::sym_expr("2*s0")}};
  Graph b = testing::linear_relu_graph();
  b.nodes[4].kwargs = {{"n", Value::string("2*s0")}};
  EXPECT_NE(key_hex(testing::linear_relu_inputs(&a)), key_hex(testing::linear_relu_inputs(&b)));
}

}  // namespace
}  // namespace aotcache

namespace aotcache {
namespace {

TEST(Key, GuardedCandidatesGetTheirOwnKeysAndKeepTheGraphsComponents) {
  Graph g = testing::linear_relu_graph();
  auto base = compute_key(testing::linear_relu_inputs(&g));
  ASSERT_TRUE(base.ok());
  CacheKey a = with_guards(*base, {"2 <= s0", "Eq(Mod(s0, 8), 0)"});
  CacheKey b = with_guards(*base, {"2 <= s0"});
  EXPECT_NE(a.digest, base->digest);
  EXPECT_NE(a.digest, b.digest);
  EXPECT_EQ(a.digest, with_guards(*base, {"2 <= s0", "Eq(Mod(s0, 8), 0)"}).digest);
  EXPECT_EQ(key_digest_of(a.manifest), a.digest);  // an entry stored under it verifies
  EXPECT_EQ(differing_components(base->manifest, a.manifest), std::vector<std::string>{"guards"});
  // ["a", "b"] and ["a b"] must not collide: each guard is length-prefixed.
  EXPECT_NE(with_guards(*base, {"a", "b"}).digest, with_guards(*base, {"a b"}).digest);
}

TEST(Key, SymbolicInputsAreKeyedByExpressionNotByExampleSizes) {
  Graph g = testing::linear_relu_graph();
  KeyInputs in = testing::linear_relu_inputs(&g);
  in.inputs[0].tensor->size_exprs = {"s0", "16"};
  in.inputs[0].tensor->stride_exprs = {"16", "1"};
  in.inputs[0].tensor->storage_offset_expr = "0";
  const std::string k8 = key_hex(in);
  in.inputs[0].tensor->sizes = {12, 16};  // another example size, same symbolic shape
  in.inputs[0].tensor->strides = {16, 1};
  EXPECT_EQ(key_hex(in), k8);
  in.inputs[0].tensor->size_exprs = {"2*s0", "16"};
  EXPECT_NE(key_hex(in), k8);
  in.inputs[0].tensor->size_exprs = {"s0"};  // one expression per size, or the IR is malformed
  EXPECT_FALSE(compute_key(in).ok());
}

}  // namespace
}  // namespace aotcache

namespace aotcache {
namespace {

using testing::linear_relu_graph;

std::string alias_key_hex(const KeyInputs& in) {
  auto k = compute_key(in);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : k.status().to_string());
  return k.ok() ? k->hex() : "";
}

// f(a, b) with a and b two views of one storage: AOTAutograd compiles a synthetic base for them when one is mutated,
// so the same metadata with and without the sharing must not share a key.
KeyInputs aliased_pair(const Graph* g, int32_t group_a, int32_t group_b) {
  KeyInputs in = testing::linear_relu_inputs(g);
  in.inputs = {InputMeta{testing::tensor({6}), {}}, InputMeta{testing::tensor({6}), {}},
               InputMeta{testing::tensor({32}, true), {}}};
  in.inputs[1].tensor->storage_offset = 4;
  for (int k = 0; k < 2; ++k) {
    TensorMeta& t = *in.inputs[k].tensor;
    t.alias_group = k == 0 ? group_a : group_b;
    if (t.alias_group != -1) t.alias_storage_nbytes = 40;
  }
  return in;
}

TEST(Key, InputsSharingAStorageGetAnotherKey) {
  Graph g = linear_relu_graph();
  auto shared = compute_key(aliased_pair(&g, 0, 0));
  auto separate = compute_key(aliased_pair(&g, -1, -1));
  ASSERT_TRUE(shared.ok()) << shared.status().to_string();
  ASSERT_TRUE(separate.ok()) << separate.status().to_string();
  EXPECT_NE(shared->hex(), separate->hex());
  EXPECT_EQ(differing_components(shared->manifest, separate->manifest), (std::vector<std::string>{"inputs"}));
  EXPECT_EQ(shared->manifest.find("inputs")->summary,
            "3 inputs (2 sharing storage): float32[6](alias 0) float32[6](alias 0) float32[32](grad)");
  EXPECT_EQ(separate->manifest.find("inputs")->summary, "3 inputs: float32[6] float32[6] float32[32](grad)");

  // The size of the shared storage and the views' base: what AOTAutograd's synthetic base is made of.
  KeyInputs bigger = aliased_pair(&g, 0, 0);
  for (int k = 0; k < 2; ++k) bigger.inputs[k].tensor->alias_storage_nbytes = 48;
  EXPECT_NE(alias_key_hex(bigger), shared->hex());
  KeyInputs based = aliased_pair(&g, 0, 0);
  for (int k = 0; k < 2; ++k) based.inputs[k].tensor->alias_base = AliasBase{{10}, {1}, 0};
  EXPECT_NE(alias_key_hex(based), shared->hex());
  KeyInputs based_2d = based;
  for (int k = 0; k < 2; ++k) based_2d.inputs[k].tensor->alias_base = AliasBase{{2, 5}, {5, 1}, 0};
  EXPECT_NE(alias_key_hex(based_2d), alias_key_hex(based));
}

TEST(Key, AliasGroupsAreKeyedAsAPartitionNotByTheirNumbers) {
  Graph g = linear_relu_graph();
  // The same sharing numbered otherwise (other storages, another producer): the same key.
  EXPECT_EQ(alias_key_hex(aliased_pair(&g, 7, 7)), alias_key_hex(aliased_pair(&g, 0, 0)));
  // Five inputs, two groups: {0, 3} and {1, 4}, numbered in either order.
  auto five = [&](int32_t a, int32_t b, int32_t c, int32_t d) {
    KeyInputs in = aliased_pair(&g, a, b);
    in.inputs.push_back(in.inputs[0]);
    in.inputs.push_back(in.inputs[1]);
    in.inputs[3].tensor->alias_group = c;
    in.inputs[4].tensor->alias_group = d;
    return in;
  };
  EXPECT_EQ(alias_key_hex(five(0, 1, 0, 1)), alias_key_hex(five(5, 2, 5, 2)));
  // Another partition of the same inputs, {0, 1} and {3, 4}: another key.
  EXPECT_NE(alias_key_hex(five(0, 0, 1, 1)), alias_key_hex(five(0, 1, 0, 1)));
}

TEST(Key, MalformedAliasGroupsAreErrors) {
  Graph g = linear_relu_graph();
  auto code = [](const KeyInputs& in) { return compute_key(in).status().code(); };
  EXPECT_EQ(code(aliased_pair(&g, 0, -1)), StatusCode::kInvalidArgument);   // a group of one input
  EXPECT_EQ(code(aliased_pair(&g, -2, -2)), StatusCode::kInvalidArgument);  // not a group number
  KeyInputs stray = aliased_pair(&g, -1, -1);
  stray.inputs[0].tensor->alias_storage_nbytes = 40;  // alias fields outside a group
  EXPECT_EQ(code(stray), StatusCode::kInvalidArgument);
  KeyInputs disagree = aliased_pair(&g, 0, 0);
  disagree.inputs[1].tensor->alias_storage_nbytes = 48;  // one storage, two sizes
  EXPECT_EQ(code(disagree), StatusCode::kInvalidArgument);
  KeyInputs empty = aliased_pair(&g, 0, 0);
  for (int k = 0; k < 2; ++k) empty.inputs[k].tensor->alias_storage_nbytes = 0;  // zero-size storages never share
  EXPECT_EQ(code(empty), StatusCode::kInvalidArgument);
  // Only inputs share storages: a constant with alias fields is malformed.
  Graph with_constant = linear_relu_graph();
  Node c;
  c.name = "c";
  c.op = NodeOp::kGetAttr;
  c.target_kind = TargetKind::kAttribute;
  c.constant_meta = testing::tensor({2});
  c.constant_meta->alias_group = 0;
  c.constant_meta->alias_storage_nbytes = 8;
  c.constant_digest = std::string(32, 'c');
  with_constant.nodes.push_back(c);
  EXPECT_EQ(code(aliased_pair(&with_constant, -1, -1)), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace aotcache

namespace aotcache {
namespace {

FrameKeyInputs sample_frame() {
  FrameKeyInputs in;
  in.code_digest = std::string(64, 'a');
  in.code_name = "mymodule.Model.forward";
  in.config = Value::dict({Value::string("frame"), Value::dict({Value::string("python"), Value::string("3.11")})});
  in.environment = Value::dict({Value::string("torch"), Value::string("2.13.0")});
  in.user = Value::dict({Value::string("salt"), Value::string("")});
  return in;
}

TEST(FrameKey, GoldenDigestAndManifest) {
  auto k = compute_frame_key(sample_frame());
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  // Recompute only for a deliberate change, together with k_frame_key_schema_version and
  // docs/formats/frame-entry-format.md.
  EXPECT_EQ(k->hex(), "e583ecf9b2dd0469fa55328d227f8d50e074424c0921282404c1e5f28db62db1");
  std::vector<std::string> names;
  for (const auto& c : k->manifest.components) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"frame_format", "code", "config", "environment", "user"}));
  EXPECT_EQ(k->manifest.find("code")->summary, "mymodule.Model.forward aaaaaaaaaaaaaaaa");
  EXPECT_EQ(key_digest_of(k->manifest), k->digest);
}

TEST(FrameKey, EachComponentChangesTheKeyButNotTheName) {
  const std::string base = compute_frame_key(sample_frame())->hex();
  FrameKeyInputs renamed = sample_frame();
  renamed.code_name = "moved.Model.forward";  // the summary only: a renamed path must not cost the hit
  EXPECT_EQ(compute_frame_key(renamed)->hex(), base);
  FrameKeyInputs code = sample_frame();
  code.code_digest = std::string(64, 'b');
  FrameKeyInputs config = sample_frame();
  config.config = Value::dict({Value::string("frame"), Value::dict({Value::string("python"), Value::string("3.12")})});
  FrameKeyInputs env = sample_frame();
  env.environment = Value::dict({Value::string("torch"), Value::string("2.14.0")});
  FrameKeyInputs user = sample_frame();
  user.user = Value::dict({Value::string("salt"), Value::string("x")});
  for (const auto* changed : {&code, &config, &env, &user}) EXPECT_NE(compute_frame_key(*changed)->hex(), base);
}

TEST(FrameKey, MalformedCodeDigestIsAnError) {
  FrameKeyInputs in = sample_frame();
  in.code_digest = "abc";
  EXPECT_FALSE(compute_frame_key(in).ok());
}

// A DTensor input is its local tensor's metadata with its spec as tensor_type (python/aotcache/distributed_tensor.py):
// two specs over the same local shape are two keys, and the summary a miss explains with shows the spec.
TEST(Key, TensorSubclassTextIsKeyedAndSummarized) {
  Graph g = linear_relu_graph();
  KeyInputs a = linear_relu_inputs(&g);
  KeyInputs b = linear_relu_inputs(&g);
  a.inputs[0].tensor->tensor_type = "DTensor[Tensor](placements=(Shard(dim=0)), mesh=DeviceMesh(cpu, coordinate=(0,)))";
  b.inputs[0].tensor->tensor_type = "DTensor[Tensor](placements=(Shard(dim=0)), mesh=DeviceMesh(cpu, coordinate=(1,)))";
  auto ka = compute_key(a);
  auto kb = compute_key(b);
  ASSERT_TRUE(ka.ok() && kb.ok());
  EXPECT_NE(ka->hex(), kb->hex());
  EXPECT_NE(ka->hex(), key_hex(linear_relu_inputs(&g)));
  EXPECT_EQ(differing_components(ka->manifest, kb->manifest), (std::vector<std::string>{"inputs"}));
  EXPECT_EQ(ka->manifest.find("inputs")->summary,
            "3 inputs: float32[8, 16] DTensor[Tensor](placements=(Shard(dim=0)), mesh=DeviceMesh(cpu, "
            "coordinate=(0,))) float32[32, 16](grad) float32[32](grad)");
}

}  // namespace
}  // namespace aotcache
