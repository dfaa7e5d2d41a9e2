// Large host buffers on 2 MiB boundaries with transparent huge pages asked for: the cpu device's
// buffers, and the host memory behind the buffers of an OpenCL CPU device (PoCL).
#pragma once

#include <cstddef>

namespace kiln::drivers {

// Buffers of at least kHugePageMinimum bytes are worth huge pages: a 1 GiB buffer's first touch
// takes 512 page faults instead of 262,144, and a kernel reading a 16 MiB array row by row
// misses the TLB once per 2 MiB instead of once per 4 KiB row.
inline constexpr size_t kHugePage = size_t{2} << 20;
inline constexpr size_t kHugePageMinimum = size_t{4} << 20;

// `size` rounded up to a whole number of huge pages.
inline size_t huge_page_bytes(size_t size) { return (size + kHugePage - 1) / kHugePage * kHugePage; }

// `size` bytes (a multiple of kHugePage) of fresh zero pages from the kernel, starting on a
// kHugePage boundary, with transparent huge pages asked for; nullptr when there is no room.
// Released with unmap_huge_pages(data, size).
void* map_huge_pages(size_t size);
void unmap_huge_pages(void* data, size_t size);

}  // namespace kiln::drivers
