// Short names for the constructors of kiln/loop/loop.h, for tests that build kernels by hand.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/loop/loop.h"

namespace kiln::ir::loop_builders {

inline LStmtRef block(std::vector<LStmtRef> body) { return lblock(std::move(body)); }
inline LStmtRef for_(int var, int64_t extent, std::vector<LStmtRef> body, bool parallel = false) {
  return lfor(var, extent, parallel, std::move(body));
}
inline LStmtRef if_(LExprRef cond, std::vector<LStmtRef> body) { return lif(std::move(cond), std::move(body)); }
inline LStmtRef store(int node, LExprRef offset, LExprRef value) {
  return lstore(node, std::move(offset), std::move(value));
}
inline LStmtRef local_decl(int local, DType type, int64_t size, std::vector<LStmtRef> body) {
  return llocal_decl(local, type, size, std::move(body));
}
inline LStmtRef local_store(int local, LExprRef offset, LExprRef value) {
  return llocal_store(local, std::move(offset), std::move(value));
}
inline LStmtRef comment(std::string text) { return lcomment(std::move(text)); }

inline LExprRef i64(int64_t v) { return lconst(DType::kI64, static_cast<double>(v)); }
inline LExprRef c(DType t, double v) { return lconst(t, v); }
inline LExprRef v(int var) { return lvar(var); }
inline LExprRef load(int node, DType t, LExprRef offset) { return lload(node, t, std::move(offset)); }
inline LExprRef op(Op o, DType t, std::vector<LExprRef> args) { return lop(o, t, std::move(args)); }
inline LExprRef add(LExprRef a, LExprRef b, DType t = DType::kI64) { return lop(Op::kAdd, t, {a, b}); }
inline LExprRef mul(LExprRef a, LExprRef b, DType t = DType::kI64) { return lop(Op::kMul, t, {a, b}); }
inline LExprRef sub(LExprRef a, LExprRef b, DType t = DType::kI64) { return lop(Op::kSub, t, {a, b}); }

}  // namespace kiln::ir::loop_builders
