// Which intermediates lowering inlines into their reader (MemoryMode::kVirtual, OCANNL's virtual
// nodes): a node written once in the whole program, by an `=` elementwise statement that does not
// read it, read by exactly one later statement of the same routine and never as a merge buffer,
// where nothing the definition reads is written in between (so that evaluating the definition
// at the reader gives what storing it would have).
//
// The uses of every node are indexed once per program, so that deciding for all statements is
// linear in the size of the program (plus a logarithm per read of a definition).
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>
#include <vector>

#include "kiln/ir/program.h"

namespace kiln::ir::lowering {

class InlineCandidates {
 public:
  explicit InlineCandidates(const Program& program);

  // Whether statement `def` of `routine` (which writes `node`) can be inlined; if so, *reader
  // is the position of its one reader in the routine.
  bool inlinable(int node, const Routine& routine, size_t def, size_t* reader) const;

 private:
  struct Uses {
    int writers = 0;          // statements writing it, all routines
    bool merge_read = false;  // read as node.merge anywhere
    std::vector<std::pair<const Routine*, size_t>> readers;  // statements reading it, once each
  };
  // The nodes a statement's right side reads (tensor and merge reads), without repeats.
  static std::vector<int> read_nodes(const Assignment& s);

  std::unordered_map<int, Uses> uses_;
  // Per routine and node: the positions of the statements writing it, ascending.
  std::map<const Routine*, std::unordered_map<int, std::vector<size_t>>> writes_at_;
};

}  // namespace kiln::ir::lowering
