// Entry encoding v1. Layout and rules: docs/formats/entry-format.md.
#include <cstring>
#include <optional>

#include "aotcache/entry.h"
#include "base/bytes.h"
#include "base/hmac.h"
#include "base/sha256.h"
#include "key/canonical_encoder.h"
#include "store/compression.h"

namespace aotcache {
namespace {

using internal::ByteReader;
using internal::ByteWriter;

enum SectionTag : uint32_t {
  k_section_manifest = 1,
  k_section_metadata = 2,
  k_section_payload = 3,
  k_section_component_values = 4,  // optional
  k_section_graph = 5,             // optional: u8 compression || (raw bytes | u64 raw size || zstd frame)
  k_section_signature = 6,         // optional; when present, the last section (§9)
  k_section_kernels = 7,           // optional: u8 compression || (kernel bundle | u64 raw size || zstd frame)
};
constexpr uint32_t k_max_known_tag = 7;

constexpr uint32_t k_signature_scheme_hmac_sha256 = 1;

constexpr size_t k_header_size = 8 + 4 + 4 + 32 + 4;
constexpr size_t k_min_compressed_payload = 1024;
constexpr int k_zstd_level = 3;  // zstd's default: ~300 MB/s here, 3-5x on Inductor payloads

std::string encode_manifest(const Manifest& m) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(m.components.size()));
  for (const auto& c : m.components) {
    w.str(c.name);
    w.str(c.digest);
    w.str(c.summary);
  }
  return w.take();
}

Status decode_manifest(std::string_view bytes, Manifest* out) {
  ByteReader r(bytes);
  uint32_t count = 0;
  AOTCACHE_RETURN_IF_ERROR(r.u32(&count));
  if (count > r.remaining() / 12) return Status::corruption("manifest claims more components than fit");
  for (uint32_t k = 0; k < count; ++k) {
    std::string_view name, digest, summary;
    AOTCACHE_RETURN_IF_ERROR(r.str(&name));
    AOTCACHE_RETURN_IF_ERROR(r.str(&digest));
    AOTCACHE_RETURN_IF_ERROR(r.str(&summary));
    if (digest.size() != internal::k_digest_size) return Status::corruption("manifest digest of wrong size");
    out->components.push_back({std::string(name), std::string(digest), std::string(summary)});
  }
  if (!r.done()) return Status::corruption("trailing bytes after the manifest");
  return Status();
}

Status decode_component_values(std::string_view bytes, ComponentValues* out) {
  ByteReader r(bytes);
  uint32_t count = 0;
  AOTCACHE_RETURN_IF_ERROR(r.u32(&count));
  if (count > r.remaining() / 8) return Status::corruption("component values claim more entries than fit");
  for (uint32_t k = 0; k < count; ++k) {
    std::string_view name, value;
    AOTCACHE_RETURN_IF_ERROR(r.str(&name));
    AOTCACHE_RETURN_IF_ERROR(r.str(&value));
    out->emplace_back(std::string(name), std::string(value));
  }
  if (!r.done()) return Status::corruption("trailing bytes after the component values");
  return Status();
}

// The graph and kernel sections: u8 compression (PayloadCompression), then the bytes, zstd-compressed when that
// saves space (graphs of thousands of nodes repeat the same records; shared libraries compress ~5x).
std::string encode_compressible_section(const std::string& graph, PayloadCompression compression) {
  ByteWriter w;
  if (compression == PayloadCompression::kZstd && graph.size() >= k_min_compressed_payload) {
    std::string frame = internal::zstd_compress(graph, k_zstd_level);
    if (!frame.empty() && frame.size() + 8 < graph.size()) {
      w.u8(static_cast<uint8_t>(PayloadCompression::kZstd));
      w.u64(graph.size());
      w.raw(frame);
      return w.take();
    }
  }
  w.u8(static_cast<uint8_t>(PayloadCompression::kNone));
  w.raw(graph);
  return w.take();
}

Status decode_compressible_section(std::string_view bytes, std::string* out) {
  ByteReader r(bytes);
  uint8_t compression = 0;
  AOTCACHE_RETURN_IF_ERROR(r.u8(&compression));
  if (compression == static_cast<uint8_t>(PayloadCompression::kNone)) {
    *out = std::string(bytes.substr(1));
    return Status();
  }
  if (compression != static_cast<uint8_t>(PayloadCompression::kZstd)) {
    return Status::corruption("section compression " + std::to_string(compression));
  }
  uint64_t raw_size = 0;
  AOTCACHE_RETURN_IF_ERROR(r.u64(&raw_size));
  std::string_view frame;
  AOTCACHE_RETURN_IF_ERROR(r.raw(r.remaining(), &frame));
  AOTCACHE_ASSIGN_OR_RETURN(*out, internal::zstd_decompress(frame, raw_size));
  return Status();
}

// Walks the section headers only (no contents decoded) to find the signature section, which must be the last one;
// with a verifier, checks it against the bytes before it. `body` excludes the checksum trailer.
Status check_signature(std::string_view body, size_t sections_at, uint32_t sections, const SigningKeys* verifier) {
  ByteReader r(body.substr(sections_at));
  std::optional<size_t> signature_at;
  std::string_view signature;
  for (uint32_t s = 0; s < sections; ++s) {
    const size_t at = sections_at + r.position();
    uint32_t tag = 0;
    uint64_t len = 0;
    AOTCACHE_RETURN_IF_ERROR(r.u32(&tag));
    AOTCACHE_RETURN_IF_ERROR(r.u64(&len));
    if (len > r.remaining()) return Status::corruption("section longer than the entry");
    std::string_view data;
    AOTCACHE_RETURN_IF_ERROR(r.raw(static_cast<size_t>(len), &data));
    if (tag != k_section_signature) continue;
    if (signature_at.has_value()) return Status::corruption("the signature section appears twice");
    if (s + 1 != sections) return Status::corruption("the signature section is not the last section");
    signature_at = at;
    signature = data;
  }
  if (verifier == nullptr || !verifier->enabled()) return Status();
  if (!signature_at.has_value()) return Status::unauthenticated("entry is not signed and a signing key is set");
  ByteReader sr(signature);
  uint32_t scheme = 0;
  std::string_view key_id, mac;
  AOTCACHE_RETURN_IF_ERROR(sr.u32(&scheme));
  if (scheme != k_signature_scheme_hmac_sha256) {
    return Status::unauthenticated("entry signed with unknown scheme " + std::to_string(scheme));
  }
  AOTCACHE_RETURN_IF_ERROR(sr.str(&key_id));
  AOTCACHE_RETURN_IF_ERROR(sr.raw(internal::k_digest_size, &mac));
  if (!sr.done()) return Status::corruption("trailing bytes after the signature");
  const SigningKey* key = verifier->find(std::string(key_id));
  if (key == nullptr) return Status::unauthenticated("entry signed with unknown key id '" + std::string(key_id) + "'");
  const std::string expected = internal::hmac_sha256(key->secret, body.substr(0, *signature_at));
  if (!internal::constant_time_equal(expected, mac)) {
    return Status::unauthenticated("entry signature does not match key '" + key->id + "'");
  }
  return Status();
}

}  // namespace

Result<std::string> encode_entry(const Entry& entry, PayloadCompression compression, const SigningKeys* signer) {
  if (entry.metadata.kind != Value::Kind::kDict) return Status::invalid_argument("entry metadata must be a dict");
  ByteWriter meta;
  AOTCACHE_RETURN_IF_ERROR(internal::encode_value(entry.metadata, 0, &meta));
  ByteWriter w;
  w.raw(k_entry_magic);
  w.u32(k_entry_format_version);
  // A compressed payload section is u64 raw size, then one zstd frame.
  std::string_view payload = entry.payload;
  std::string packed;
  uint32_t flags = 0;  // bits 0-3: compression; the rest reserved, must be 0
  if (compression == PayloadCompression::kZstd && entry.payload.size() >= k_min_compressed_payload) {
    ByteWriter p;
    p.u64(entry.payload.size());
    std::string frame = internal::zstd_compress(entry.payload, k_zstd_level);
    if (!frame.empty() && frame.size() + 8 < entry.payload.size()) {
      p.raw(frame);
      packed = p.take();
      payload = packed;
      flags = static_cast<uint32_t>(PayloadCompression::kZstd);
    }
  }
  w.u32(flags);
  w.raw(entry.key_digest);
  const std::string manifest = encode_manifest(entry.manifest);
  ByteWriter values;
  values.u32(static_cast<uint32_t>(entry.component_values.size()));
  for (const auto& [name, bytes] : entry.component_values) {
    values.str(name);
    values.str(bytes);
  }
  // Without a graph or a signature the entry is the four-section layout of before: old entries and golden bytes
  // are unchanged.
  const std::string graph = entry.graph.empty() ? std::string() : encode_compressible_section(entry.graph, compression);
  const std::string kernels =
      entry.kernels.empty() ? std::string() : encode_compressible_section(entry.kernels, compression);
  const bool sign = signer != nullptr && signer->enabled();
  w.u32(4 + (entry.graph.empty() ? 0 : 1) + (entry.kernels.empty() ? 0 : 1) + (sign ? 1 : 0));
  for (const auto& [tag, bytes] : {std::pair<uint32_t, std::string_view>{k_section_manifest, manifest},
                                   {k_section_metadata, meta.bytes()},
                                   {k_section_payload, payload},
                                   {k_section_component_values, values.bytes()},
                                   {k_section_graph, graph},
                                   {k_section_kernels, kernels}}) {
    if (tag == k_section_graph && entry.graph.empty()) continue;
    if (tag == k_section_kernels && entry.kernels.empty()) continue;
    w.u32(tag);
    w.u64(bytes.size());
    w.raw(bytes);
  }
  if (sign) {
    // The MAC covers every byte before the signature section: header (with the section count), manifest,
    // metadata, payload, component values, graph and kernels.
    const SigningKey& key = signer->keys.front();
    const std::string mac = internal::hmac_sha256(key.secret, w.bytes());
    ByteWriter sig;
    sig.u32(k_signature_scheme_hmac_sha256);
    sig.str(key.id);
    sig.raw(mac);
    w.u32(k_section_signature);
    w.u64(sig.size());
    w.raw(sig.bytes());
  }
  const std::string checksum = internal::sha256(w.bytes());
  w.raw(checksum);
  return w.take();
}

Result<Entry> decode_entry(std::string_view bytes, const SigningKeys* verifier) {
  if (bytes.size() < k_header_size + internal::k_digest_size) {
    return Status::corruption("entry of " + std::to_string(bytes.size()) + " bytes is shorter than a header");
  }
  if (bytes.substr(0, k_entry_magic.size()) != k_entry_magic) return Status::corruption("not an aotcache entry");
  const std::string_view body = bytes.substr(0, bytes.size() - internal::k_digest_size);
  if (internal::sha256(body) != bytes.substr(body.size())) return Status::corruption("entry checksum mismatch");

  ByteReader r(body);
  std::string_view skip;
  AOTCACHE_RETURN_IF_ERROR(r.raw(k_entry_magic.size(), &skip));
  uint32_t version = 0, flags = 0, sections = 0;
  AOTCACHE_RETURN_IF_ERROR(r.u32(&version));
  if (version == 0) return Status::corruption("entry format version 0");
  if (version > k_entry_format_version) {
    return Status::unsupported("entry format v" + std::to_string(version) + " is newer than this aotcache (v" +
                               std::to_string(k_entry_format_version) + ")");
  }
  AOTCACHE_RETURN_IF_ERROR(r.u32(&flags));
  const uint32_t compression = flags & 0xfu;
  if ((flags & ~0xfu) != 0 || compression > static_cast<uint32_t>(PayloadCompression::kZstd)) {
    return Status::unsupported("entry flags " + std::to_string(flags) + " are not supported by this version");
  }
  Entry e;
  std::string_view key;
  AOTCACHE_RETURN_IF_ERROR(r.raw(internal::k_digest_size, &key));
  e.key_digest = std::string(key);
  AOTCACHE_RETURN_IF_ERROR(r.u32(&sections));
  AOTCACHE_RETURN_IF_ERROR(check_signature(body, r.position(), sections, verifier));
  bool seen[k_max_known_tag + 1] = {};
  for (uint32_t s = 0; s < sections; ++s) {
    uint32_t tag = 0;
    uint64_t len = 0;
    AOTCACHE_RETURN_IF_ERROR(r.u32(&tag));
    AOTCACHE_RETURN_IF_ERROR(r.u64(&len));
    if (len > r.remaining()) return Status::corruption("section longer than the entry");
    std::string_view data;
    AOTCACHE_RETURN_IF_ERROR(r.raw(static_cast<size_t>(len), &data));
    if (tag == k_section_signature) continue;        // checked above
    if (tag < 1 || tag > k_max_known_tag) continue;  // unknown sections are optional by rule: skip
    if (seen[tag]) return Status::corruption("section " + std::to_string(tag) + " appears twice");
    seen[tag] = true;
    if (tag == k_section_manifest) {
      AOTCACHE_RETURN_IF_ERROR(decode_manifest(data, &e.manifest));
    } else if (tag == k_section_metadata) {
      ByteReader mr(data);
      AOTCACHE_RETURN_IF_ERROR(internal::decode_value(&mr, &e.metadata));
      if (!mr.done()) return Status::corruption("trailing bytes after the metadata");
      if (e.metadata.kind != Value::Kind::kDict) return Status::corruption("entry metadata is not a dict");
    } else if (tag == k_section_payload) {
      if (compression == static_cast<uint32_t>(PayloadCompression::kZstd)) {
        ByteReader pr(data);
        uint64_t raw_size = 0;
        AOTCACHE_RETURN_IF_ERROR(pr.u64(&raw_size));
        std::string_view frame;
        AOTCACHE_RETURN_IF_ERROR(pr.raw(pr.remaining(), &frame));
        AOTCACHE_ASSIGN_OR_RETURN(e.payload, internal::zstd_decompress(frame, raw_size));
      } else {
        e.payload = std::string(data);
      }
    } else if (tag == k_section_component_values) {
      AOTCACHE_RETURN_IF_ERROR(decode_component_values(data, &e.component_values));
    } else if (tag == k_section_graph) {
      // Kept as bytes: the store does not interpret the graph (aotcache show and the bindings do).
      AOTCACHE_RETURN_IF_ERROR(decode_compressible_section(data, &e.graph));
      if (e.graph.empty()) return Status::corruption("empty graph section");
    } else {
      // Kept as bytes: decode_kernel_bundle reads them, only when the backend installs kernels.
      AOTCACHE_RETURN_IF_ERROR(decode_compressible_section(data, &e.kernels));
      if (e.kernels.empty()) return Status::corruption("empty kernel section");
    }
  }
  if (!r.done()) return Status::corruption("trailing bytes after the last section");
  if (!seen[1] || !seen[2] || !seen[3]) return Status::corruption("entry lacks a required section");
  if (key_digest_of(e.manifest) != e.key_digest) return Status::corruption("manifest does not hash to the entry's key");
  for (const auto& [name, encoded] : e.component_values) {
    const ManifestComponent* c = e.manifest.find(name);
    if (c == nullptr || component_digest(name, encoded) != c->digest) {
      return Status::corruption("component value '" + name + "' does not match the manifest");
    }
  }
  return e;
}

Result<Value> peek_entry_metadata(std::string_view prefix) {
  ByteReader r(prefix);
  std::string_view skip;
  AOTCACHE_RETURN_IF_ERROR(r.raw(k_entry_magic.size(), &skip));
  if (skip != k_entry_magic) return Status::corruption("not an aotcache entry");
  uint32_t version = 0, flags = 0, sections = 0;
  AOTCACHE_RETURN_IF_ERROR(r.u32(&version));
  if (version != k_entry_format_version) return Status::unsupported("entry format v" + std::to_string(version));
  AOTCACHE_RETURN_IF_ERROR(r.u32(&flags));
  AOTCACHE_RETURN_IF_ERROR(r.raw(internal::k_digest_size, &skip));
  AOTCACHE_RETURN_IF_ERROR(r.u32(&sections));
  for (uint32_t s = 0; s < sections; ++s) {
    uint32_t tag = 0;
    uint64_t len = 0;
    AOTCACHE_RETURN_IF_ERROR(r.u32(&tag));
    AOTCACHE_RETURN_IF_ERROR(r.u64(&len));
    if (len > r.remaining()) return Status::corruption("metadata lies beyond the prefix read");
    std::string_view data;
    AOTCACHE_RETURN_IF_ERROR(r.raw(static_cast<size_t>(len), &data));
    if (tag != k_section_metadata) continue;
    ByteReader mr(data);
    Value v;
    AOTCACHE_RETURN_IF_ERROR(internal::decode_value(&mr, &v));
    if (v.kind != Value::Kind::kDict) return Status::corruption("entry metadata is not a dict");
    return v;
  }
  return Status::corruption("no metadata section in the prefix read");
}

double entry_metadata_number(const Entry& entry, const std::string& field, double fallback) {
  return metadata_number(entry.metadata, field, fallback);
}

double metadata_number(const Value& m, const std::string& field, double fallback) {
  if (m.kind != Value::Kind::kDict) return fallback;
  for (size_t k = 0; k + 1 < m.items.size(); k += 2) {
    if (m.items[k].kind == Value::Kind::kString && m.items[k].s == field) {
      const Value& v = m.items[k + 1];
      if (v.kind == Value::Kind::kFloat) return v.f;
      if (v.kind == Value::Kind::kInt) return static_cast<double>(v.i);
      return fallback;
    }
  }
  return fallback;
}

std::string entry_metadata_string(const Entry& entry, const std::string& field, const std::string& fallback) {
  const Value& m = entry.metadata;
  if (m.kind != Value::Kind::kDict) return fallback;
  for (size_t k = 0; k + 1 < m.items.size(); k += 2) {
    if (m.items[k].kind == Value::Kind::kString && m.items[k].s == field) {
      return m.items[k + 1].kind == Value::Kind::kString ? m.items[k + 1].s : fallback;
    }
  }
  return fallback;
}

std::string entry_kind(const Entry& entry) {
  const std::string kind = entry_metadata_string(entry, "payload_kind", "");
  if (kind == "aotcache.frame") return "frame";
  if (kind == "guard_index") return "guard-index";
  if (kind == "float_record") return "float-record";
  if (kind.empty() || kind == "inductor_aot_artifact") return "graph";
  return kind;
}

}  // namespace aotcache
