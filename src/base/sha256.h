// SHA-256 (OpenSSL's implementation, which uses the CPU's SHA extensions where present) and hex helpers.
#pragma once

#include <string>
#include <string_view>

namespace aotcache::internal {

constexpr size_t k_digest_size = 32;

// Incremental hashing. Not thread-safe; one object per thread.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::string_view bytes);
  // The 32 raw digest bytes. The object must not be updated afterwards.
  std::string finish();

 private:
  void* ctx_;  // EVP_MD_CTX*, kept opaque so OpenSSL headers stay out of this header
};

// The 32 raw digest bytes of `bytes`.
std::string sha256(std::string_view bytes);

std::string to_hex(std::string_view raw);
// Returns false when `hex` is not an even-length string of hex digits.
bool from_hex(std::string_view hex, std::string* raw);

}  // namespace aotcache::internal
