// Hostile input: thousands of deterministic mutations (bit flips, truncations, insertions, length and count
// overwrites) of valid serialized graphs. The reader must return, never crash (ASan/UBSan in the fuzz build);
// whatever it accepts must be a well-formed graph: one the writer takes and that reads back to the same bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "aotcache/serialize.h"
#include "testing/golden_graph.h"
#include "testing/random_graph.h"

namespace aotcache {
namespace {

std::vector<std::pair<std::string, std::string>> seeds() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("golden", serialize_graph(testing::golden_graph()).value());
  for (uint64_t seed = 0; seed < 8; ++seed) {
    testing::RandomGraphGenerator gen(1000 + seed);
    testing::RandomGraphOptions o;
    o.nodes = 12;
    out.emplace_back("random" + std::to_string(seed), serialize_graph(gen.captured(o)).value());
  }
  const std::filesystem::path dir = std::filesystem::path(AOTCACHE_TEST_DATA_DIR) / "graphs";
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() == ".aotg") files.push_back(f.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out.emplace_back(f.filename().string(), ss.str());
  }
  return out;
}

struct Tally {
  int runs = 0, accepted = 0;
};

// One mutated input: decoding returns; an accepted graph is well-formed (writable, stable under a round trip).
void check_one(const std::string& bytes, const std::string& what, Tally* t) {
  ++t->runs;
  DeserializeOptions o;
  o.max_decoded_bytes = 256u << 20;
  auto r = deserialize_graph(bytes, o);
  if (!r.ok()) {
    const StatusCode c = r.status().code();
    ASSERT_TRUE(c == StatusCode::kCorruption || c == StatusCode::kUnsupported)
        << what << ": " << r.status().to_string();
    return;
  }
  ++t->accepted;
  auto again = serialize_graph(*r);
  ASSERT_TRUE(again.ok()) << what << ": accepted a graph the writer refuses: " << again.status().to_string();
  auto back = deserialize_graph(*again);
  ASSERT_TRUE(back.ok()) << what;
  // Compared as bytes: a mutated float may be a NaN, which never compares equal as a Value.
  ASSERT_EQ(serialize_graph(*back).value(), *again) << what;
}

TEST(GraphFormatMutation, NoMutationCrashesOrYieldsAMalformedGraph) {
  const auto inputs = seeds();
  ASSERT_GE(inputs.size(), 1u + 8u + 5u) << "the fixture graphs are missing from " << AOTCACHE_TEST_DATA_DIR;
  Tally t;
  testing::RandomGraphGenerator rng(42);
  for (const auto& [name, bytes] : inputs) {
    const size_t n = bytes.size();
    // Bit flips: every bit of small inputs, 600 random ones of large ones.
    const size_t flips = std::min<size_t>(n * 8, 600);
    for (size_t k = 0; k < flips; ++k) {
      const size_t bit = n * 8 <= 600 ? k : rng.below(n * 8);
      std::string m = bytes;
      m[bit / 8] = static_cast<char>(m[bit / 8] ^ (1 << (bit % 8)));
      check_one(m, name + " flip bit " + std::to_string(bit), &t);
    }
    // Truncations: every length of small inputs, 300 random ones of large ones; all must fail.
    const size_t cuts = std::min<size_t>(n, 300);
    for (size_t k = 0; k < cuts; ++k) {
      const size_t len = n <= 300 ? k : rng.below(n);
      auto r = deserialize_graph(std::string_view(bytes).substr(0, len));
      ++t.runs;
      ASSERT_FALSE(r.ok()) << name << " truncated to " << len;
      ASSERT_EQ(r.status().code(), StatusCode::kCorruption) << name << " truncated to " << len;
    }
    // Insertions of 1-8 random bytes.
    for (int k = 0; k < 200; ++k) {
      std::string m = bytes;
      const size_t at = rng.below(n + 1);
      std::string junk(1 + rng.below(8), '\0');
      for (char& c : junk) c = static_cast<char>(rng.next());
      m.insert(at, junk);
      check_one(m, name + " insert at " + std::to_string(at), &t);
    }
    // Length and count overwrites: a u32 or u64 at any offset set to values that lie about sizes.
    static const uint64_t k_lies[] = {0,      1,          2,          0x7f,           0xff,
                                      0xffff, 0x7fffffff, 0xffffffff, 0x100000000ULL, 0xffffffffffffffffULL};
    for (int k = 0; k < 400; ++k) {
      std::string m = bytes;
      const int width = rng.below(2) ? 4 : 8;
      if (n < static_cast<size_t>(width)) break;
      const size_t at = rng.below(n - width + 1);
      uint64_t v = k_lies[rng.below(sizeof k_lies / sizeof *k_lies)];
      if (rng.below(3) == 0) v = (n - at) + rng.below(16) - 8;  // near the remaining size: off-by-one lies
      for (int b = 0; b < width; ++b) m[at + b] = static_cast<char>((v >> (8 * b)) & 0xff);
      check_one(m, name + " overwrite at " + std::to_string(at), &t);
    }
    // Random byte overwrites in bursts.
    for (int k = 0; k < 200; ++k) {
      std::string m = bytes;
      for (uint64_t j = 0, bursts = 1 + rng.below(4); j < bursts; ++j) {
        const size_t at = rng.below(n);
        m[at] = static_cast<char>(rng.next());
      }
      check_one(m, name + " burst", &t);
    }
  }
  std::cout << "[ mutation ] " << t.runs << " mutated inputs from " << inputs.size() << " graphs, " << t.accepted
            << " accepted as well-formed graphs\n";
  EXPECT_GT(t.runs, 10000);
}

}  // namespace
}  // namespace aotcache
