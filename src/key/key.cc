// Computes the cache key from its named components (docs/formats/key-encoding.md).
#include "aotcache/key.h"

#include "base/bytes.h"
#include "base/sha256.h"
#include "key/canonical_encoder.h"
#include "key/summary.h"

namespace aotcache {
namespace {

using internal::ByteWriter;

ManifestComponent make_component(const std::string& name, const std::string& encoded, std::string summary) {
  return ManifestComponent{name, component_digest(name, encoded), std::move(summary)};
}

Status add_dict_component(const std::string& name, const Value& v, CacheKey* key) {
  if (v.kind != Value::Kind::kDict) return Status::invalid_argument("key component '" + name + "' must be a dict");
  ByteWriter w;
  AOTCACHE_RETURN_IF_ERROR(internal::encode_value(v, 0, &w));
  key->manifest.components.push_back(make_component(name, w.bytes(), internal::summarize_dict(v)));
  key->component_values.emplace_back(name, w.take());
  return Status();
}

}  // namespace

const ManifestComponent* Manifest::find(const std::string& name) const {
  for (const auto& c : components) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string component_digest(const std::string& name, std::string_view encoded) {
  internal::Sha256 h;
  ByteWriter prefix;
  prefix.str("aotcache-component");
  prefix.str(name);
  prefix.u32(k_key_schema_version);
  h.update(prefix.bytes());
  h.update(encoded);
  return h.finish();
}

std::string CacheKey::hex() const {
  return internal::to_hex(digest);
}

std::string key_digest_of(const Manifest& manifest) {
  ByteWriter w;
  w.str("aotcache-key");
  w.u32(static_cast<uint32_t>(manifest.components.size()));
  for (const auto& c : manifest.components) {
    w.str(c.name);
    w.str(c.digest);
  }
  return internal::sha256(w.bytes());
}

Result<CacheKey> compute_key(const KeyInputs& in) {
  if (in.graph == nullptr) return Status::invalid_argument("compute_key: no graph");
  CacheKey key;
  auto& comps = key.manifest.components;

  {
    ByteWriter w;
    w.u32(k_key_schema_version);
    comps.push_back(make_component("format", w.bytes(), "key schema v" + std::to_string(k_key_schema_version)));
  }
  {
    ByteWriter w;
    AOTCACHE_RETURN_IF_ERROR(internal::encode_graph(*in.graph, &w));
    comps.push_back(make_component("graph", w.bytes(), internal::summarize_graph(*in.graph)));
  }
  {
    ByteWriter w;
    AOTCACHE_RETURN_IF_ERROR(internal::encode_inputs(in.inputs, &w));
    comps.push_back(make_component("inputs", w.bytes(), internal::summarize_inputs(in.inputs)));
  }
  for (const auto& [name, value] : {std::pair<const char*, const Value*>{"autograd_state", &in.autograd_state},
                                    {"config", &in.config},
                                    {"environment", &in.environment},
                                    {"user", &in.user}}) {
    AOTCACHE_RETURN_IF_ERROR(add_dict_component(name, *value, &key));
  }
  key.digest = key_digest_of(key.manifest);
  return key;
}

Result<CacheKey> compute_frame_key(const FrameKeyInputs& in) {
  if (in.code_digest.size() != 64) return Status::invalid_argument("compute_frame_key: code digest is not SHA-256 hex");
  CacheKey key;
  auto& comps = key.manifest.components;
  {
    ByteWriter w;
    w.u32(k_frame_key_schema_version);
    comps.push_back(
        make_component("frame_format", w.bytes(), "frame key schema v" + std::to_string(k_frame_key_schema_version)));
  }
  {
    ByteWriter w;
    w.str(in.code_digest);
    comps.push_back(
        make_component("code", w.bytes(), internal::truncate(in.code_name + " " + in.code_digest.substr(0, 16))));
  }
  for (const auto& [name, value] : {std::pair<const char*, const Value*>{"config", &in.config},
                                    {"environment", &in.environment},
                                    {"user", &in.user}}) {
    AOTCACHE_RETURN_IF_ERROR(add_dict_component(name, *value, &key));
  }
  key.digest = key_digest_of(key.manifest);
  return key;
}

CacheKey with_guards(const CacheKey& key, const std::vector<std::string>& guards) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(guards.size()));
  std::string summary = std::to_string(guards.size()) + " guards:";
  for (const std::string& g : guards) {
    w.str(g);
    summary += " " + g + ";";
  }
  CacheKey out = key;
  out.manifest.components.push_back(make_component("guards", w.bytes(), internal::truncate(summary)));
  out.digest = key_digest_of(out.manifest);
  return out;
}

std::vector<std::string> differing_components(const Manifest& a, const Manifest& b) {
  std::vector<std::string> out;
  for (const auto& ca : a.components) {
    const ManifestComponent* cb = b.find(ca.name);
    if (cb == nullptr || cb->digest != ca.digest) out.push_back(ca.name);
  }
  for (const auto& cb : b.components) {
    if (a.find(cb.name) == nullptr) out.push_back(cb.name);
  }
  return out;
}

}  // namespace aotcache
