// Overwrite analysis (overwrite.h).
#include "loop/overwrite.h"

#include "loop/lower_arith.h"

namespace kiln::ir::lowering {

bool fully_overwritten(const Assignment& s) { return s.accum == Accum::kAssign; }

FoldInit fold_init(const Assignment& s, DType target_type) {
  // A reduction folded in place starts from the element's value: the statement's own
  // accumulation (+= sum, *= prod) starts from the old one, which must not be touched; `=`
  // starts from the neutral element, which the element does not hold yet.
  if (!fully_overwritten(s) || s.reduce == Reduce::kNone) return {};
  return FoldInit{true, neutral(s.reduce, target_type)};
}

}  // namespace kiln::ir::lowering
