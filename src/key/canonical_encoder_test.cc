// Golden bytes of the canonical encoding (docs/formats/key-encoding.md): a change here must be deliberate.
#include "key/canonical_encoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "base/sha256.h"

namespace aotcache::internal {
namespace {

std::string hex_of(const Value& v, int64_t limit = 0) {
  ByteWriter w;
  EXPECT_TRUE(encode_value(v, limit, &w).ok());
  return to_hex(w.bytes());
}

TEST(CanonicalEncoder, ScalarGoldenBytes) {
  EXPECT_EQ(hex_of(Value::none()), "00");
  EXPECT_EQ(hex_of(Value::boolean(true)), "0101");
  EXPECT_EQ(hex_of(Value::integer(1)), "020100000000000000");
  EXPECT_EQ(hex_of(Value::integer(-2)), "02feffffffffffffff");
  EXPECT_EQ(hex_of(Value::floating(1.0)), "03000000000000f03f");
  EXPECT_EQ(hex_of(Value::string("ab")), "04020000006162");
  EXPECT_EQ(hex_of(Value::node_ref(2), 3), "0502000000");
  EXPECT_EQ(hex_of(Value::torch_enum("dtype", "float32")), "0905000000647479706507000000666c6f61743332");
}

TEST(CanonicalEncoder, SliceAndEllipsisGoldenBytes) {
  EXPECT_EQ(hex_of(Value::slice(Value::none(), Value::integer(2), Value::none())), "0a0002020000000000000000");
  EXPECT_EQ(hex_of(Value::ellipsis()), "0b");
}

TEST(CanonicalEncoder, ContainersGoldenBytes) {
  EXPECT_EQ(hex_of(Value::list({Value::integer(1)})), "0601000000020100000000000000");
  EXPECT_EQ(hex_of(Value::tuple({})), "0700000000");
  EXPECT_EQ(hex_of(Value::dict({Value::string("k"), Value::none()})), "080100000004010000006b00");
}

TEST(CanonicalEncoder, TypesNeverCollide) {
  // 1, 1.0, True and "1" are four different values.
  std::set<std::string> seen = {hex_of(Value::integer(1)), hex_of(Value::floating(1.0)), hex_of(Value::boolean(true)),
                                hex_of(Value::string("1"))};
  EXPECT_EQ(seen.size(), 4u);
  // A list is not a tuple of the same items.
  EXPECT_NE(hex_of(Value::list({Value::integer(1)})), hex_of(Value::tuple({Value::integer(1)})));
}

TEST(CanonicalEncoder, FloatsAreBitExactWithOneNaN) {
  EXPECT_NE(hex_of(Value::floating(0.0)), hex_of(Value::floating(-0.0)));
  const double nan1 = std::numeric_limits<double>::quiet_NaN();
  const double nan2 = -std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(hex_of(Value::floating(nan1)), hex_of(Value::floating(nan2)));
  EXPECT_EQ(hex_of(Value::floating(nan1)), "03000000000000f87f");
  EXPECT_NE(hex_of(Value::floating(0.1)), hex_of(Value::floating(0.1 + 1e-17 * 2)));
}

TEST(CanonicalEncoder, RejectsForwardNodeReference) {
  ByteWriter w;
  Status s = encode_value(Value::node_ref(3), 3, &w);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(CanonicalEncoder, DecodeRoundTrip) {
  Value v = Value::dict(
      {Value::string("a"), Value::list({Value::integer(-5), Value::floating(2.5), Value::none()}), Value::string("b"),
       Value::tuple({Value::boolean(false), Value::torch_enum("device", "cpu")}), Value::string("c"),
       Value::list({Value::slice(Value::integer(1), Value::none(), Value::none()), Value::ellipsis()})});
  ByteWriter w;
  ASSERT_TRUE(encode_value(v, 0, &w).ok());
  ByteReader r(w.bytes());
  Value back;
  ASSERT_TRUE(decode_value(&r, &back).ok());
  EXPECT_TRUE(r.done());
  EXPECT_EQ(back, v);
}

TEST(CanonicalEncoder, DecodeRejectsEveryTruncation) {
  Value v = Value::list({Value::string("hello"), Value::integer(7), Value::dict({Value::string("x"), Value::none()})});
  ByteWriter w;
  ASSERT_TRUE(encode_value(v, 0, &w).ok());
  for (size_t n = 0; n < w.size(); ++n) {
    ByteReader r(std::string_view(w.bytes()).substr(0, n));
    Value back;
    EXPECT_EQ(decode_value(&r, &back).code(), StatusCode::kCorruption) << "prefix of " << n << " bytes";
  }
}

TEST(CanonicalEncoder, DecodeRefusesHugeCountsWithoutAllocating) {
  const std::string bytes = std::string("\x06\xff\xff\xff\x7f", 5);  // a list claiming 2^31 items
  ByteReader r(bytes);
  Value back;
  EXPECT_EQ(decode_value(&r, &back).code(), StatusCode::kCorruption);
}

// docs/formats/key-encoding.md §4.2: inputs sharing a storage carry an alias record after their metadata.
TEST(CanonicalEncoder, InputsAliasRecordGoldenBytes) {
  TensorMeta a;  // float32[2] on cpu, in group 3 (keyed as 0) of a 16-byte storage, not a view
  a.dtype = "float32";
  a.device = "cpu";
  a.sizes = {2};
  a.strides = {1};
  a.alias_group = 3;
  a.alias_storage_nbytes = 16;
  TensorMeta b = a;  // the same storage at offset 2, a view of a float32[4] base
  b.storage_offset = 2;
  b.alias_base = AliasBase{{4}, {1}, 0};
  TensorMeta c = a;  // shares with no other input
  c.alias_group = -1;
  c.alias_storage_nbytes = 0;
  ByteWriter w;
  ASSERT_TRUE(encode_inputs({InputMeta{a, {}}, InputMeta{b, {}}, InputMeta{c, {}}}, &w).ok());
  // "Tensor", "float32", "cpu", "strided", sizes [2], strides [1]; then the offset and three flag bytes.
  const std::string meta =
      "0600000054656e736f7207000000666c6f617433320300000063707507000000737472696465640100000002000000000000000100"
      "00000100000000000000";
  const std::string group0 = "41000000001000000000000000";  // 'A', group 0, a 16-byte storage
  std::string expected = "03000000";                        // 3 inputs
  // a: offset 0 and the flags; in group 0, not a view.
  expected += "54" + meta + "0000000000000000000000" + group0 + "4e";
  // b: offset 2 and the flags; in group 0, a view ('V') of a base of sizes [4], strides [1], offset 0.
  expected += "54" + meta + "0200000000000000000000" + group0 + "56";
  expected += "0100000004000000000000000100000001000000000000000000000000000000";
  // c: in no group.
  expected += "54" + meta + "0000000000000000000000" + "4e";
  EXPECT_EQ(to_hex(w.bytes()), expected);
}

}  // namespace
}  // namespace aotcache::internal
