// Timings of the graph format on generated graphs, and of compute_key and check_graph on the fixture graphs.
// Usage: aotcache_graph_format_bench [repetitions]   (default 101; not run by ctest)
// Prints, per operation, the median wall time, the minimum wall time and the median thread CPU time in
// microseconds: on a shared machine the minimum and the CPU time are the steadier figures. The time to free a
// decoded graph is not counted.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

struct Timing {
  double median_us, min_us, cpu_us;
};

// `f` returns what it made; it is destroyed after the clock stops.
template <typename F>
Timing measure(int reps, F f) {
  std::vector<double> wall, cpu;
  { auto warm = f(); }
  for (int k = 0; k < reps; ++k) {
    const double c0 = thread_cpu_us();
    const auto t0 = std::chrono::steady_clock::now();
    auto result = f();
    const auto t1 = std::chrono::steady_clock::now();
    cpu.push_back(thread_cpu_us() - c0);
    wall.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], wall[0], cpu[cpu.size() / 2]};
}

std::string cell(const Timing& t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%9.1f %9.1f %9.1f", t.median_us, t.min_us, t.cpu_us);
  return buf;
}

int count_nodes(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) {
    ++n;
    for (const Graph& sub : node.subgraphs) n += count_nodes(sub);
  }
  return n;
}

template <typename T>
T must(Result<T> r) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 101;
  std::printf("times in us: median, min (wall) and median thread CPU, over %d runs\n\n", reps);
  std::printf("%-22s %6s %8s | %-29s | %-29s\n", "generated graph", "nodes", "bytes", "serialize", "deserialize");
  for (int nodes : {1000, 10000}) {
    testing::RandomGraphGenerator gen(7);
    testing::RandomGraphOptions o;
    o.nodes = nodes;
    o.realistic = true;
    const CapturedGraph cg = gen.captured(o);
    const std::string bytes = must(serialize_graph(cg));
    const Timing w = measure(reps, [&] { return must(serialize_graph(cg)); });
    const Timing r = measure(reps, [&] { return must(deserialize_graph(bytes)); });
    std::printf("%-22s %6d %8zu | %s | %s\n", "FX-like", nodes, bytes.size(), cell(w).c_str(), cell(r).c_str());
  }
  std::printf("\n%-22s %6s %8s | %-29s | %-29s | %-29s\n", "fixture", "nodes", "bytes", "deserialize", "compute_key",
              "check_graph");
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
    const CapturedGraph cg = must(deserialize_graph(bytes));
    KeyInputs ki = testing::linear_relu_inputs(&k_template);
    ki.graph = &cg.graph;
    ki.inputs = cg.inputs;
    const Timing r = measure(reps, [&] { return must(deserialize_graph(bytes)); });
    const Timing k = measure(reps, [&] { return must(compute_key(ki)); });
    const Timing c = measure(reps, [&] { return check_graph(cg.graph); });
    std::printf("%-22s %6d %8zu | %s | %s | %s\n", f.stem().string().c_str(), count_nodes(cg.graph), bytes.size(),
                cell(r).c_str(), cell(k).c_str(), cell(c).c_str());
  }
  return 0;
}
