// The libraries that a device's built-in functions (gemm, ...) and its compiler load at run time,
// each with its version or why it is missing, for `kiln devices` and bug reports.
#pragma once

#include <string>
#include <vector>

namespace kiln::ral {

// For the driver named `driver`: "cuda" gives {"NVRTC 13.0", "cuBLAS 13.1.0"} (or
// "cuBLAS: <why it is unavailable>"), loading them if they are not yet; drivers whose libraries
// kiln does not load for them at run time give none (the cpu device's OpenBLAS is loaded by its
// first gemm, and is not loaded for this).
std::vector<std::string> library_versions(const std::string& driver);

}  // namespace kiln::ral
