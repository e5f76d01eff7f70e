// A cache entry and its on-disk format (docs/formats/entry-format.md): header with magic and format version, the
// manifest, metadata, the compiled payload, and a SHA-256 checksum over everything, verified on every read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "aotcache/ir.h"
#include "aotcache/key.h"
#include "aotcache/signing.h"
#include "aotcache/status.h"

namespace aotcache {

constexpr uint32_t k_entry_format_version = 1;
constexpr std::string_view k_entry_magic = "AOTCACHE";

struct Entry {
  std::string key_digest;  // 32 raw bytes: the key this entry is stored under
  Manifest manifest;
  Value metadata;                    // dict of scalars: compile_seconds, created_unix, producer, payload_kind, ...
  std::string payload;               // the serialized compiled artifact, opaque to the core
  ComponentValues component_values;  // optional: encodings of the dict components, for field-level explanations
  std::string graph;                 // optional: the captured graph (serialize_graph bytes), for `aotcache show`
  std::string kernels;               // optional: a kernel bundle (kernel_bundle.h), opaque to the entry layer

  bool operator==(const Entry&) const = default;
};

// InvalidArgument when the metadata holds a value the canonical encoding rejects.
enum class PayloadCompression : uint32_t { kNone = 0, kZstd = 1 };

// With kZstd, payloads of at least 1 KiB are stored zstd-compressed when that makes them smaller (header flags);
// so is the graph (in its own section). An entry without a graph is written byte for byte as before the section.
// With `signer` enabled, the entry ends with a signature section by signer->keys[0] (docs/formats/entry-format.md).
Result<std::string> encode_entry(const Entry& entry, PayloadCompression compression = PayloadCompression::kZstd,
                                 const SigningKeys* signer = nullptr);

// Corruption on bad magic, checksum mismatch, truncation, or a manifest that does not hash to the key;
// Unsupported on a newer format version. Never crashes on arbitrary bytes.
// With `verifier` enabled, Unauthenticated for an entry that is unsigned, signed by a key id the verifier lacks,
// or whose MAC does not match; the signature is checked before any section's contents are decoded or inflated.
// Without a verifier, a signature section is checked for its place only (last), not verified.
Result<Entry> decode_entry(std::string_view bytes, const SigningKeys* verifier = nullptr);

// The metadata of an entry from the first bytes of its file, WITHOUT verifying the checksum: for ranking entries
// (eviction by compile seconds saved) where reading whole files would cost too much. Never trust it for more.
// Corruption when the prefix does not reach the metadata or does not parse.
Result<Value> peek_entry_metadata(std::string_view prefix);

// A metadata field, or `fallback` when it is absent or of another kind.
double entry_metadata_number(const Entry& entry, const std::string& field, double fallback);
double metadata_number(const Value& metadata, const std::string& field, double fallback);
std::string entry_metadata_string(const Entry& entry, const std::string& field, const std::string& fallback);

// What an entry holds, for listings: "graph" (a compiled graph), "guard-index" (the candidates of a symbolic
// graph), "frame" (a Dynamo frame result, python/aotcache/frames/), or the payload_kind as written.
std::string entry_kind(const Entry& entry);

}  // namespace aotcache
