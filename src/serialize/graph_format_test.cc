// Graph format: golden bytes, round trips (with key equality) of seeded random graphs, versioning and sections,
// writer refusals and reader bounds.
#include <gtest/gtest.h>

#include "aotcache/key.h"
#include "aotcache/serialize.h"
#include "base/bytes.h"
#include "base/sha256.h"
#include "testing/golden_graph.h"
#include "testing/random_graph.h"
#include "testing/sample_graphs.h"

namespace aotcache {
namespace {

// docs/formats/graph-format.md §8, byte for byte.
constexpr const char* k_golden_hex =
    // header: AOTG, v2.0, 4 sections
    "414f54470200000004000000"
    // section 1 (strings, required, 130 bytes)
    "010001008200000000000000"
    "0e0000000600000054656e736f7207000000666c6f617433320300000063707507000000737472696465640100000078"
    "00000000010000006e04000000626f6479060000006f757470757403000000616464100000006174656e3a3a6164642e"
    "54656e736f7205000000616c706861020000007330090000007265636f6d70757465"
    // section 2 (inputs, required, 81 bytes)
    "020001005100000000000000"
    "020000000100000000010000000200000003000000020000000200000000000000030000000000000002000000030000"
    "000000000001000000000000000000000000000000010000020700000000000000"
    // section 3 (graph, required, 279 bytes)
    "030001001701000000000000"
    "050000000000000400000004000000000000000000000000000000050000000000000000000006000000060000000000"
    "000000000000000000000500000000000000010b00070000000700000000000000000000000000000005000000010000"
    "000200000000000004000000040000000000000000000000000000000500000000000000050000080000000800000001"
    "0000000701000000050000000000000000000000000500000000000000020100090000000a0000000200000005000000"
    "00030000000000000440010000000b0000000c0c000000010000000d0000000101050000000000000005000008000000"
    "080000000100000007020000000503000000050200000000000000000000000500000000000000"
    // section 4 (constants, optional, 45 bytes)
    "040000002d00000000000000"
    "010000002e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6010000000000000063";

KeyInputs key_inputs(const CapturedGraph& cg) {
  static const Graph k_template = testing::linear_relu_graph();
  KeyInputs in = testing::linear_relu_inputs(&k_template);
  in.graph = &cg.graph;
  in.inputs = cg.inputs;
  return in;
}

TEST(GraphFormat, GoldenBytes) {
  const std::string bytes = serialize_graph(testing::golden_graph()).value();
  EXPECT_EQ(internal::to_hex(bytes), k_golden_hex);
  auto back = deserialize_graph(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, testing::golden_graph());
}

TEST(GraphFormat, GoldenBytesDecodeFromHex) {
  std::string bytes;
  ASSERT_TRUE(internal::from_hex(k_golden_hex, &bytes));
  auto back = deserialize_graph(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, testing::golden_graph());
}

TEST(GraphFormat, RandomGraphsRoundTripWithTheSameKey) {
  constexpr int k_graphs = 1000;
  int with_subgraphs = 0, with_constants = 0;
  for (uint64_t seed = 0; seed < k_graphs; ++seed) {
    testing::RandomGraphGenerator gen(seed);
    testing::RandomGraphOptions o;
    o.nodes = static_cast<int>(gen.below(60));
    const CapturedGraph cg = gen.captured(o);
    auto bytes = serialize_graph(cg);
    ASSERT_TRUE(bytes.ok()) << "seed " << seed << ": " << bytes.status().to_string();
    auto back = deserialize_graph(*bytes);
    ASSERT_TRUE(back.ok()) << "seed " << seed << ": " << back.status().to_string();
    ASSERT_EQ(*back, cg) << "seed " << seed;
    EXPECT_EQ(serialize_graph(*back).value(), *bytes) << "seed " << seed << ": the writer is deterministic";
    auto key = compute_key(key_inputs(cg));
    ASSERT_TRUE(key.ok()) << "seed " << seed << ": " << key.status().to_string();
    auto key_back = compute_key(key_inputs(*back));
    ASSERT_TRUE(key_back.ok());
    ASSERT_EQ(key->hex(), key_back->hex()) << "seed " << seed;
    for (const Node& n : cg.graph.nodes) with_subgraphs += !n.subgraphs.empty();
    with_constants += !cg.constants.empty();
  }
  // The generator must actually exercise the rarer parts.
  EXPECT_GT(with_subgraphs, 100);
  EXPECT_GT(with_constants, 100);
}

TEST(GraphFormat, SymbolicInputsKeepTheirExpressionsAndKey) {
  CapturedGraph cg = testing::golden_graph();
  TensorMeta& t = *cg.inputs[0].tensor;
  t.size_exprs = {"s0", "3"};
  t.stride_exprs = {"3", "1"};
  t.storage_offset_expr = "0";
  auto back = deserialize_graph(serialize_graph(cg).value());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, cg);
  EXPECT_EQ(back->inputs[0].tensor->size_exprs, (std::vector<std::string>{"s0", "3"}));
  const std::string key = compute_key(key_inputs(cg))->hex();
  EXPECT_EQ(compute_key(key_inputs(*back))->hex(), key);
  // The expressions are keyed (input tag 'D'): dropping them would change the key.
  CapturedGraph static_cg = cg;
  static_cg.inputs[0].tensor->size_exprs.clear();
  static_cg.inputs[0].tensor->stride_exprs.clear();
  static_cg.inputs[0].tensor->storage_offset_expr.clear();
  EXPECT_NE(compute_key(key_inputs(static_cg))->hex(), key);
  // Static tensors are written as before the symbolic flag existed: the golden bytes did not change.
  EXPECT_EQ(internal::to_hex(serialize_graph(testing::golden_graph()).value()), k_golden_hex);
}

TEST(GraphFormat, FloatBitsSurviveExactly) {
  CapturedGraph cg;
  Node n;
  n.name = "c";
  uint64_t nan_bits = 0x7ff4000000000123ULL;  // a signalling NaN with a payload
  double nan = 0;
  std::memcpy(&nan, &nan_bits, sizeof nan);
  n.args = {Value::floating(nan), Value::floating(-0.0)};
  cg.graph.nodes = {n};
  auto back = deserialize_graph(serialize_graph(cg).value()).value();
  uint64_t got = 0;
  std::memcpy(&got, &back.graph.nodes[0].args[0].f, sizeof got);
  EXPECT_EQ(got, nan_bits);
  EXPECT_TRUE(std::signbit(back.graph.nodes[0].args[1].f));
}

// Rewrites the u16 at `offset`.
std::string with_u16(std::string bytes, size_t offset, uint16_t v) {
  bytes[offset] = static_cast<char>(v & 0xff);
  bytes[offset + 1] = static_cast<char>(v >> 8);
  return bytes;
}

TEST(GraphFormat, NewerMajorIsUnsupportedNewerMinorReads) {
  const std::string bytes = serialize_graph(testing::golden_graph()).value();
  auto major = deserialize_graph(with_u16(bytes, 4, k_graph_format_major + 1));
  ASSERT_FALSE(major.ok());
  EXPECT_EQ(major.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(major.status().message().find("v3.0 is newer than this reader (v2.0)"), std::string::npos)
      << major.status().message();
  auto minor = deserialize_graph(with_u16(bytes, 6, 7));
  ASSERT_TRUE(minor.ok()) << minor.status().to_string();
  EXPECT_EQ(*minor, testing::golden_graph());
  EXPECT_EQ(graph_format_version(with_u16(bytes, 6, 7))->minor, 7);
  EXPECT_EQ(deserialize_graph(with_u16(bytes, 4, 0)).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(deserialize_graph("AOTX" + bytes.substr(4)).status().code(), StatusCode::kCorruption);
}

// Two inputs sharing a 16-byte storage (docs/formats/graph-format.md §5): the alias record after each one's metadata.
CapturedGraph aliased_inputs() {
  CapturedGraph cg;
  TensorMeta a = testing::tensor({2});
  a.alias_group = 0;
  a.alias_storage_nbytes = 16;
  TensorMeta b = a;
  b.storage_offset = 2;
  b.alias_base = AliasBase{{4}, {1}, 0};
  cg.inputs = {InputMeta{a, {}}, InputMeta{b, {}}};
  return cg;
}

TEST(GraphFormat, AliasRecordsGoldenBytesAndKey) {
  const CapturedGraph cg = aliased_inputs();
  const std::string bytes = serialize_graph(cg).value();
  const std::string inputs_section =
      "02000100a400000000000000"  // inputs, required, 164 bytes
      "02000000"                  // 2 inputs
      // a: has tensor; Tensor float32 cpu strided; sizes [2], strides [1], offset 0; bits: aliased;
      // group 0, storage 16 bytes, no base; scalar None
      "01"
      "00000000010000000200000003000000"
      "010000000200000000000000"
      "010000000100000000000000"
      "0000000000000000"
      "10"
      "00000000"
      "1000000000000000"
      "00"
      "00"
      // b: the same at offset 2, base: sizes [4], strides [1], offset 0
      "01"
      "00000000010000000200000003000000"
      "010000000200000000000000"
      "010000000100000000000000"
      "0200000000000000"
      "10"
      "00000000"
      "1000000000000000"
      "01"
      "010000000400000000000000"
      "010000000100000000000000"
      "0000000000000000"
      "00";
  EXPECT_NE(internal::to_hex(bytes).find(inputs_section), std::string::npos) << internal::to_hex(bytes);
  auto back = deserialize_graph(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, cg);
  EXPECT_EQ(compute_key(key_inputs(*back))->hex(), compute_key(key_inputs(cg))->hex());
  // The sharing is keyed: the same inputs without it give another key.
  CapturedGraph plain = cg;
  for (InputMeta& in : plain.inputs) {
    in.tensor->alias_group = -1;
    in.tensor->alias_storage_nbytes = 0;
    in.tensor->alias_base.reset();
  }
  EXPECT_NE(compute_key(key_inputs(plain))->hex(), compute_key(key_inputs(cg))->hex());
}

TEST(GraphFormat, Version1GraphsReadButCarryNoAliasRecords) {
  // A v1.0 graph (the golden one, written before alias records existed) still reads.
  const std::string golden = serialize_graph(testing::golden_graph()).value();
  auto v1 = deserialize_graph(with_u16(golden, 4, 1));
  ASSERT_TRUE(v1.ok()) << v1.status().to_string();
  EXPECT_EQ(*v1, testing::golden_graph());
  // The alias flag is no tensor flag of v1: such bytes are corrupt, not misread.
  auto aliased_v1 = deserialize_graph(with_u16(serialize_graph(aliased_inputs()).value(), 4, 1));
  ASSERT_FALSE(aliased_v1.ok());
  EXPECT_EQ(aliased_v1.status().code(), StatusCode::kCorruption);
  EXPECT_NE(aliased_v1.status().message().find("tensor flags 16"), std::string::npos) << aliased_v1.status().message();
  // A base flag other than 0 or 1 is corrupt.
  std::string bad_base = serialize_graph(aliased_inputs()).value();
  const std::string flags_group_size = std::string("\x10") + std::string(4, '\0') + "\x10" + std::string(7, '\0');
  const size_t at = bad_base.find(flags_group_size) + flags_group_size.size();  // a's has_base byte
  ASSERT_LT(at, bad_base.size());
  ASSERT_EQ(bad_base[at], 0);
  bad_base[at] = 2;
  EXPECT_EQ(deserialize_graph(bad_base).status().code(), StatusCode::kCorruption);
}

// Appends a section and raises the section count in the header.
std::string with_section(std::string bytes, uint16_t id, uint16_t flags, std::string_view body) {
  internal::ByteWriter w;
  w.u16(id);
  w.u16(flags);
  w.u64(body.size());
  w.raw(body);
  bytes[8] = static_cast<char>(bytes[8] + 1);
  return bytes + w.bytes();
}

TEST(GraphFormat, UnknownOptionalSectionsAreSkipped) {
  const std::string bytes = serialize_graph(testing::golden_graph()).value();
  auto back = deserialize_graph(with_section(bytes, 99, 0, "from a later minor version"));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, testing::golden_graph());
  // Reserved flag bits other than "required" do not make a section required.
  EXPECT_TRUE(deserialize_graph(with_section(bytes, 99, 0xfffe, "x")).ok());
}

TEST(GraphFormat, UnknownRequiredSectionIsUnsupported) {
  const std::string bytes = serialize_graph(testing::golden_graph()).value();
  auto r = deserialize_graph(with_section(bytes, 99, 1, "needs a newer reader"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

TEST(GraphFormat, SectionRules) {
  const std::string bytes = serialize_graph(testing::golden_graph()).value();
  // A known section twice.
  EXPECT_EQ(deserialize_graph(with_section(bytes, 4, 0, std::string(4, '\0'))).status().code(),
            StatusCode::kCorruption);
  // Trailing bytes after the last section.
  EXPECT_EQ(deserialize_graph(bytes + "x").status().code(), StatusCode::kCorruption);
  // A section count that leaves the last section out.
  std::string fewer = bytes;
  fewer[8] = static_cast<char>(fewer[8] - 1);
  EXPECT_EQ(deserialize_graph(fewer).status().code(), StatusCode::kCorruption);
  // Without constants (an optional section) the graph reads, without a required one it does not.
  CapturedGraph no_constants = testing::golden_graph();
  no_constants.constants.clear();
  const std::string plain = serialize_graph(no_constants).value();
  EXPECT_EQ(plain[8], 3);
  EXPECT_EQ(deserialize_graph(plain).value(), no_constants);
}

TEST(GraphFormat, ConstantsAboveTheLimitAreWrittenByDigestOnly) {
  CapturedGraph cg = testing::golden_graph();
  const std::string big(100, 'b');
  cg.constants[internal::sha256(big)] = big;
  SerializeOptions o;
  o.max_constant_bytes = 10;
  auto back = deserialize_graph(serialize_graph(cg, o).value()).value();
  EXPECT_EQ(back.constants.size(), 1u);
  EXPECT_EQ(back.constants.count(internal::sha256("c")), 1u);
  EXPECT_EQ(deserialize_graph(serialize_graph(cg).value()).value(), cg);
}

TEST(GraphFormat, ConstantBytesMustMatchTheirDigest) {
  CapturedGraph cg = testing::golden_graph();
  cg.constants.begin()->second = "d";
  EXPECT_EQ(serialize_graph(cg).status().code(), StatusCode::kInvalidArgument);
  // The same damage on the reader's side: the constant's byte is the last byte of the golden bytes.
  std::string bytes = serialize_graph(testing::golden_graph()).value();
  bytes.back() = 'd';
  auto r = deserialize_graph(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("do not hash to their digest"), std::string::npos);
}

TEST(GraphFormat, WriterRefusesWhatTheReaderWould) {
  auto refuses = [](CapturedGraph cg) { return serialize_graph(cg).status().code() == StatusCode::kInvalidArgument; };
  CapturedGraph forward_ref = testing::golden_graph();
  forward_ref.graph.nodes[3].args[0] = Value::node_ref(3);  // itself
  EXPECT_TRUE(refuses(forward_ref));
  CapturedGraph sub_ref = testing::golden_graph();
  sub_ref.graph.nodes[2].subgraphs[0].nodes[1].args[0] = Value::node_ref(1);  // refers outside its subgraph
  EXPECT_TRUE(refuses(sub_ref));
  CapturedGraph odd = testing::golden_graph();
  odd.graph.nodes[3].args.push_back(Value::dict({Value::string("k")}));
  EXPECT_TRUE(refuses(odd));
  CapturedGraph slice = testing::golden_graph();
  Value bad_slice = Value::slice(Value::none(), Value::none(), Value::none());
  bad_slice.items.pop_back();
  slice.graph.nodes[3].args.push_back(bad_slice);
  EXPECT_TRUE(refuses(slice));
  CapturedGraph input_ref = testing::golden_graph();
  input_ref.inputs[1].scalar = Value::node_ref(0);
  EXPECT_TRUE(refuses(input_ref));
  CapturedGraph deep = testing::golden_graph();
  Value v = Value::integer(1);
  for (int k = 0; k <= k_graph_max_value_depth; ++k) v = Value::list({v});
  deep.graph.nodes[3].args.push_back(v);
  EXPECT_TRUE(refuses(deep));
  deep.graph.nodes[3].args.back() = v.items[0];  // one level less: at the bound, accepted
  EXPECT_EQ(deserialize_graph(serialize_graph(deep).value()).value(), deep);
  CapturedGraph nested = testing::golden_graph();
  Graph g = nested.graph.nodes[2].subgraphs[0];
  for (int k = 0; k < k_graph_max_subgraph_depth; ++k) {  // the body then sits at depth 33
    Node holder;
    holder.op = NodeOp::kGetAttr;
    holder.target_kind = TargetKind::kSubgraph;
    holder.subgraphs.push_back(g);
    g = Graph{{holder}};
  }
  nested.graph.nodes[2].subgraphs[0] = g;
  EXPECT_TRUE(refuses(nested));
  nested.graph.nodes[2].subgraphs[0] = g.nodes[0].subgraphs[0];
  EXPECT_EQ(deserialize_graph(serialize_graph(nested).value()).value(), nested);
}

// A graph section whose one node refers to one long string many times: small on disk, huge when decoded.
std::string string_bomb(uint32_t references) {
  internal::ByteWriter strings, inputs, graph;
  strings.u32(2);
  strings.str(std::string(1 << 20, 's'));
  strings.str("");
  inputs.u32(0);
  graph.u32(1);
  graph.u8(2);  // call_function
  graph.u8(0);
  graph.u8(0);
  graph.u32(1);
  graph.u32(1);
  graph.u32(references);
  for (uint32_t k = 0; k < references; ++k) {
    graph.u8(4);  // string
    graph.u32(0);
  }
  graph.u32(0);
  graph.u32(0);
  graph.u32(1);
  graph.u32(0);
  internal::ByteWriter w;
  w.raw("AOTG");
  w.u16(1);
  w.u16(0);
  w.u32(3);
  for (auto [id, body] :
       {std::pair<uint16_t, std::string_view>{1, strings.bytes()}, {2, inputs.bytes()}, {3, graph.bytes()}}) {
    w.u16(id);
    w.u16(1);
    w.u64(body.size());
    w.raw(body);
  }
  return w.take();
}

TEST(GraphFormat, DecodedSizeIsBounded) {
  // 100 references to a 1 MiB string decode (100 MiB) under an explicit budget of 200 MiB ...
  DeserializeOptions roomy;
  roomy.max_decoded_bytes = 200ull << 20;
  auto ok = deserialize_graph(string_bomb(100), roomy);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->graph.nodes[0].args.size(), 100u);
  // ... but 10,000 of them (10 GiB from a 1 MiB input) are refused by the default bound, before allocating.
  auto r = deserialize_graph(string_bomb(10000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("memory bound"), std::string::npos) << r.status().message();
}

TEST(GraphFormat, RealGraphsFitWellWithinTheDefaultBound) {
  // The default bound is 64 MiB + 128 x the input; an FX-like graph needs about 14 x, so 32 x must suffice.
  testing::RandomGraphGenerator gen(7);
  testing::RandomGraphOptions o;
  o.nodes = 10000;
  o.realistic = true;
  const std::string bytes = serialize_graph(gen.captured(o)).value();
  DeserializeOptions tight;
  tight.max_decoded_bytes = 32 * bytes.size();
  EXPECT_TRUE(deserialize_graph(bytes, tight).ok());
  tight.max_decoded_bytes = 4 * bytes.size();
  EXPECT_EQ(deserialize_graph(bytes, tight).status().code(), StatusCode::kCorruption);
}

TEST(GraphFormat, CountsBeyondTheBytesAreRefusedBeforeAllocating) {
  std::string bytes = serialize_graph(testing::golden_graph()).value();
  // The graph section's node count is the first u32 of its body; claim 2^32 - 1 nodes.
  const size_t graph_body = bytes.find(std::string("\x03\x00\x01\x00", 4)) + 12;
  ASSERT_LT(graph_body, bytes.size());
  ASSERT_EQ(bytes[graph_body], 5);  // five nodes
  for (int k = 0; k < 4; ++k) bytes[graph_body + k] = '\xff';
  auto r = deserialize_graph(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("more nodes than bytes remain"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace aotcache
