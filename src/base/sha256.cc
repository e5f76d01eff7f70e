// SHA-256 over OpenSSL's EVP interface.
#include "base/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace aotcache::internal {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1) {
    std::abort();  // only on allocation failure inside OpenSSL: nothing sensible to return
  }
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

void Sha256::update(std::string_view bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size());
}

std::string Sha256::finish() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out, &n);
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string sha256(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.finish();
}

std::string to_hex(std::string_view raw) {
  static const char* k_digits = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(k_digits[c >> 4]);
    out.push_back(k_digits[c & 0xf]);
  }
  return out;
}

bool from_hex(std::string_view hex, std::string* raw) {
  if (hex.size() % 2 != 0) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t k = 0; k < hex.size(); k += 2) {
    int hi = nibble(hex[k]), lo = nibble(hex[k + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>((hi << 4) | lo));
  }
  *raw = std::move(out);
  return true;
}

}  // namespace aotcache::internal
