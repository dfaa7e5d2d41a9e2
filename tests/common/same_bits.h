// Bitwise equality of two vectors: NaNs with the same bits compare equal, -0 differs from 0.
#pragma once

#include <cstring>
#include <vector>

namespace kiln::test {

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace kiln::test
