// Entry signing keys (docs/formats/entry-format.md §9): HMAC-SHA256 keys named by an id, so a cluster can rotate them.
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
// The keys of a store (docs/formats/entry-format.md §9.1): the keys of `signing` (parse_signing_keys: its first key
// signs, all verify; $AOTCACHE_SIGNING_KEY), then those of each `accepted` text (verify only; the items of
// $AOTCACHE_SIGNING_KEYS_ACCEPTED), in order. A key already listed with the same secret counts once. Empty texts
// give no keys (signing off). InvalidArgument, naming the part, for a malformed text, an id listed with two
// different secrets, or accepted keys without a signing key (a store would write entries it refuses to read).
Result<SigningKeys> make_signing_keys(const std::string& signing, const std::vector<std::string>& accepted);

}  // namespace aotcache
