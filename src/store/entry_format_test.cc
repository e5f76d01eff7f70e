// Entry format: round trip, golden header bytes, and detection of every kind of damage.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "aotcache/entry.h"
#include "base/sha256.h"
#include "testing/sample_graphs.h"

namespace aotcache {
namespace {

Entry sample_entry() {
  Graph g = testing::linear_relu_graph();
  auto k = compute_key(testing::linear_relu_inputs(&g));
  EXPECT_TRUE(k.ok());
  Entry e;
  e.key_digest = k->digest;
  e.manifest = k->manifest;
  e.component_values = k->component_values;
  e.metadata = Value::dict(
      {Value::string("compile_seconds"), Value::floating(12.5), Value::string("producer"), Value::string("test")});
  e.payload = std::string("compiled\0artifact", 17);
  return e;
}

TEST(EntryFormat, RoundTrip) {
  const Entry e = sample_entry();
  auto back = decode_entry(encode_entry(e).value());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, e);
  EXPECT_DOUBLE_EQ(entry_metadata_number(*back, "compile_seconds", -1), 12.5);
  EXPECT_DOUBLE_EQ(entry_metadata_number(*back, "absent", -1), -1);
}

TEST(EntryFormat, KindIsNamedFromThePayloadKind) {
  Entry e = sample_entry();
  EXPECT_EQ(entry_kind(e), "graph");  // no payload_kind: an entry written before the field existed
  for (const auto& [payload_kind, kind] :
       std::vector<std::pair<std::string, std::string>>{{"inductor_aot_artifact", "graph"},
                                                        {"aotcache.frame", "frame"},
                                                        {"guard_index", "guard-index"},
                                                        {"float_record", "float-record"},
                                                        {"something_new", "something_new"}}) {
    e.metadata = Value::dict({Value::string("payload_kind"), Value::string(payload_kind)});
    EXPECT_EQ(entry_kind(e), kind) << payload_kind;
  }
}

TEST(EntryFormat, ComponentValuesAreOptional) {
  Entry with = sample_entry();
  ASSERT_EQ(with.component_values.size(), 4u);  // autograd_state, config, environment, user
  Entry without = with;
  without.component_values.clear();
  auto back = decode_entry(encode_entry(without).value());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->component_values.empty());
  EXPECT_EQ(decode_entry(encode_entry(with).value())->component_values, with.component_values);
}

TEST(EntryFormat, GoldenHeader) {
  const std::string bytes = encode_entry(sample_entry()).value();
  // magic "AOTCACHE", version 1, flags 0, then the key digest.
  EXPECT_EQ(internal::to_hex(bytes.substr(0, 16)), "414f5443414348450100000000000000");
  EXPECT_EQ(bytes.substr(16, 32), sample_entry().key_digest);
  EXPECT_EQ(internal::sha256(std::string_view(bytes).substr(0, bytes.size() - 32)), bytes.substr(bytes.size() - 32));
}

TEST(EntryFormat, EveryBitFlipIsDetected) {
  const std::string bytes = encode_entry(sample_entry()).value();
  for (size_t pos = 0; pos < bytes.size(); ++pos) {
    std::string bad = bytes;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x10);
    auto r = decode_entry(bad);
    ASSERT_FALSE(r.ok()) << "flip at byte " << pos;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  }
}

TEST(EntryFormat, EveryTruncationIsDetected) {
  const std::string bytes = encode_entry(sample_entry()).value();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode_entry(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(r.ok()) << "truncated to " << n;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  }
}

TEST(EntryFormat, LargePayloadsAreCompressed) {
  Entry e = sample_entry();
  for (int k = 0; k < 5000; ++k) e.payload += "def kernel_" + std::to_string(k % 50) + "(in_ptr0, out_ptr0):\n";
  const std::string packed = encode_entry(e).value();
  EXPECT_EQ(packed[12], 1);  // flags: zstd
  EXPECT_LT(packed.size(), e.payload.size() / 3);
  auto back = decode_entry(packed);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, e);
  const std::string plain = encode_entry(e, PayloadCompression::kNone).value();
  EXPECT_EQ(plain[12], 0);
  EXPECT_EQ(decode_entry(plain).value(), e);
}

TEST(EntryFormat, DamagedCompressedPayloadIsCorruption) {
  Entry e = sample_entry();
  e.payload.assign(100000, 'x');
  std::string bytes = encode_entry(e).value();
  // Damage the zstd frame and re-seal the checksum: the decompressor itself must catch it.
  const size_t frame_start = bytes.find("\x28\xb5\x2f\xfd");  // zstd frame magic
  ASSERT_NE(frame_start, std::string::npos);
  const size_t frame_byte = frame_start + 12;
  bytes[frame_byte] = static_cast<char>(bytes[frame_byte] ^ 0x5a);
  std::string body = bytes.substr(0, bytes.size() - 32);
  bytes = body + internal::sha256(body);
  auto r = decode_entry(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().to_string();
}

TEST(EntryFormat, ComponentValuesMustMatchTheManifest) {
  Entry e = sample_entry();
  e.component_values[1].second.back() = 'Z';  // a config encoding that does not hash to the manifest's digest
  auto r = decode_entry(encode_entry(e).value());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

TEST(EntryFormat, NewerVersionIsUnsupported) {
  std::string bytes = encode_entry(sample_entry()).value();
  bytes[8] = 2;  // version 2
  std::string body = bytes.substr(0, bytes.size() - 32);
  bytes = body + internal::sha256(body);  // a well-formed entry of a future version
  auto r = decode_entry(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
}

TEST(EntryFormat, VersionZeroIsCorruption) {
  std::string bytes = encode_entry(sample_entry()).value();
  bytes[8] = 0;
  std::string body = bytes.substr(0, bytes.size() - 32);
  bytes = body + internal::sha256(body);
  EXPECT_EQ(decode_entry(bytes).status().code(), StatusCode::kCorruption);
}

TEST(EntryFormat, MetadataMustBeADict) {
  Entry e = sample_entry();
  e.metadata = Value::integer(3);
  EXPECT_EQ(encode_entry(e).status().code(), StatusCode::kInvalidArgument);
}

TEST(EntryFormat, GraphSectionIsOptional) {
  Entry without = sample_entry();
  const std::string old_layout = encode_entry(without).value();
  EXPECT_EQ(old_layout[48], 4);  // section count: entries without a graph keep the four-section layout
  Entry with = without;
  with.graph = std::string("AOTG\x01\x00\x00\x00serialized graph", 24);
  const std::string bytes = encode_entry(with).value();
  EXPECT_EQ(bytes[48], 5);
  auto back = decode_entry(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, with);
  // A reader of the four-section layout (this one too) reads the old bytes.
  EXPECT_EQ(decode_entry(old_layout).value(), without);
}

TEST(EntryFormat, LargeGraphsAreCompressed) {
  Entry e = sample_entry();
  for (int k = 0; k < 2000; ++k) e.graph += "node record " + std::to_string(k % 10) + ";";
  const std::string packed = encode_entry(e).value();
  EXPECT_LT(packed.size(), e.graph.size() / 3);
  EXPECT_EQ(decode_entry(packed).value(), e);
  const std::string plain = encode_entry(e, PayloadCompression::kNone).value();
  EXPECT_GT(plain.size(), e.graph.size());
  EXPECT_EQ(decode_entry(plain).value(), e);
}

TEST(EntryFormat, DamagedGraphSectionIsCorruption) {
  Entry e = sample_entry();
  e.graph = "g";
  std::string bytes = encode_entry(e).value();
  // The graph section is last: tag 5, length 2, compression byte, 'g'. An unknown compression byte, re-sealed.
  const size_t compression_byte = bytes.size() - 32 - 2;
  ASSERT_EQ(bytes[compression_byte], 0);
  bytes[compression_byte] = 7;
  std::string body = bytes.substr(0, bytes.size() - 32);
  bytes = body + internal::sha256(body);
  EXPECT_EQ(decode_entry(bytes).status().code(), StatusCode::kCorruption);
}

TEST(EntryFormat, ManifestMustHashToKey) {
  Entry e = sample_entry();
  e.key_digest = internal::sha256("another key");
  auto r = decode_entry(encode_entry(e).value());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace aotcache
