// Little-endian byte writing and bounds-checked reading: the building blocks of every aotcache format.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "aotcache/status.h"

namespace aotcache::internal {

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { put_le(v, 2); }
  void u32(uint32_t v) { put_le(v, 4); }
  void u64(uint64_t v) { put_le(v, 8); }
  void i64(int64_t v) { put_le(static_cast<uint64_t>(v), 8); }
  void raw(std::string_view bytes) { out_.append(bytes.data(), bytes.size()); }
  // u32 length, then the bytes.
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s);
  }
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }
  size_t size() const { return out_.size(); }

 private:
  void put_le(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out_.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
  }
  std::string out_;
};

// Reads from a view it does not own. Every read checks the remaining length and fails with Corruption.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  Status u8(uint8_t* v) { return get_le(v, 1); }
  Status u16(uint16_t* v) { return get_le(v, 2); }
  Status u32(uint32_t* v) { return get_le(v, 4); }
  Status u64(uint64_t* v) { return get_le(v, 8); }
  Status raw(size_t n, std::string_view* out) {
    if (remaining() < n) return truncated();
    *out = in_.substr(pos_, n);
    pos_ += n;
    return Status();
  }
  Status str(std::string_view* out) {
    uint32_t n = 0;
    AOTCACHE_RETURN_IF_ERROR(u32(&n));
    return raw(n, out);
  }
  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }
  bool done() const { return pos_ == in_.size(); }

 private:
  template <typename T>
  Status get_le(T* v, int n) {
    if (remaining() < static_cast<size_t>(n)) return truncated();
    uint64_t acc = 0;
    for (int k = 0; k < n; ++k) acc |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + k])) << (8 * k);
    pos_ += n;
    *v = static_cast<T>(acc);
    return Status();
  }
  Status truncated() const {
    return Status::corruption("truncated at byte " + std::to_string(pos_) + " of " + std::to_string(in_.size()));
  }
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace aotcache::internal
