// Which intermediates lowering inlines into their reader (MemoryMode::kVirtual, OCANNL's virtual
// nodes): a node written once in the whole program, by an `=` elementwise statement that does not
// read it, read by exactly one later statement of the same routine and never as a merge buffer,
// where nothing the definition reads is written in between (so that evaluating the definition
// at the reader gives what storing it would have) and no call statement runs in between (a call
// splits the routine into separate steps).
//
// The uses of every node are indexed once per program, so that deciding for all statements is
// linear in the size of the program (plus a logarithm per read of a definition).
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>
#include <vector>

#include "kiln/ir/program.h"
#include "loop/access.h"

namespace kiln::ir::lowering {

class InlineCandidates {
 public:
  explicit InlineCandidates(const Program& program);

  // Whether statement `def` of `routine` (which writes `node`) can be inlined; if so, *reader
  // is the position of its one reader in the routine.
  bool inlinable(int node, const Routine& routine, size_t def, size_t* reader) const;
  // Whether the statement that reads `node` reads it at two different points (x[i - 1] and
  // x[i + 1]; a gather differs from every point): inlined, its definition would be computed once
  // per point, so lowering inlines such a node only where the user asked for it (kVirtual).
  bool read_at_several_points(int node) const;
  // The nodes a statement's right side reads (tensor and merge reads), without repeats.
  static std::vector<int> read_nodes(const Assignment& s);

 private:
  struct Uses {
    int writers = 0;          // statements writing it, all routines
    bool merge_read = false;  // read as node.merge anywhere
    bool several_points = false;  // read at two different points by one statement
    std::vector<std::pair<const Routine*, size_t>> readers;  // statements reading it, once each
  };

  std::unordered_map<int, Uses> uses_;
  // Per routine and node: the positions of the statements writing it, ascending.
  std::map<const Routine*, std::unordered_map<int, std::vector<size_t>>> writes_at_;
  // Per routine: the positions of its calls (Call::position), ascending.
  std::map<const Routine*, std::vector<size_t>> calls_at_;
};

// How deep a statement's right side nests once the definitions it reads are inlined into it,
// with the root at depth 1 like kMaxExprDepth. Each inlined read counts its definition's depth
// plus 2 (the range guard and conversion lowering may wrap it in).
class InlinedDepths {
 public:
  int of(const Assignment& s, const InlineDefs& inlined) const;
  // The inlined node that `s` reads with the deepest definition, or -1 if it reads none.
  int deepest_inlined_read(const Assignment& s, const InlineDefs& inlined) const;
  // Records the depth of `node`'s definition (its statement's `of`) once it is inlined.
  void set(int node, int depth) { depth_[node] = depth; }

 private:
  int expr_depth(const Expr& e, const InlineDefs& inlined) const;
  std::unordered_map<int, int> depth_;
};

}  // namespace kiln::ir::lowering
