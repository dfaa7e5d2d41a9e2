// Which intermediates become local arrays (MemoryMode::kLocal): a small array private to one
// iteration of a kernel's parallel loop, declared inside it, instead of a device buffer.
//
// A `tensor` node is local when
//  - it is neither inlined nor read as a merge buffer, and the host cannot see it (its mode is
//    unset or kLocal: kOnDevice / kHosted requests keep a buffer);
//  - every statement of the whole program that writes or reads it (reads through inlined
//    definitions included) is in one kernel group with a parallel loop, and it is read there;
//  - in that group, the first statement that touches it overwrites it (fully_overwritten) without
//    reading it, so that no row is read before it is written in the same iteration;
//  - its row, the product of its dims after the group's parallel ones, has at most
//    kMaxLocalRowElements elements;
//  - lowering gives one kernel at most kMaxLocalArraysPerKernel of them unless requested (the
//    first ones in node order; the rest get device buffers).
// (The group's fusion legality already makes every access of a node the group writes use the
// parallel indices as its leading subscripts, so a row's accesses stay within the local array.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "loop/access.h"
#include "loop/fusion.h"
#include "kiln/ir/program.h"

namespace kiln::ir::lowering {

// Largest local array, in elements, that lowering makes of an intermediate's row (16 KiB of f32:
// fits the stack of a CPU thread and, for small workgroups, a GPU's private memory).
inline constexpr int64_t kMaxLocalRowElements = 4096;
// Most local arrays lowering makes by itself in one kernel (requested ones do not count against
// it): each is a declaration around the kernel's row, so they nest, and a kernel of thousands of
// fused statements would otherwise nest thousands deep (its text growing with the square).
inline constexpr size_t kMaxLocalArraysPerKernel = 64;

struct RoutinePlan {
  const Routine* routine = nullptr;
  std::vector<KernelGroup> groups;
};

struct LocalPlacement {
  bool local = false;
  std::string why_not;  // when not local: the rule it breaks, for an error message
  size_t routine = 0;   // when local: the plan and group it lives in
  size_t group = 0;
};

// How one statement touches one node, where the statement runs.
struct NodeUse {
  size_t routine = 0;    // plan
  size_t group = 0;      // kernel group of the plan
  size_t statement = 0;  // in the routine
  bool reads = false, writes = false, merge = false;
};
// Per node: the statements that touch it, in plan order (routines, groups, statements), from
// one pass over every statement's accesses.
using NodeUses = std::unordered_map<int, std::vector<NodeUse>>;
NodeUses node_uses(const std::vector<RoutinePlan>& plans, const InlineDefs& inlined);

// Whether node `node` can be a local array, given the kernel plans of every routine (in program
// order), the inlined intermediates and the uses of every node (node_uses of the same plans).
LocalPlacement place_local_array(const Program& program, int node, const std::vector<RoutinePlan>& plans,
                                 const InlineDefs& inlined, const NodeUses& uses);
// The same, computing the uses (linear in the program: for one node, not for every node).
LocalPlacement place_local_array(const Program& program, int node, const std::vector<RoutinePlan>& plans,
                                 const InlineDefs& inlined);

}  // namespace kiln::ir::lowering
