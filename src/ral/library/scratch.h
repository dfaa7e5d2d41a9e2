// Scratch memory of the calling thread's for library calls that need a working copy (conv2d's
// planes, the f32 copies of narrow gemm operands).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace kiln::ral::library {

// A buffer of `count` Ts of the calling thread's, 64-byte aligned and kept between calls (a fresh
// one would fault its pages in at every call); null when it cannot be allocated. Each kSlot is a
// buffer of its own, so that one call can hold several; the contents are not kept.
template <int kSlot, typename T = float>
T* scratch(size_t count) {
  struct Buffer {
    std::unique_ptr<T, decltype(&std::free)> data{nullptr, &std::free};
    size_t count = 0;
  };
  thread_local Buffer buffer;
  if (buffer.count < count) {
    const size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    buffer.data.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
    buffer.count = buffer.data ? count : 0;
  }
  return buffer.data.get();
}

}  // namespace kiln::ral::library
