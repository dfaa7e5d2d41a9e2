// Hand-built loop-IR kernels and programs shared by the code generator's golden and execution
// tests, and small builders for statements (loop.h has constructors for expressions only).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "kiln/loop/loop.h"
#include "kiln/ir/program.h"

namespace kiln::codegen_test {

using ir::DType;
using ir::Kernel;
using ir::LExprRef;
using ir::LStmt;
using ir::LStmtRef;
using ir::Op;

// Short names for the constructors of kiln/loop/loop.h.
inline LStmtRef block(std::vector<LStmtRef> body) { return ir::lblock(std::move(body)); }
inline LStmtRef loop(int var, int64_t extent, std::vector<LStmtRef> body, bool parallel = false) {
  return ir::lfor(var, extent, parallel, std::move(body));
}
inline LStmtRef ploop(int var, int64_t extent, std::vector<LStmtRef> body) {
  return loop(var, extent, std::move(body), /*parallel=*/true);
}
inline LStmtRef if_then(LExprRef cond, std::vector<LStmtRef> body) {
  return ir::lif(std::move(cond), std::move(body));
}
inline LStmtRef store(int node, LExprRef offset, LExprRef value) {
  return ir::lstore(node, std::move(offset), std::move(value));
}
inline LStmtRef local(int local, DType type, int64_t size, std::vector<LStmtRef> body) {
  return ir::llocal_decl(local, type, size, std::move(body));
}
inline LStmtRef local_store(int local, LExprRef offset, LExprRef value) {
  return ir::llocal_store(local, std::move(offset), std::move(value));
}
inline LStmtRef comment(std::string text) { return ir::lcomment(std::move(text)); }

// i64 offset arithmetic.
inline LExprRef i64(int64_t v) { return ir::lconst(DType::kI64, static_cast<double>(v)); }
inline LExprRef add64(LExprRef a, LExprRef b) { return ir::lop(Op::kAdd, DType::kI64, {a, b}); }
inline LExprRef mul64(LExprRef a, LExprRef b) { return ir::lop(Op::kMul, DType::kI64, {a, b}); }
inline LExprRef v(int var) { return ir::lvar(var); }

inline ir::TensorNode make_node(int id, std::string name, ir::Role role, DType type,
                                std::vector<int64_t> dims) {
  ir::TensorNode n;
  n.id = id;
  n.name = std::move(name);
  n.role = role;
  n.dtype = type;
  n.dims = std::move(dims);
  n.memory = ir::MemoryMode::kHosted;
  return n;
}

// ---- elementwise: y[i, j] = relu(x[i, j] * 2 + b[j]) over 8 x 5 --------------------------------

inline ir::Program elementwise_program() {
  ir::Program p;
  p.file = "<codegen test>";
  p.nodes = {make_node(0, "x", ir::Role::kInput, DType::kF32, {8, 5}),
             make_node(1, "b", ir::Role::kParam, DType::kF32, {5}),
             make_node(2, "y", ir::Role::kOutput, DType::kF32, {8, 5})};
  return p;
}

inline Kernel elementwise_kernel() {
  Kernel k;
  k.name = "main_0";
  k.nodes = {0, 1, 2};
  k.var_count = 2;
  LExprRef at = add64(mul64(v(0), i64(5)), v(1));
  LExprRef x = ir::lload(0, DType::kF32, at);
  LExprRef b = ir::lload(1, DType::kF32, v(1));
  LExprRef value = ir::lop(
      Op::kRelu, DType::kF32,
      {ir::lop(Op::kAdd, DType::kF32,
               {ir::lop(Op::kMul, DType::kF32, {x, ir::lconst(DType::kF32, 2)}), b})});
  k.body = ploop(0, 8, {loop(1, 5, {comment("y: statement 1 of routine main"), store(2, at, value)})});
  return k;
}

// ---- reductions into local accumulators: s[i] = sum(x[i, j]), m[i] = max(x[i, j]) (6 x 7), -----
// ---- and an i32 sum n[i] = sum(k[i, j]) that wraps around --------------------------------------

inline ir::Program reduction_program() {
  ir::Program p;
  p.file = "<codegen test>";
  p.nodes = {make_node(0, "x", ir::Role::kInput, DType::kF32, {6, 7}),
             make_node(1, "s", ir::Role::kOutput, DType::kF32, {6}),
             make_node(2, "m", ir::Role::kOutput, DType::kF32, {6}),
             make_node(3, "k", ir::Role::kInput, DType::kI32, {6, 7}),
             make_node(4, "n", ir::Role::kOutput, DType::kI32, {6})};
  return p;
}

inline std::vector<Kernel> reduction_kernels() {
  auto reduce = [](std::string name, int in, int out, DType type, Op fold, double init) {
    Kernel k;
    k.name = std::move(name);
    k.nodes = {in, out};
    k.var_count = 2;
    k.local_count = 1;
    LExprRef acc = ir::llocal_load(0, type, i64(0));
    LExprRef x = ir::lload(in, type, add64(mul64(v(0), i64(7)), v(1)));
    k.body = ploop(0, 6, {local(0, type, 1,
                                {local_store(0, i64(0), ir::lconst(type, init)),
                                 loop(1, 7, {local_store(0, i64(0), ir::lop(fold, type, {acc, x}))}),
                                 store(out, v(0), acc)})});
    return k;
  };
  return {reduce("sum_rows", 0, 1, DType::kF32, Op::kAdd, 0),
          reduce("max_rows", 0, 2, DType::kF32, Op::kMax, -INFINITY),
          reduce("sum_rows_i32", 3, 4, DType::kI32, Op::kAdd, 0)};
}

// ---- parallel split with a guarded (zero-padded) stencil: ----------------------------------------
// ---- o[i] = (i >= 1 ? s[i - 1] : 0) + s[i] + (i + 1 < E ? s[i + 1] : 0), E = 37 ----------------

inline constexpr int64_t kSplitExtent = 37;

inline ir::Program split_program() {
  ir::Program p;
  p.file = "<codegen test>";
  p.nodes = {make_node(0, "s", ir::Role::kInput, DType::kF64, {kSplitExtent}),
             make_node(1, "o", ir::Role::kOutput, DType::kF64, {kSplitExtent})};
  return p;
}

inline Kernel split_kernel() {
  Kernel k;
  k.name = "stencil";
  k.nodes = {0, 1};
  k.var_count = 1;
  auto at = [](int64_t d) { return add64(v(0), i64(d)); };
  LExprRef left = ir::lop(
      Op::kSelect, DType::kF64,
      {ir::lop(Op::kGe, DType::kI32, {v(0), i64(1)}), ir::lload(0, DType::kF64, at(-1)),
       ir::lconst(DType::kF64, 0)});
  LExprRef right = ir::lop(
      Op::kSelect, DType::kF64,
      {ir::lop(Op::kLt, DType::kI32, {at(1), i64(kSplitExtent)}), ir::lload(0, DType::kF64, at(1)),
       ir::lconst(DType::kF64, 0)});
  LExprRef sum = ir::lop(Op::kAdd, DType::kF64,
                         {ir::lop(Op::kAdd, DType::kF64, {left, ir::lload(0, DType::kF64, v(0))}), right});
  k.body = ploop(0, kSplitExtent, {store(1, v(0), sum)});
  return k;
}

// ---- every op on f32, f64 and i32 operands in one kernel ---------------------------------------
// Inputs a, b, c per type (N elements each); results go to one output node per result type, one
// slot of N elements per case.

inline constexpr int64_t kOpsN = 16;

struct OpCase {
  std::string label;
  DType in;   // operand type
  DType out;  // result type
  Op op;
  // Whether the result may differ from the test's reference by rounding (libm functions, fma).
  bool approximate = false;
};

inline int type_index(DType t) { return t == DType::kF32 ? 0 : t == DType::kF64 ? 1 : 2; }
// Nodes: a, b, c of each operand type (3 * type_index + 0..2), results r_f32 = 9, r_f64 = 10,
// r_i32 = 11.
inline int input_node(DType t, int which) { return 3 * type_index(t) + which; }
inline int result_node(DType t) { return 9 + type_index(t); }

inline std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  const DType types[] = {DType::kF32, DType::kF64, DType::kI32};
  const Op unary[] = {Op::kNeg, Op::kExp,  Op::kLog, Op::kSqrt, Op::kRsqrt, Op::kTanh, Op::kSigmoid,
                      Op::kRelu, Op::kAbs, Op::kSin, Op::kCos,  Op::kFloor, Op::kCeil, Op::kErf};
  const Op binary[] = {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMax, Op::kMin, Op::kPow};
  const Op compare[] = {Op::kLt, Op::kLe, Op::kGt, Op::kGe, Op::kEq, Op::kNe};
  auto libm = [](Op op) {
    return op == Op::kExp || op == Op::kLog || op == Op::kRsqrt || op == Op::kTanh ||
           op == Op::kSigmoid || op == Op::kSin || op == Op::kCos || op == Op::kErf || op == Op::kPow;
  };
  for (DType t : types) {
    std::string tn = t == DType::kF32 ? "f32" : t == DType::kF64 ? "f64" : "i32";
    for (Op op : unary) cases.push_back({"unary", t, t, op, libm(op)});
    for (Op op : binary) cases.push_back({"binary", t, t, op, libm(op)});
    for (Op op : compare) cases.push_back({"compare", t, t, op});
    cases.push_back({"compare to i32", t, DType::kI32, Op::kLt});
    cases.push_back({"select", t, t, Op::kSelect});
    cases.push_back({"fma", t, t, Op::kFma, t != DType::kI32});
    cases.push_back({"cast", t, DType::kF32, Op::kCastF32});
    cases.push_back({"cast", t, DType::kF64, Op::kCastF64});
    cases.push_back({"cast", t, DType::kI32, Op::kCastI32});
  }
  return cases;
}

// The slot of each case within its result node.
inline std::vector<int64_t> op_slots(const std::vector<OpCase>& cases, int64_t counts[3]) {
  std::vector<int64_t> slots;
  counts[0] = counts[1] = counts[2] = 0;
  for (const OpCase& c : cases) slots.push_back(counts[type_index(c.out)]++);
  return slots;
}

inline ir::Program all_ops_program() {
  std::vector<OpCase> cases = op_cases();
  int64_t counts[3];
  op_slots(cases, counts);
  ir::Program p;
  p.file = "<codegen test>";
  const char* names[] = {"f32", "f64", "i32"};
  const DType types[] = {DType::kF32, DType::kF64, DType::kI32};
  for (int t = 0; t < 3; ++t) {
    for (int w = 0; w < 3; ++w) {
      p.nodes.push_back(make_node(3 * t + w, std::string(1, char('a' + w)) + "_" + names[t],
                                  ir::Role::kInput, types[t], {kOpsN}));
    }
  }
  for (int t = 0; t < 3; ++t) {
    p.nodes.push_back(make_node(9 + t, std::string("r_") + names[t], ir::Role::kOutput, types[t],
                                {counts[t], kOpsN}));
  }
  return p;
}

inline Kernel all_ops_kernel() {
  std::vector<OpCase> cases = op_cases();
  int64_t counts[3];
  std::vector<int64_t> slots = op_slots(cases, counts);
  Kernel k;
  k.name = "all_ops";
  for (int n = 0; n < 12; ++n) k.nodes.push_back(n);
  k.var_count = 1;
  std::vector<LStmtRef> body;
  for (size_t i = 0; i < cases.size(); ++i) {
    const OpCase& c = cases[i];
    auto in = [&](int w) { return ir::lload(input_node(c.in, w), c.in, v(0)); };
    std::vector<LExprRef> args;
    for (int w = 0; w < ir::op_arity(c.op); ++w) args.push_back(in(w));
    // The golden files name negation "neg", as the loop-IR text does.
    const std::string name = c.op == Op::kNeg ? "neg" : std::string(ir::op_name(c.op));
    body.push_back(comment(name + " " + std::string(c.in == DType::kF32   ? "f32"
                                                             : c.in == DType::kF64 ? "f64"
                                                                                   : "i32")));
    body.push_back(store(result_node(c.out), add64(i64(slots[i] * kOpsN), v(0)),
                         ir::lop(c.op, c.out, std::move(args))));
  }
  k.body = ploop(0, kOpsN, std::move(body));
  return k;
}

// ---- comments, an unused binding, a large (heap) local inside a small one, no program ----------

inline Kernel comments_kernel() {
  Kernel k;
  k.name = "commented";
  k.nodes = {4, 7};  // node 7 is bound but not used
  k.var_count = 2;
  k.local_count = 4;
  // l0: 4 f64 on the stack; l1: 20000 f64 (160000 bytes) on the heap.
  LExprRef big = ir::llocal_load(1, DType::kF64, v(1));
  k.body = block(
      {comment("A comment with */ inside, /* too,\na second line and a trigraph ?\?/"),
       local(0, DType::kF64, 4,
             {local(1, DType::kF64, 20000,
                    {loop(1, 20000,
                          {local_store(1, v(1),
                                       ir::lop(Op::kCastF64, DType::kF64,
                                               {ir::lop(Op::kCastI32, DType::kI32, {v(1)})}))}),
                     loop(1, 20000,
                          {local_store(0, i64(0),
                                       ir::lop(Op::kAdd, DType::kF64,
                                               {ir::llocal_load(0, DType::kF64, i64(0)), big}))})}),
              store(4, i64(0), ir::llocal_load(0, DType::kF64, i64(0)))}),
       // Declared, never used: a heap local inside another one.
       local(2, DType::kI32, 20000, {local(3, DType::kF32, 20000, {})})});
  return k;
}

// ---- constants that need care to print exactly, and i64 offsets that plain C arithmetic can or --
// ---- cannot compute without overflow (nodes: 0 f32[12], 1 f64[11], 2 i32[110]) ------------------

inline const double kF32Constants[] = {0.1,      1e-45,     3.4028234663852886e38, -0.0,
                                       1.0 / 3,  1e300,     -1e300,                INFINITY,
                                       -INFINITY, NAN,      16777217,              1e10};
inline const double kF64Constants[] = {0.1,      5e-324,    1.7976931348623157e308, -0.0,
                                       1.0 / 3,  2.5e-308,  INFINITY,               -INFINITY,
                                       NAN,      9007199254740993.0, 123456789};
inline const double kI32Constants[] = {0, -1, 2147483647, -2147483648.0, 1e10, -1e10, NAN, 2.9, -2.9};

inline Kernel constants_kernel() {
  Kernel k;
  k.name = "constants";
  k.nodes = {0, 1, 2};
  k.var_count = 1;
  auto i32 = [](double x) { return ir::lconst(DType::kI32, x); };
  auto sub64 = [](LExprRef a, LExprRef b) { return ir::lop(Op::kSub, DType::kI64, {a, b}); };
  auto div64 = [](LExprRef a, LExprRef b) { return ir::lop(Op::kDiv, DType::kI64, {a, b}); };
  std::vector<LStmtRef> body;
  for (size_t i = 0; i < std::size(kF32Constants); ++i) {
    body.push_back(store(0, i64(static_cast<int64_t>(i)), ir::lconst(DType::kF32, kF32Constants[i])));
  }
  for (size_t i = 0; i < std::size(kF64Constants); ++i) {
    body.push_back(store(1, i64(static_cast<int64_t>(i)), ir::lconst(DType::kF64, kF64Constants[i])));
  }
  for (size_t i = 0; i < std::size(kI32Constants); ++i) {
    body.push_back(store(2, i64(static_cast<int64_t>(i)), i32(kI32Constants[i])));
  }
  // v0 in [0, 4).
  // 20 + v0 * 2: plain C.
  body.push_back(store(2, add64(i64(20), mul64(v(0), i64(2))), i32(1)));
  // 30 + (v0 * 2^62 - v0 * 2^62) + v0: v0 * 2^62 may overflow, so wrapping helpers.
  const LExprRef big = mul64(v(0), i64(int64_t{1} << 62));
  body.push_back(store(2, add64(add64(i64(30), sub64(big, big)), v(0)), i32(2)));
  // 3 * 5 + 34 + v0 + v0 / 4: folds, and divides by a constant in plain C.
  body.push_back(store(2, add64(add64(add64(mul64(i64(3), i64(5)), i64(34)), v(0)), div64(v(0), i64(4))),
                       i32(3)));
  // 60 + 40 / (v0 + 1): the divisor is never 0, so plain C.
  body.push_back(store(2, add64(i64(60), div64(i64(40), add64(v(0), i64(1)))), i32(4)));
  // (INT64_MAX + v0) - INT64_MAX + 60: wraps past INT64_MAX and back, so helpers.
  const LExprRef max = i64(std::numeric_limits<int64_t>::max());
  body.push_back(store(2, add64(sub64(add64(max, v(0)), max), i64(60)), i32(5)));
  k.body = ploop(0, 4, std::move(body));
  return k;
}

// ---- element types (language version 3): one store per kind of code each type gets -------------

// Node 0 of each type's row: u8 a, b; i8 c; u64 d; bool m; f16 h; bf16 g; f64 x; f32 f; then the
// results: u8, i8, u64, bool, f16, bf16, u16, i16 (nodes 9..16).
inline ir::Program element_types_program() {
  ir::Program p;
  p.file = "<codegen test>";
  const std::pair<const char*, DType> nodes[] = {
      {"a", DType::kU8},    {"b", DType::kU8},    {"c", DType::kI8},   {"d", DType::kU64},  {"m", DType::kBool},
      {"h", DType::kF16},   {"g", DType::kBF16},  {"x", DType::kF64},  {"f", DType::kF32},  {"r_u8", DType::kU8},
      {"r_i8", DType::kI8}, {"r_u64", DType::kU64}, {"r_bool", DType::kBool}, {"r_f16", DType::kF16},
      {"r_bf16", DType::kBF16}, {"r_u16", DType::kU16}, {"r_i16", DType::kI16}};
  for (int i = 0; i < static_cast<int>(std::size(nodes)); ++i) {
    const bool result = i >= 9;
    p.nodes.push_back(make_node(i, nodes[i].first, result ? ir::Role::kOutput : ir::Role::kInput, nodes[i].second,
                                {8}));
  }
  return p;
}

inline Kernel element_types_kernel() {
  Kernel k;
  k.name = "element_types";
  for (int n = 0; n < 17; ++n) k.nodes.push_back(n);
  k.var_count = 1;
  auto in = [](int node, DType t) { return ir::lload(node, t, v(0)); };
  auto op = [](Op o, DType t, std::vector<LExprRef> args) { return ir::lop(o, t, std::move(args)); };
  const DType u8 = DType::kU8, i8 = DType::kI8, u64 = DType::kU64, b = DType::kBool, h = DType::kF16,
              g = DType::kBF16, f32 = DType::kF32;
  k.body = ploop(0, 8, {
      comment("u8 + u8 wraps at 8 bits; a u8 * u8 would overflow int in C"),
      store(9, v(0), op(Op::kAdd, u8, {op(Op::kMul, u8, {in(0, u8), in(1, u8)}), ir::lconst(u8, 3)})),
      comment("i8 >> by an i64 amount; / by a value that may be 0 or -1"),
      store(10, v(0), op(Op::kDiv, i8, {op(Op::kShr, i8, {in(2, i8), ir::lvar(0)}), in(2, i8)})),
      comment("u64 divides and compares unsigned; its literals are suffixed"),
      store(11, v(0), op(Op::kSelect, u64, {op(Op::kLt, u64, {in(3, u64), ir::lconst(u64, 9223372036854775808.0)}),
                                           op(Op::kDiv, u64, {in(3, u64), ir::lconst(u64, 3)}), in(3, u64)})),
      comment("bool: a load is != 0, ~ is not, & is and"),
      store(12, v(0), op(Op::kBitAnd, b, {op(Op::kBitNot, b, {in(4, b)}), op(Op::kCastBool, b, {in(8, f32)})})),
      comment("f16 computed in float and rounded at the store"),
      store(13, v(0), op(Op::kCastF16, h, {op(Op::kFma, f32, {op(Op::kCastF32, f32, {in(5, h)}), in(8, f32), ir::lconst(f32, 1)})})),
      comment("f64 to bf16 rounded once"),
      store(14, v(0), op(Op::kCastBF16, g, {in(7, DType::kF64)})),
      comment("float to integer casts saturate"),
      store(15, v(0), op(Op::kCastU16, DType::kU16, {op(Op::kCastF32, f32, {in(6, g)})})),
      store(16, v(0), op(Op::kCastI16, DType::kI16, {in(7, DType::kF64)})),
  });
  return k;
}

}  // namespace kiln::codegen_test
