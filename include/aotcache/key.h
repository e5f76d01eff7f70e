// The cache key: a canonical encoding of everything that determines a compiled graph, hashed per named component.
// Each component's digest and a short human summary form the manifest, so a miss can be explained.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aotcache/ir.h"
#include "aotcache/status.h"

namespace aotcache {

// Version of the canonical encoding and of the component set (docs/formats/key-encoding.md). Bump on any change.
constexpr uint32_t k_key_schema_version = 2;

// Everything that enters the key. The dict-valued components are Value::dict with string keys.
struct KeyInputs {
  const Graph* graph = nullptr;
  std::vector<InputMeta> inputs;
  Value autograd_state;  // grad mode, autocast, determinism, matmul precision
  Value config;          // functorch and Inductor configs (portable form), backend options
  Value environment;     // torch and Python versions, platform, CPU capability
  Value user;            // user salt and pinned versions
};

struct ManifestComponent {
  std::string name;
  std::string digest;   // 32 raw bytes of SHA-256
  std::string summary;  // one short line for humans

  bool operator==(const ManifestComponent&) const = default;
};

struct Manifest {
  std::vector<ManifestComponent> components;  // in key order: format, graph, inputs, ...

  const ManifestComponent* find(const std::string& name) const;
  bool operator==(const Manifest&) const = default;
};

// The canonical encodings of the dict-valued components (autograd_state, config, environment, user), kept beside
// an entry so that a miss can be explained field by field, not only component by component.
using ComponentValues = std::vector<std::pair<std::string, std::string>>;

struct CacheKey {
  std::string digest;  // 32 raw bytes
  Manifest manifest;
  ComponentValues component_values;

  std::string hex() const;
};

// Encodes and hashes all components. Fails with InvalidArgument on a malformed IR (a node reference that does not
// point to an earlier node, an odd-length dict) and never on well-formed input.
Result<CacheKey> compute_key(const KeyInputs& inputs);

// The key of one compiled candidate of a symbolic graph: `key` plus a "guards" component holding the canonical
// guard expressions the compile produced (docs/formats/guard-format.md). Several candidates share the key of the graph;
// a lookup picks the first whose guards hold for the actual sizes.
CacheKey with_guards(const CacheKey& key, const std::vector<std::string>& guards);

// Everything that enters the key of a frame entry (docs/formats/frame-entry-format.md): the frame's code by content and
// the context a frame hit skips (the graph keys' config, environment and user components, and the frame's module).
struct FrameKeyInputs {
  std::string code_digest;  // SHA-256 hex of the normalized code object
  std::string code_name;    // "module.qualname", for the manifest's summary only
  Value config;             // as KeyInputs::config, plus Dynamo's config
  Value environment;        // as KeyInputs::environment
  Value user;               // as KeyInputs::user
};

// Version of the frame key's component set. Bump on any change.
constexpr uint32_t k_frame_key_schema_version = 1;

// The key of a frame entry. Its manifest starts with a "frame_format" component, so it never equals a graph key.
Result<CacheKey> compute_frame_key(const FrameKeyInputs& inputs);

// The digest a component named `name` with canonical encoding `encoded` has in a manifest.
std::string component_digest(const std::string& name, std::string_view encoded);

// The key of a manifest: lets a reader check that an entry's manifest belongs to the key it is stored under.
std::string key_digest_of(const Manifest& manifest);

// Names of the components whose digests differ (or that only one side has), in manifest order.
std::vector<std::string> differing_components(const Manifest& a, const Manifest& b);

// The fields in which two encodings of one dict component differ, one line each, at most `max_lines`:
// "inductor.epilogue_fusion: True -> False". Corruption when an encoding does not decode.
Result<std::vector<std::string>> explain_component(std::string_view encoded_a, std::string_view encoded_b,
                                                   size_t max_lines = 20);

}  // namespace aotcache
