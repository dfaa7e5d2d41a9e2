// The tensor accesses of a statement as lowering will emit them: the write of its target, the
// read of the target that += -= *= imply, and every read of its right side, where a read of an
// inlined (virtual) intermediate is replaced by the reads of that intermediate's definition with
// their subscripts rewritten in the reading statement's indices. Fusion, local arrays and the
// snapshot rule all decide on these, so that they see what the kernel will really touch.
#pragma once

#include <map>
#include <vector>

#include "kiln/ir/program.h"

namespace kiln::ir::lowering {

// Inlined intermediates: node id → the one `=` elementwise statement that defines it.
using InlineDefs = std::map<int, const Assignment*>;

struct Access {
  int node = -1;
  std::vector<Affine> subscripts;  // in the accessing statement's indices
  bool write = false;
  bool merge = false;  // a read of node.merge (another buffer: the merge buffer)
};

// Every access of `s`; a read of an inlined node is expanded (recursively) into its definition's.
std::vector<Access> statement_accesses(const Assignment& s, const InlineDefs& inlined);

// `inner` (over the indices of a definition) with each index t replaced by `outer[t]` (affine
// forms over the reader's indices). Every index of `inner` must have an entry. A gathered
// subscript stays gathered (gather >= 0, which here only marks it as not affine).
Affine substitute(const Affine& inner, const std::vector<Affine>& outer);

// Whether `a` is the statement's target point: subscript d is exactly target index d, for all d.
bool at_target_point(const Assignment& s, const Access& a);

// Whether `s` reads its own target at a point other than the one it writes (so that lowering
// snapshots the target first to keep the "reads values from before the statement" rule).
bool reads_target_elsewhere(const Assignment& s, const InlineDefs& inlined);
// The same, given the statement's accesses (statement_accesses).
bool reads_target_elsewhere(const Assignment& s, const std::vector<Access>& accesses);


}  // namespace kiln::ir::lowering
