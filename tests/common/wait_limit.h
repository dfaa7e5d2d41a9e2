// How long a test waits for a semaphore or a queue before it reports a hang. A bound, never an
// ordering: tests order their steps by semaphores, and a loaded machine only waits longer.
#pragma once

#include <cstdint>

namespace kiln::test {

inline constexpr int64_t kWaitMs = 60000;

}  // namespace kiln::test
