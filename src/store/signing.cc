// Parsing of signing keys (the text of $AOTCACHE_SIGNING_KEY and $AOTCACHE_SIGNING_KEYS_ACCEPTED, read by the edges).
// The MAC itself is computed and checked by the entry format (entry_format.cc).
#include "aotcache/signing.h"

namespace aotcache {

const SigningKey* SigningKeys::find(const std::string& id) const {
  for (const SigningKey& k : keys) {
    if (k.id == id) return &k;
  }
  return nullptr;
}

Result<SigningKeys> parse_signing_keys(const std::string& text) {
  SigningKeys out;
  size_t start = 0;
  int index = 0;
  while (start <= text.size() && !text.empty()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    ++index;
    const size_t colon = item.find(':');
    const std::string where = "signing key #" + std::to_string(index);
    if (colon == std::string::npos) return Status::invalid_argument(where + " is not of the form id:secret");
    SigningKey key{item.substr(0, colon), item.substr(colon + 1)};
    if (key.id.empty() || key.id.size() > 64) return Status::invalid_argument(where + ": id must have 1-64 chars");
    for (char c : key.id) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
      if (!ok) return Status::invalid_argument(where + ": id may only contain A-Z a-z 0-9 . _ -");
    }
    if (key.secret.size() < k_min_signing_secret_size) {
      return Status::invalid_argument(where + " ('" + key.id + "'): secret shorter than " +
                                      std::to_string(k_min_signing_secret_size) + " bytes");
    }
    if (out.find(key.id) != nullptr) return Status::invalid_argument(where + ": id '" + key.id + "' repeated");
    out.keys.push_back(std::move(key));
    start = end + 1;
  }
  return out;
}

Result<SigningKeys> make_signing_keys(const std::string& signing, const std::vector<std::string>& accepted) {
  Result<SigningKeys> out = parse_signing_keys(signing);
  if (!out.ok()) return out.status();
  const bool has_signer = out->enabled();
  for (size_t k = 0; k < accepted.size(); ++k) {
    const std::string where = accepted.size() > 1 ? "accepted keys #" + std::to_string(k + 1) : "accepted keys";
    Result<SigningKeys> more = parse_signing_keys(accepted[k]);
    if (!more.ok()) return Status::invalid_argument(where + ": " + more.status().message());
    for (SigningKey& key : more->keys) {
      if (const SigningKey* known = out->find(key.id); known != nullptr) {
        if (known->secret == key.secret) continue;  // the signing key listed among the accepted ones too
        return Status::invalid_argument(where + ": id '" + key.id + "' is listed with another secret");
      }
      out->keys.push_back(std::move(key));
    }
  }
  if (!has_signer && out->enabled()) {
    return Status::invalid_argument("accepted keys without a signing key");
  }
  return out;
}

}  // namespace aotcache
