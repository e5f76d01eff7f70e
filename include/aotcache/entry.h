// A cache entry and its on-disk format (docs/entry-format.md): header with magic and format version, the manifest,
// metadata, the compiled payload, and a SHA-256 checksum over everything, verified on every read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "aotcache/ir.h"
#include "aotcache/key.h"
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

  bool operator==(const Entry&) const = default;
};

// InvalidArgument when the metadata holds a value the canonical encoding rejects.
enum class PayloadCompression : uint32_t { kNone = 0, kZstd = 1 };

// With kZstd, payloads of at least 1 KiB are stored zstd-compressed when that makes them smaller (header flags);
// so is the graph (in its own section). An entry without a graph is written byte for byte as before the section.
Result<std::string> encode_entry(const Entry& entry, PayloadCompression compression = PayloadCompression::kZstd);

// Corruption on bad magic, checksum mismatch, truncation, or a manifest that does not hash to the key;
// Unsupported on a newer format version. Never crashes on arbitrary bytes.
Result<Entry> decode_entry(std::string_view bytes);

// The metadata of an entry from the first bytes of its file, WITHOUT verifying the checksum: for ranking entries
// (eviction by compile seconds saved) where reading whole files would cost too much. Never trust it for more.
// Corruption when the prefix does not reach the metadata or does not parse.
Result<Value> peek_entry_metadata(std::string_view prefix);

// A metadata field, or `fallback` when it is absent or of another kind.
double entry_metadata_number(const Entry& entry, const std::string& field, double fallback);
double metadata_number(const Value& metadata, const std::string& field, double fallback);

}  // namespace aotcache
