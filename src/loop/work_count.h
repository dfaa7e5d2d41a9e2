// A count of the work lowering does: statements lowered, accesses and nodes its analyses
// examine, expressions its passes visit. Tests compare it between program sizes, so that a step
// that makes lowering quadratic in the number of statements shows as a ratio of counts rather
// than as a timing.
#pragma once

#include <cstdint>

namespace kiln::ir {

// Units counted in this process so far (all threads).
uint64_t lowering_work();
void count_lowering_work(uint64_t units);

}  // namespace kiln::ir
