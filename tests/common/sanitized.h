// Whether this build runs under a sanitizer (KILN_SANITIZED, set by CMakeLists.txt): some tests
// do less work there, or skip what shadow memory changes (address-space limits, peak memory).
#pragma once

namespace kiln::test {

#ifdef KILN_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace kiln::test
