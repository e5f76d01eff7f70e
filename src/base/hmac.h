// HMAC-SHA256 (OpenSSL) and a constant-time comparison, for entry signatures.
#pragma once

#include <string>
#include <string_view>

namespace aotcache::internal {

// The 32 raw bytes of HMAC-SHA256(key, message).
std::string hmac_sha256(std::string_view key, std::string_view message);
// True when a == b, in time that depends only on the sizes (CRYPTO_memcmp): a MAC check leaks no prefix length.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace aotcache::internal
