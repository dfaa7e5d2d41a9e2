// Which target elements a statement overwrites, i.e. stores without depending on their previous
// value. Lowering initializes (zero-fills, or sets to a reduction's neutral element) only what a
// statement's folds start from and what is not overwritten anyway, and a local array is only
// possible for an intermediate whose every row is overwritten before anything reads it (a local
// array starts each row without the values of earlier runs).
#pragma once

#include "kiln/ir/program.h"

namespace kiln::ir::lowering {

// True when the statement stores every element of its target with a value that does not depend
// on the element's previous value: `=`, elementwise or with a reduction (a target point whose
// reduction is empty, every point out of range, still gets the neutral element). False for
// += -= *=, which read every element first.
bool fully_overwritten(const Assignment& s);

// What the target's elements must be set to before the statement folds terms into them in place
// (reduced loops outside the target loops): the neutral element of the reduction when the
// statement overwrites its target, nothing (the old values are where += / *= start) otherwise.
struct FoldInit {
  bool needed = false;
  double value = 0;
};
FoldInit fold_init(const Assignment& s, DType target_type);

}  // namespace kiln::ir::lowering
