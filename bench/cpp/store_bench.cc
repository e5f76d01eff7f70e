// Local store benchmark (not run by the tests): put/get latency (median, p99) and throughput by entry size, then
// lookups, listing and the size of the layout with 100,000 entries present. Writes one JSON object.
//
//   build/cpp/aotcache_store_bench [--dir DIR] [--entries 100000] [--max-mb 100] [--cli build/cpp/aotcache]
//                                  [--out bench/results/store_bench.json]
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "aotcache/store.h"
#include "base/sha256.h"
#include "testing/sample_graphs.h"

namespace aotcache {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Summary {
  double median_s = 0, p99_s = 0, mean_s = 0;
  size_t n = 0;
};

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = v.size();
  s.median_s = v[v.size() / 2];
  s.p99_s = v[std::min(v.size() - 1, static_cast<size_t>(static_cast<double>(v.size()) * 0.99))];
  for (double x : v) s.mean_s += x / static_cast<double>(v.size());
  return s;
}

// A distinct valid entry per `n` (the key's first input has n rows), with a random (incompressible) payload.
Entry make_entry(uint64_t n, size_t payload_bytes, std::mt19937_64* rng) {
  Graph g = testing::linear_relu_graph();
  KeyInputs in = testing::linear_relu_inputs(&g);
  in.inputs[0].tensor->sizes[0] = static_cast<int64_t>(n + 1);
  in.user = Value::dict({Value::string("n"), Value::integer(static_cast<int64_t>(n))});
  auto k = compute_key(in);
  Entry e;
  e.key_digest = k->digest;
  e.manifest = k->manifest;
  e.metadata = Value::dict({Value::string("compile_seconds"), Value::floating(1.0)});
  e.payload.resize(payload_bytes);
  for (size_t i = 0; i + 8 <= payload_bytes; i += 8) {
    const uint64_t r = (*rng)();
    std::memcpy(e.payload.data() + i, &r, 8);
  }
  return e;
}

std::string json_summary(const Summary& s) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "{\"n\": %zu, \"median_ms\": %.4f, \"p99_ms\": %.4f, \"mean_ms\": %.4f}", s.n,
                s.median_s * 1e3, s.p99_s * 1e3, s.mean_s * 1e3);
  return buf;
}

uint64_t count_files(const std::string& dir) {
  const std::string cmd = "find " + dir + " | wc -l";
  FILE* p = popen(cmd.c_str(), "r");
  unsigned long long n = 0;
  if (p != nullptr) {
    if (std::fscanf(p, "%llu", &n) != 1) n = 0;
    pclose(p);
  }
  return n;
}

int run(int argc, char** argv) {
  std::string dir, out = "bench/results/store_bench.json", cli;
  uint64_t entries = 100000, max_mb = 100;
  for (int k = 1; k + 1 < argc; k += 2) {
    const std::string a = argv[k], v = argv[k + 1];
    if (a == "--dir") dir = v;
    if (a == "--entries") entries = std::stoull(v);
    if (a == "--max-mb") max_mb = std::stoull(v);
    if (a == "--out") out = v;
    if (a == "--cli") cli = v;
  }
  if (dir.empty()) {
    char tmpl[] = "/tmp/aotcache_store_bench.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    dir = tmpl;
  }
  std::mt19937_64 rng(42);
  std::string json = "{\n  \"dir\": \"" + dir + "\",\n  \"by_size\": [\n";

  // 1. Latency and throughput by entry size, each size in its own fresh directory.
  const std::vector<std::pair<uint64_t, int>> sizes = {
      {10ULL << 10, 300}, {100ULL << 10, 200}, {1ULL << 20, 50}, {10ULL << 20, 12}, {100ULL << 20, 5}};
  bool first = true;
  uint64_t serial = 1000000000;
  for (const auto& [bytes, reps] : sizes) {
    if (bytes > (max_mb << 20)) continue;
    const std::string d = dir + "/size_" + std::to_string(bytes);
    auto store = LocalStore::open(d);
    if (!store.ok()) return 1;
    std::vector<double> put_s, get_s;
    std::vector<std::string> keys;
    for (int r = 0; r < reps; ++r) {
      Entry e = make_entry(serial++, bytes, &rng);
      keys.push_back(internal::to_hex(e.key_digest));
      auto t0 = Clock::now();
      Status s = (*store)->put(e);
      put_s.push_back(seconds_since(t0));
      if (!s.ok()) {
        std::cerr << s.to_string() << "\n";
        return 1;
      }
    }
    for (const auto& key : keys) {
      auto t0 = Clock::now();
      auto got = (*store)->get(key);
      get_s.push_back(seconds_since(t0));
      if (!got.ok() || !got->has_value()) return 1;
    }
    const Summary p = summarize(put_s), g = summarize(get_s);
    char line[400];
    std::snprintf(line, sizeof line,
                  "%s    {\"bytes\": %llu, \"put\": %s, \"get\": %s, \"put_mb_per_s\": %.1f, \"get_mb_per_s\": %.1f}",
                  first ? "" : ",\n", static_cast<unsigned long long>(bytes), json_summary(p).c_str(),
                  json_summary(g).c_str(), static_cast<double>(bytes) / 1048576.0 / p.median_s,
                  static_cast<double>(bytes) / 1048576.0 / g.median_s);
    json += line;
    first = false;
    std::cerr << "size " << bytes << ": put median " << p.median_s * 1e3 << " ms p99 " << p.p99_s * 1e3
              << " ms, get median " << g.median_s * 1e3 << " ms p99 " << g.p99_s * 1e3 << " ms\n";
    if (std::system(("rm -rf " + d).c_str()) != 0) return 1;
  }
  json += "\n  ],\n";

  // 2. Many small entries: put cost as the store grows, lookups of present and missing keys, listing.
  const std::string d = dir + "/many";
  auto store = LocalStore::open(d);
  if (!store.ok()) return 1;
  std::vector<double> put_first, put_last;
  std::vector<std::string> keys;
  auto t_fill = Clock::now();
  for (uint64_t n = 0; n < entries; ++n) {
    Entry e = make_entry(n, 100, &rng);
    keys.push_back(internal::to_hex(e.key_digest));
    auto t0 = Clock::now();
    if (!(*store)->put(e).ok()) return 1;
    const double s = seconds_since(t0);
    if (n < 1000) put_first.push_back(s);
    if (n + 1000 >= entries) put_last.push_back(s);
    if ((n + 1) % 10000 == 0) std::cerr << "filled " << n + 1 << " in " << seconds_since(t_fill) << " s\n";
  }
  const double fill_s = seconds_since(t_fill);
  std::vector<double> hit_s, miss_s;
  for (int r = 0; r < 2000; ++r) {
    const std::string& key = keys[rng() % keys.size()];
    auto t0 = Clock::now();
    auto got = (*store)->get(key);
    hit_s.push_back(seconds_since(t0));
    if (!got.ok() || !got->has_value()) return 1;
    std::string missing = internal::to_hex(internal::sha256(std::to_string(rng())));
    t0 = Clock::now();
    auto none = (*store)->get(missing);
    miss_s.push_back(seconds_since(t0));
    if (!none.ok() || none->has_value()) return 1;
  }
  auto t0 = Clock::now();
  auto listed = (*store)->list();
  const double list_s = seconds_since(t0);
  t0 = Clock::now();
  auto size = (*store)->size();
  const double ledger_s = seconds_since(t0);
  t0 = Clock::now();
  auto scanned = (*store)->scan_size();
  const double scan_s = seconds_since(t0);
  double cli_ls_s = -1;
  if (!cli.empty()) {
    t0 = Clock::now();
    if (std::system((cli + " --dir " + d + " ls > /dev/null").c_str()) != 0) return 1;
    cli_ls_s = seconds_since(t0);
  }
  const uint64_t files = count_files(d);
  char buf[1500];
  std::snprintf(buf, sizeof buf,
                "  \"many\": {\"entries\": %llu, \"payload_bytes\": 100, \"fill_s\": %.2f, \"put_first_1000\": %s, "
                "\"put_last_1000\": %s, \"get_present\": %s, \"get_missing\": %s, \"list_ms\": %.1f, "
                "\"ledger_size_ms\": %.3f, \"scan_size_ms\": %.1f, \"cli_ls_ms\": %.1f, \"listed\": %zu, "
                "\"ledger_bytes\": %llu, \"scanned_bytes\": %llu, \"paths_in_dir\": %llu}\n}\n",
                static_cast<unsigned long long>(entries), fill_s, json_summary(summarize(put_first)).c_str(),
                json_summary(summarize(put_last)).c_str(), json_summary(summarize(hit_s)).c_str(),
                json_summary(summarize(miss_s)).c_str(), list_s * 1e3, ledger_s * 1e3, scan_s * 1e3, cli_ls_s * 1e3,
                listed.ok() ? listed->size() : 0, size.ok() ? static_cast<unsigned long long>(size->bytes) : 0ULL,
                scanned.ok() ? static_cast<unsigned long long>(scanned->bytes) : 0ULL,
                static_cast<unsigned long long>(files));
  json += buf;
  std::cerr << buf;
  std::ofstream(out) << json;
  if (std::system(("rm -rf " + dir).c_str()) != 0) return 1;
  return 0;
}

}  // namespace
}  // namespace aotcache

int main(int argc, char** argv) {
  return aotcache::run(argc, argv);
}
