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
  EXPECT_EQ(internal::to_hex(mac), "2a441104d905b4c17185a74c6701b4a52af531ac0359cf23fadaa18ff2a59bc4");
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

TEST(SigningKeys, SigningKeyThenAcceptedKeys) {
  auto k = make_signing_keys(k_key_b, {k_key_a});
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  ASSERT_EQ(k->keys.size(), 2u);
  EXPECT_EQ(k->keys[0].id, "b");  // signs
  EXPECT_EQ(k->keys[1].id, "a");  // verifies only
  // Several items per text, as in parse_signing_keys; an accepted key equal to one already listed counts once.
  auto dup = make_signing_keys(k_key_b, {std::string(k_key_a) + "," + k_key_b, k_key_a});
  ASSERT_TRUE(dup.ok()) << dup.status().to_string();
  EXPECT_EQ(dup->keys.size(), 2u);
  EXPECT_FALSE(make_signing_keys("", {}).value().enabled());
  EXPECT_FALSE(make_signing_keys("", {"", ""}).value().enabled());
  struct Bad {
    std::string signing;
    std::vector<std::string> accepted;
  };
  for (const Bad& bad : std::vector<Bad>{{"", {k_key_a}},                                     // verify-only
                                         {k_key_a, {"a:0123456789abcdef-secret-x"}},          // one id, two secrets
                                         {k_key_a, {"b:short"}},                              // malformed accepted
                                         {"a:0123456789abcdef-secret-a,", {}},                // malformed signing
                                         {k_key_a, {"b:0123456789abcdef-secret-b,junk"}}}) {  // malformed item
    auto r = make_signing_keys(bad.signing, bad.accepted);
    ASSERT_FALSE(r.ok()) << bad.signing;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().find("0123456789abcdef"), std::string::npos) << r.status().message();
  }
}

class SignedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aotcache_signing_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = open_with(SigningKeys{});
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0); }
  std::unique_ptr<LocalStore> open_with(SigningKeys signing) {
    StoreOptions options;
    options.signing = std::move(signing);
    auto s = LocalStore::open(dir_, options);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? std::move(*s) : nullptr;
  }
  int64_t counter(LocalStore& store, const std::string& name) {
    auto c = store.read_counters();
    return c.ok() ? (*c)[name] : -1;
  }
  std::string dir_;
  std::unique_ptr<LocalStore> store_;
};

// An entry the store cannot authenticate is untrusted, not corrupt: another key set's entry (a rotation in
// progress, two clusters sharing a directory) must survive for the readers that accept it.
TEST_F(SignedStoreTest, UnsignedEntryIsUntrustedAndLeftInPlace) {
  const Entry e = sample_entry();
  const std::string key = internal::to_hex(e.key_digest);
  ASSERT_TRUE(store_->put(e).ok());  // written unsigned
  const std::string unsigned_bytes = store_->read_entry_file(key).value().value();
  auto signed_store = open_with(keys(k_key_a));
  auto got = signed_store->get(key);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(signed_store->peek(key).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(signed_store->check_entry(key).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(signed_store->list_quarantine().value().empty());
  EXPECT_EQ(signed_store->read_entry_file(key).value(), unsigned_bytes);  // untouched
  EXPECT_EQ(counter(*signed_store, "corrupt"), 0);
  EXPECT_TRUE(store_->get(key).value().has_value());  // a reader without keys still reads it
  // put_encoded refuses unsigned bytes and writes nothing.
  ASSERT_TRUE(store_->remove(key).ok());
  auto imported = signed_store->put_encoded(unsigned_bytes);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), StatusCode::kUnauthenticated);
  EXPECT_FALSE(signed_store->read_entry_file(key).value().has_value());
  // Signed puts are served.
  ASSERT_TRUE(signed_store->put(e).ok());
  EXPECT_TRUE(signed_store->get(key).value().has_value());
}

TEST_F(SignedStoreTest, AnotherKeysEntryIsUntrustedAndLeftInPlace) {
  const Entry e = sample_entry();
  const std::string key = internal::to_hex(e.key_digest);
  auto store_b = open_with(keys(k_key_b));
  ASSERT_TRUE(store_b->put(e).ok());
  auto store_a = open_with(keys(k_key_a));
  for (int round = 0; round < 2; ++round) {  // a second lookup finds the same file, not a miss
    auto got = store_a->get(key);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kUnauthenticated);
    EXPECT_NE(got.status().message().find("unknown key id 'b'"), std::string::npos) << got.status().message();
  }
  EXPECT_TRUE(store_a->read_entry_file(key).value().has_value());
  EXPECT_TRUE(store_a->list_quarantine().value().empty());
  EXPECT_EQ(counter(*store_a, "corrupt"), 0);
  EXPECT_TRUE(store_b->get(key).value().has_value());  // its owner still reads it
  // Same id, another secret (a bad HMAC): untrusted as well.
  auto impostor = open_with(keys("b:0123456789abcdef-secret-x"));
  EXPECT_EQ(impostor->get(key).status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(impostor->read_entry_file(key).value().has_value());
  EXPECT_TRUE(impostor->list_quarantine().value().empty());
}

TEST_F(SignedStoreTest, AcceptedOldKeyVerifiesAndTheSigningKeySigns) {
  const Entry e = sample_entry();
  const std::string key = internal::to_hex(e.key_digest);
  auto old_store = open_with(keys(k_key_a));
  ASSERT_TRUE(old_store->put(e).ok());
  auto rotated = open_with(make_signing_keys(k_key_b, {k_key_a}).value());
  auto got = rotated->get(key);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, e);
  // New entries are signed with the signing key: a reader of the new key alone verifies them.
  ASSERT_TRUE(rotated->put(e).ok());
  auto new_only = open_with(keys(k_key_b));
  EXPECT_TRUE(new_only->get(key).value().has_value());
  EXPECT_EQ(old_store->get(key).status().code(), StatusCode::kUnauthenticated);
}

TEST_F(SignedStoreTest, DamagedSignedEntryIsStillCorruptAndQuarantined) {
  const Entry e = sample_entry();
  const std::string key = internal::to_hex(e.key_digest);
  auto store_a = open_with(keys(k_key_a));
  ASSERT_TRUE(store_a->put(e).ok());
  std::string bytes = store_a->read_entry_file(key).value().value();
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);  // no fresh checksum: damage
  ASSERT_TRUE(default_file_system()->write_file_atomic(store_a->entry_path(key), bytes, dir_ + "/tmp").ok());
  EXPECT_EQ(store_a->get(key).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(store_a->list_quarantine().value().size(), 1u);
  EXPECT_FALSE(store_a->read_entry_file(key).value().has_value());
  EXPECT_EQ(counter(*store_a, "corrupt"), 1);
}

TEST(SignedStoreOpen, TheEnvironmentIsNotRead) {
  // The store takes its keys from StoreOptions only: the edges (CLI, Python settings) read the environment.
  ASSERT_EQ(setenv("AOTCACHE_SIGNING_KEY", "a:short", 1), 0);
  ASSERT_EQ(setenv("AOTCACHE_EVICTION", "saved-per-byte", 1), 0);
  auto s = LocalStore::open("/tmp/aotcache_signing_open_test");
  ASSERT_EQ(unsetenv("AOTCACHE_SIGNING_KEY"), 0);
  ASSERT_EQ(unsetenv("AOTCACHE_EVICTION"), 0);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_FALSE((*s)->signing_keys().enabled());
  EXPECT_EQ((*s)->eviction_policy(), EvictionPolicy::kLru);
  EXPECT_EQ((*s)->max_size(), k_default_max_size);
  ASSERT_EQ(std::system("rm -rf /tmp/aotcache_signing_open_test"), 0);
}

}  // namespace
}  // namespace aotcache
