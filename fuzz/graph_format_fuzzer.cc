// libFuzzer target for the graph format reader. Build: cmake -DAOTCACHE_BUILD_FUZZERS=ON
// -DCMAKE_CXX_COMPILER=clang++ (ASan + UBSan over the core too); run seeded with tests/data/graphs.
// Beyond "does not crash": a graph the reader accepts must be one the writer takes and that reads back equal,
// and its readable forms must render.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "aotcache/graph_text.h"
#include "aotcache/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace aotcache;
  DeserializeOptions o;
  o.max_decoded_bytes = 64u << 20;  // below libFuzzer's default 2 GB RSS limit with room to spare
  auto r = deserialize_graph(std::string_view(reinterpret_cast<const char*>(data), size), o);
  if (!r.ok()) {
    if (r.status().code() != StatusCode::kCorruption && r.status().code() != StatusCode::kUnsupported) std::abort();
    return 0;
  }
  auto again = serialize_graph(*r);
  if (!again.ok()) std::abort();
  auto back = deserialize_graph(*again, o);
  if (!back.ok()) std::abort();
  auto again_again = serialize_graph(*back);  // bytes, not Values: a NaN never compares equal
  if (!again_again.ok() || *again_again != *again) std::abort();
  if (graph_to_text(*r).empty() || graph_to_json(*r).empty()) std::abort();
  return 0;
}
