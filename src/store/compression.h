// Payload compression for entries (zstd). Bounded decompression: untrusted sizes never drive allocation.
#pragma once

#include <string>
#include <string_view>

#include "aotcache/status.h"

namespace aotcache::internal {

// Largest payload a reader will inflate: far above any compiled graph, far below memory exhaustion.
constexpr uint64_t k_max_payload_size = 4ULL << 30;

std::string zstd_compress(std::string_view raw, int level);
// Corruption when `compressed` is not one zstd frame whose content size is `raw_size` (<= k_max_payload_size).
Result<std::string> zstd_decompress(std::string_view compressed, uint64_t raw_size);

}  // namespace aotcache::internal
