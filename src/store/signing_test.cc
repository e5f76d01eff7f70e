// Signed entries: HMAC vector, key parsing, sign/verify, wrong and unknown keys, tampering, unsigned entries,
// rotation, and the local store's refusal of unsigned entries when a key is set.
#include "aotcache/signing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "aotcache/entry.h"
#include "aotcache/store.h"
#include "base/hmac.h"
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

SigningKeys keys(const std::string& text) {
  auto k = parse_signing_keys(text);
  EXPECT_TRUE(k.ok()) << k.status().to_string();
  return k.ok() ? *k : SigningKeys{};
}

// Recomputes the SHA-256 trailer so that only the signature can catch a change.
std::string with_fresh_checksum(std::string bytes) {
  bytes.resize(bytes.size() - 32);
  return bytes + internal::sha256(bytes);
}

const char* k_key_a = "a:0123456789abcdef-secret-a";
const char* k_key_b = "b:0123456789abcdef-secret-b";

TEST(Hmac, Rfc4231TestCase2) {
  EXPECT_EQ(internal::to_hex(internal::hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(internal::constant_time_equal("abc", "abc"));
  EXPECT_FALSE(internal::constant_time_equal("abc", "abd"));
  EXPECT_FALSE(internal::constant_time_equal("abc", "ab"));
}

TEST(SigningKeys, Parse) {
  SigningKeys k = keys(std::string(k_key_b) + "," + k_key_a);
  ASSERT_EQ(k.keys.size(), 2u);
  EXPECT_EQ(k.keys[0].id, "b");
  EXPECT_EQ(k.keys[1].secret, "0123456789abcdef-secret-a");
  EXPECT_FALSE(keys("").enabled());
  EXPECT_EQ(parse_signing_keys("x:y:0123456789abcdef").value().keys[0].secret, "y:0123456789abcdef");
  for (const char* bad : {"nocolon", ":0123456789abcdef0", "a:short", "a b:0123456789abcdef0",
                          "a:0123456789abcdef0,a:0123456789abcdef1", "a:0123456789abcdef0,"}) {
    auto r = parse_signing_keys(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().message().find("0123456789abcdef"), std::string::npos) << "a secret leaked: " << bad;
  }
}

TEST(SignedEntry, RoundTripAndGoldenVector) {
  const SigningKeys k = keys(k_key_a);
  const std::string bytes = encode_entry(sample_entry(), PayloadCompression::kZstd, &k).value();
  auto back = decode_entry(bytes, &k);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, sample_entry());
  // Section count 5; the signature section is the last before the trailer: tag 6, length 4+4+1+32 = 41,
  // scheme 1, key id "a", MAC over every byte before the section.
  EXPECT_EQ(bytes[48], 5);
  const size_t sig_at = bytes.size() - 32 - (4 + 8 + 41);
  EXPECT_EQ(internal::to_hex(bytes.substr(sig_at, 4 + 8 + 4 + 4 + 1)),
            "06000000290000000000000001000000010000006"
            "1");
  const std::string mac = bytes.substr(bytes.size() - 64, 32);
  EXPECT_EQ(mac, internal::hmac_sha256("0123456789abcdef-secret-a", std::string_view(bytes).substr(0, sig_at)));
  EXPECT_EQ(internal::to_hex(mac), "067e866b61c856512cbd6e7b3e2aee2b73459d54ffb15d1c4c64c7986766494f");
  // A reader without keys still reads a signed entry.
  EXPECT_TRUE(decode_entry(bytes).ok());
}

TEST(SignedEntry, WrongSecretIsUnauthenticated) {
  const SigningKeys writer = keys(k_key_a);
  const SigningKeys reader = keys("a:0123456789abcdef-other-secret");
  auto r = decode_entry(encode_entry(sample_entry(), PayloadCompression::kZstd, &writer).value(), &reader);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(r.status().message().find("does not match"), std::string::npos) << r.status().message();
}

TEST(SignedEntry, UnknownKeyIdIsUnauthenticated) {
  const SigningKeys writer = keys(k_key_a);
  const SigningKeys reader = keys(k_key_b);
  auto r = decode_entry(encode_entry(sample_entry(), PayloadCompression::kZstd, &writer).value(), &reader);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(r.status().message().find("unknown key id 'a'"), std::string::npos) << r.status().message();
}

TEST(SignedEntry, UnsignedEntryIsRejectedWhenAKeyIsSet) {
  const SigningKeys reader = keys(k_key_a);
  auto r = decode_entry(encode_entry(sample_entry()).value(), &reader);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(decode_entry(encode_entry(sample_entry()).value()).ok());  // no key: unsigned entries are fine
}

TEST(SignedEntry, EveryTamperedByteIsCaughtEvenWithAFreshChecksum) {
  const SigningKeys k = keys(k_key_a);
  const std::string bytes = encode_entry(sample_entry(), PayloadCompression::kZstd, &k).value();
  const std::string_view payload = "compiled";
  const size_t payload_at = bytes.find(payload);
  ASSERT_NE(payload_at, std::string::npos);
  // Every byte before the signature section: header, manifest, metadata, payload, component values.
  const size_t sig_at = bytes.size() - 32 - (4 + 8 + 41);
  for (size_t pos = 0; pos < sig_at; ++pos) {
    std::string bad = bytes;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x01);
    auto r = decode_entry(with_fresh_checksum(bad), &k);
    // A flip may first break the structure (Corruption) or the version (Unsupported); it is never accepted.
    ASSERT_FALSE(r.ok()) << "flip at byte " << pos;
  }
  // A payload byte changed: a forged artifact with a valid checksum.
  std::string forged = bytes;
  forged[payload_at] = 'X';
  auto r = decode_entry(with_fresh_checksum(forged), &k);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
}

TEST(SignedEntry, TamperedManifestSummaryIsUnauthenticated) {
  const SigningKeys k = keys(k_key_a);
  const std::string bytes = encode_entry(sample_entry(), PayloadCompression::kZstd, &k).value();
  // Summaries are not bound by the key digest, only by the trailer and the MAC.
  const std::string& summary = sample_entry().manifest.components[0].summary;
  ASSERT_FALSE(summary.empty());
  const size_t at = bytes.find(summary);
  ASSERT_NE(at, std::string::npos);
  std::string bad = bytes;
  bad[at] = static_cast<char>(bad[at] ^ 0x20);
  EXPECT_TRUE(decode_entry(with_fresh_checksum(bad)).ok());  // without a key, nothing can tell
  auto r = decode_entry(with_fresh_checksum(bad), &k);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
}

TEST(SignedEntry, StrippedSignatureIsUnauthenticated) {
  const SigningKeys k = keys(k_key_a);
  std::string bytes = encode_entry(sample_entry(), PayloadCompression::kZstd, &k).value();
  bytes.erase(bytes.size() - 32 - (4 + 8 + 41), 4 + 8 + 41);
  bytes[48] = 4;
  auto r = decode_entry(with_fresh_checksum(bytes), &k);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(decode_entry(with_fresh_checksum(bytes)).ok());
}

TEST(SignedEntry, RotationVerifiesOldAndSignsWithTheFirst) {
  const SigningKeys old_keys = keys(k_key_a);
  const SigningKeys rotated = keys(std::string(k_key_b) + "," + k_key_a);
  const std::string old_entry = encode_entry(sample_entry(), PayloadCompression::kZstd, &old_keys).value();
  EXPECT_TRUE(decode_entry(old_entry, &rotated).ok());
  const std::string new_entry = encode_entry(sample_entry(), PayloadCompression::kZstd, &rotated).value();
  EXPECT_EQ(new_entry[new_entry.size() - 32 - 33], 'b');  // key id "b" just before the MAC
  EXPECT_TRUE(decode_entry(new_entry, &rotated).ok());
  EXPECT_EQ(decode_entry(new_entry, &old_keys).status().code(), StatusCode::kUnauthenticated);
  // Retired key: entries it signed are refused.
  const SigningKeys retired = keys(k_key_b);
  EXPECT_EQ(decode_entry(old_entry, &retired).status().code(), StatusCode::kUnauthenticated);
}

TEST(SignedEntry, SignatureMustBeTheLastSection) {
  const SigningKeys k = keys(k_key_a);
  std::string bytes = encode_entry(sample_entry(), PayloadCompression::kZstd, &k).value();
  // Append an unknown section (tag 9, empty) after the signature and bump the section count.
  bytes.resize(bytes.size() - 32);
  bytes += std::string("\x09\0\0\0\0\0\0\0\0\0\0\0", 12);
  bytes[48] = 6;
  auto r = decode_entry(bytes + internal::sha256(bytes), &k);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

class SignedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aotcache_signing_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = LocalStore::open(dir_);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    store_ = std::move(*s);
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }
  std::string dir_;
  std::unique_ptr<LocalStore> store_;
};

TEST_F(SignedStoreTest, UnsignedEntryIsRefusedAndQuarantined) {
  const Entry e = sample_entry();
  const std::string key = internal::to_hex(e.key_digest);
  ASSERT_TRUE(store_->put(e).ok());  // written unsigned
  store_->set_signing_keys(keys(k_key_a));
  auto got = store_->get(key);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(store_->list_quarantine().value().size(), 1u);
  EXPECT_FALSE(store_->get(key).value().has_value());  // moved aside: a miss now
  // Signed puts are served; put_encoded refuses unsigned bytes and writes nothing.
  ASSERT_TRUE(store_->put(e).ok());
  EXPECT_TRUE(store_->get(key).value().has_value());
  ASSERT_TRUE(store_->remove(key).ok());
  auto imported = store_->put_encoded(encode_entry(e).value());
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), StatusCode::kUnauthenticated);
  EXPECT_FALSE(store_->read_entry_file(key).value().has_value());
}

TEST(SignedStoreOpen, MalformedEnvironmentKeyFailsOpen) {
  ASSERT_EQ(setenv("AOTCACHE_SIGNING_KEY", "a:short", 1), 0);
  auto s = LocalStore::open("/tmp/aotcache_signing_open_test");
  ASSERT_EQ(unsetenv("AOTCACHE_SIGNING_KEY"), 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace aotcache
