// zstd one-shot compression of entry payloads.
#include "store/compression.h"

#include <zstd.h>

namespace aotcache::internal {

std::string zstd_compress(std::string_view raw, int level) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), level);
  if (ZSTD_isError(n)) return std::string();  // only on invalid parameters; callers then store uncompressed
  out.resize(n);
  return out;
}

Result<std::string> zstd_decompress(std::string_view compressed, uint64_t raw_size) {
  if (raw_size > k_max_payload_size) return Status::corruption("compressed payload claims an impossible size");
  const unsigned long long frame_size = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (frame_size == ZSTD_CONTENTSIZE_ERROR || frame_size == ZSTD_CONTENTSIZE_UNKNOWN || frame_size != raw_size) {
    return Status::corruption("compressed payload is not a zstd frame of the recorded size");
  }
  std::string out(static_cast<size_t>(raw_size), '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n) || n != raw_size) {
    return Status::corruption(std::string("payload does not decompress: ") + ZSTD_getErrorName(n));
  }
  return out;
}

}  // namespace aotcache::internal
