// Graphs captured from real models by scripts/capture_fixture_graphs.py: they read, write back byte for byte, and
// give the same graph and inputs digests as the live capture did in Python (recorded beside each graph).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "aotcache/check.h"
#include "aotcache/key.h"
#include "aotcache/serialize.h"
#include "base/sha256.h"
#include "testing/sample_graphs.h"

namespace aotcache {
namespace {

const std::filesystem::path k_dir = std::filesystem::path(AOTCACHE_TEST_DATA_DIR) / "graphs";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "<name> <value>" lines written by the capture script: graph and inputs digests (hex), node counts, ...
std::map<std::string, std::string> expectations(const std::string& fixture) {
  std::map<std::string, std::string> out;
  std::istringstream in(read_file(k_dir / (fixture + ".expect")));
  std::string k, v;
  while (in >> k >> v) out[k] = v;
  return out;
}

int count_nodes(const Graph& g, int* subgraphs) {
  int n = 0;
  for (const Node& node : g.nodes) {
    ++n;
    for (const Graph& sub : node.subgraphs) {
      ++*subgraphs;
      n += count_nodes(sub, subgraphs);
    }
  }
  return n;
}

class Fixture : public ::testing::TestWithParam<const char*> {};

TEST_P(Fixture, RoundTripsWithTheCapturedKey) {
  const std::string name = GetParam();
  const std::string bytes = read_file(k_dir / (name + ".aotg"));
  ASSERT_FALSE(bytes.empty()) << "missing fixture " << name << ".aotg: run scripts/capture_fixture_graphs.py";
  auto cg = deserialize_graph(bytes);
  ASSERT_TRUE(cg.ok()) << cg.status().to_string();
  EXPECT_EQ(serialize_graph(*cg).value(), bytes) << "the writer reproduces the checked-in bytes";
  auto back = deserialize_graph(serialize_graph(*cg).value());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *cg);

  const auto expect = expectations(name);
  ASSERT_FALSE(expect.empty()) << "missing " << name << ".expect";
  int subgraphs = 0;
  EXPECT_EQ(std::to_string(count_nodes(cg->graph, &subgraphs)), expect.at("nodes"));
  EXPECT_EQ(std::to_string(subgraphs), expect.at("subgraphs"));
  EXPECT_EQ(std::to_string(cg->inputs.size()), expect.at("inputs"));

  const Graph k_template = testing::linear_relu_graph();
  KeyInputs in = testing::linear_relu_inputs(&k_template);
  in.graph = &cg->graph;
  in.inputs = cg->inputs;
  auto key = compute_key(in);
  ASSERT_TRUE(key.ok()) << key.status().to_string();
  EXPECT_EQ(internal::to_hex(key->manifest.find("graph")->digest), expect.at("graph_digest"));
  EXPECT_EQ(internal::to_hex(key->manifest.find("inputs")->digest), expect.at("inputs_digest"));
  in.graph = &back->graph;
  EXPECT_EQ(compute_key(in)->hex(), key->hex());
  // The checks see the same graph: the same verdict as the capture recorded.
  auto verdict = check_graph(cg->graph);
  EXPECT_EQ(verdict ? verdict->code : std::string("cacheable"), expect.at("check"));
}

INSTANTIATE_TEST_SUITE_P(Models, Fixture,
                         ::testing::Values("mlp", "transformer_block", "conv_net", "checkpoint", "cond"));

TEST(Fixtures, HigherOrderFixturesHoldSubgraphs) {
  for (const char* name : {"checkpoint", "cond"}) {
    auto cg = deserialize_graph(read_file(k_dir / (std::string(name) + ".aotg")));
    ASSERT_TRUE(cg.ok()) << name;
    int subgraphs = 0;
    count_nodes(cg->graph, &subgraphs);
    EXPECT_GE(subgraphs, 1) << name;
  }
}

}  // namespace
}  // namespace aotcache
