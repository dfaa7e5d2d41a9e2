// Structural equality of programs for tests: everything the language expresses (nodes, routines,
// statements, indices, typed expressions), ignoring source locations, memory modes and the file.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kiln/ir/program.h"

namespace kiln::ir::testing {

// The same number, zeros' signs included; any two NaNs are the same (text spells every NaN `nan`).
inline bool same_number(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

inline std::string expr_difference(const Expr& a, const Expr& b, const std::string& path) {
  auto differ = [&](const std::string& what) { return path + ": " + what + " differs"; };
  if (a.kind != b.kind) return differ("kind");
  if (a.type != b.type) {
    return differ("type (" + std::string(dtype_name(a.type)) + " vs " +
                  std::string(dtype_name(b.type)) + ")");
  }
  switch (a.kind) {
    case Expr::Kind::kLiteral:
      if (!same_number(a.literal, b.literal)) {
        return differ("literal (" + std::to_string(a.literal) + " vs " + std::to_string(b.literal) + ")");
      }
      return "";
    case Expr::Kind::kIndex:
      return a.index == b.index ? "" : differ("index");
    case Expr::Kind::kSize:
      return a.index == b.index ? "" : differ("size");
    case Expr::Kind::kTensor:
    case Expr::Kind::kMerge:
      if (a.node != b.node) return differ("node");
      if (a.subscripts.size() != b.subscripts.size()) return differ("subscript count");
      for (size_t d = 0; d < a.subscripts.size(); ++d) {
        if (a.subscripts[d].terms != b.subscripts[d].terms || a.subscripts[d].offset != b.subscripts[d].offset ||
            a.subscripts[d].gather != b.subscripts[d].gather) {
          return differ("subscript " + std::to_string(d));
        }
      }
      break;  // and the gathers, in args
    case Expr::Kind::kOp:
      if (a.op != b.op) return differ("op");
      break;
  }
  if (a.args.size() != b.args.size()) return differ("argument count");
  for (size_t i = 0; i < a.args.size(); ++i) {
    std::string d = expr_difference(*a.args[i], *b.args[i], path + "." + std::to_string(i));
    if (!d.empty()) return d;
  }
  return "";
}

inline ::testing::AssertionResult programs_equal(const Program& a, const Program& b) {
  auto fail = [](const std::string& what) { return ::testing::AssertionFailure() << what; };
  if (a.sizes.size() != b.sizes.size()) return fail("size counts differ");
  for (size_t i = 0; i < a.sizes.size(); ++i) {
    if (a.sizes[i].name != b.sizes[i].name) return fail("size " + std::to_string(i) + " differs");
  }
  if (a.nodes.size() != b.nodes.size()) return fail("node counts differ");
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const TensorNode& x = a.nodes[i];
    const TensorNode& y = b.nodes[i];
    if (x.id != y.id || x.name != y.name || x.role != y.role || x.dtype != y.dtype ||
        x.dims != y.dims || x.sized_dims != y.sized_dims || x.init.kind != y.init.kind ||
        !(x.init.a == y.init.a || (std::isnan(x.init.a) && std::isnan(y.init.a))) || x.init.b != y.init.b) {
      return fail("node " + std::to_string(i) + " (" + x.name + ") differs");
    }
  }
  if (a.routines.size() != b.routines.size()) return fail("routine counts differ");
  for (size_t r = 0; r < a.routines.size(); ++r) {
    const Routine& x = a.routines[r];
    const Routine& y = b.routines[r];
    if (x.name != y.name) return fail("routine " + std::to_string(r) + " names differ");
    if (x.statements.size() != y.statements.size()) return fail("routine " + x.name + ": statement counts differ");
    for (size_t i = 0; i < x.statements.size(); ++i) {
      const Assignment& s = x.statements[i];
      const Assignment& t = y.statements[i];
      std::string where = "routine " + x.name + " statement " + std::to_string(i + 1);
      if (s.target != t.target || s.target_indices != t.target_indices || s.accum != t.accum ||
          s.reduce != t.reduce) {
        return fail(where + ": target, accumulation or reduction differs");
      }
      if (s.indices.size() != t.indices.size()) return fail(where + ": index counts differ");
      for (size_t k = 0; k < s.indices.size(); ++k) {
        if (s.indices[k].name != t.indices[k].name || s.indices[k].extent != t.indices[k].extent ||
            s.indices[k].sized_extent != t.indices[k].sized_extent || s.indices[k].limit != t.indices[k].limit) {
          return fail(where + ": index " + std::to_string(k) + " differs");
        }
      }
      std::string d = expr_difference(*s.rhs, *t.rhs, where + " rhs");
      if (!d.empty()) return fail(d);
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::ir::testing
