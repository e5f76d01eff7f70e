// Timings of the graph format on generated graphs, and of compute_key and check_graph on the fixture graphs.
// Usage: aotcache_graph_format_bench [repetitions]   (prints medians; not run by ctest)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "aotcache/check.h"
#include "aotcache/key.h"
#include "aotcache/serialize.h"
#include "testing/random_graph.h"
#include "testing/sample_graphs.h"

namespace {

using namespace aotcache;

double median_us(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  f();  // warm up
  for (int k = 0; k < reps; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int count_nodes(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) {
    ++n;
    for (const Graph& sub : node.subgraphs) n += count_nodes(sub);
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 101;
  std::printf("%-34s %8s %9s %12s %12s\n", "graph", "nodes", "bytes", "write_us", "read_us");
  for (int nodes : {1000, 10000}) {
    testing::RandomGraphGenerator gen(7);
    testing::RandomGraphOptions o;
    o.nodes = nodes;
    o.realistic = true;
    const CapturedGraph cg = gen.captured(o);
    std::string bytes;
    const double w = median_us(reps, [&] { bytes = serialize_graph(cg).value(); });
    const double r = median_us(reps, [&] {
      auto back = deserialize_graph(bytes);
      if (!back.ok()) std::abort();
    });
    std::printf("%-34s %8d %9zu %12.1f %12.1f\n", ("generated, FX-like " + std::to_string(nodes)).c_str(), nodes,
                bytes.size(), w, r);
  }
  std::printf("\n%-34s %8s %9s %12s %12s %12s\n", "fixture", "nodes", "bytes", "read_us", "key_us", "check_us");
  const std::filesystem::path dir = std::filesystem::path(AOTCACHE_TEST_DATA_DIR) / "graphs";
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() == ".aotg") files.push_back(f.path());
  }
  std::sort(files.begin(), files.end());
  const Graph k_template = testing::linear_relu_graph();
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string bytes = ss.str();
    CapturedGraph cg = deserialize_graph(bytes).value();
    const double r = median_us(reps, [&] {
      if (!deserialize_graph(bytes).ok()) std::abort();
    });
    KeyInputs ki = testing::linear_relu_inputs(&k_template);
    ki.graph = &cg.graph;
    ki.inputs = cg.inputs;
    const double k = median_us(reps, [&] {
      if (!compute_key(ki).ok()) std::abort();
    });
    volatile bool sink = false;
    const double c = median_us(reps, [&] { sink = check_graph(cg.graph).has_value(); });
    (void)sink;
    std::printf("%-34s %8d %9zu %12.1f %12.1f %12.1f\n", f.stem().string().c_str(), count_nodes(cg.graph), bytes.size(),
                r, k, c);
  }
  return 0;
}
