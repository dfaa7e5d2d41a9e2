// SHA-256 content hashing: the keys of every content-addressed cache in kiln.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Feeds the length, then the bytes, so that ("ab","c") and ("a","bc") hash differently.
  Sha256& update_field(std::string_view s);
  std::array<uint8_t, 32> digest();  // finishes; the object is spent afterwards
  std::string hex_digest();          // 64 lowercase hex characters

 private:
  void compress(const uint8_t* block);
  uint32_t h_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view data);

}  // namespace kiln
