// Entry signing keys (docs/entry-format.md §9): HMAC-SHA256 keys named by an id, so a cluster can rotate them.
// The first key signs new entries; every key verifies. Immutable after parsing: safe to share between threads.
#pragma once

#include <string>
#include <vector>

#include "aotcache/status.h"

namespace aotcache {

// A secret shorter than this is refused: an HMAC key is only as strong as its entropy.
constexpr size_t k_min_signing_secret_size = 16;

struct SigningKey {
  std::string id;      // 1-64 characters of [A-Za-z0-9._-], stored in each entry it signs
  std::string secret;  // the HMAC key, at least k_min_signing_secret_size bytes
};

struct SigningKeys {
  std::vector<SigningKey> keys;  // keys[0] signs; all verify. Empty = signing off.

  bool enabled() const { return !keys.empty(); }
  // The key with this id, or nullptr.
  const SigningKey* find(const std::string& id) const;
};

// "id:secret[,id2:secret2...]" -> keys in that order. An empty text gives no keys. InvalidArgument for a malformed
// item, an id of other characters, a short secret or a repeated id (the message never contains a secret).
Result<SigningKeys> parse_signing_keys(const std::string& text);
// parse_signing_keys($AOTCACHE_SIGNING_KEY); no keys when unset.
Result<SigningKeys> signing_keys_from_environment();

}  // namespace aotcache
