// Loops over f16 data in blocks (dialects with half_blocks(): C). The prelude's f16 conversions
// (prelude_halves.cc) are branch-free C of about 20 instructions an element each way, which makes
// a loop over f16 data compute-bound where the same loop over bf16 (a shift) is bandwidth-bound.
// F16C's vcvtph2ps / vcvtps2ph convert 8 elements an instruction (16 with AVX-512F), but GCC
// does not vectorize conversions of `_Float16` (GCC 12), so the emitter writes them itself: a
// loop that qualifies is printed as
//
//   {
//     int64_t v0 = begin;
//   #if defined(__F16C__)
//     for (; end - v0 >= 32; v0 += 32) {
//       float kiln_h0[32], kiln_h1[32];                 // the block's f16 loads, converted
//       kiln_f16_quiet_x32(kiln_h0, &n0[v0]);
//       kiln_f16_quiet_x32(kiln_h1, &n1[v0]);
//       float kiln_s0[32];                              // a statement over the block, as before
//       for (int kiln_j = 0; kiln_j < 32; ++kiln_j) kiln_s0[kiln_j] = kiln_relu_f32(kiln_h0[kiln_j] * kiln_h1[kiln_j]);
//       kiln_f16_bits_x32(&n2[v0], kiln_s0);            // an f16 store, converted back
//     }
//   #endif
//     for (; v0 < end; ++v0) { ... }                    // the rest (all of it without F16C)
//   }
//
// Each statement in turn runs over the block, its value printed as in the plain loop, the
// block's converted loads read from their arrays and the loop variable as v0 + kiln_j, so GCC
// vectorizes the fixed-count loop as it does the plain one; the conversions give the prelude's
// bits (prelude_halves.cc; kiln_f16_quiet_x32 only where nothing tells a signalling NaN from a
// quiet one, see below), so the results are the same bit for bit. The processor is part of the
// CPU driver's cache key, so the test of __F16C__ is made for the processor that runs the
// kernel (-march=native). A statement that only converts such a load to f32
// (`y[i] = f32(x[i])`) converts the block straight into its target.
//
// A loop qualifies when its body is stores (and comments), each at an offset affine in the
// variable with coefficient 1 that loads nothing, and:
//  - each node or local it stores is loaded and stored there only at that offset, so that running
//    each statement over a block before the next, and loading a block before storing it, reads
//    and writes what the loop did iteration by iteration;
//  - it stores an f16 node, or loads one it does not store at such an offset outside the operands
//    that a select picks between (a select evaluates only the one it picks, so a load there may be
//    guarded: the block loads only those that every iteration makes), or converts one to f32;
//  - its extent is at least a block, or not known until the kernel runs.
#include "codegen/kernel_emitter.h"

namespace kiln::codegen::internal {

namespace {

// Elements of a block: what the prelude's kiln_f16_*_x32 convert. Blocks of 16 to 128 ran
// alike (relu(a * b + c) over 2^14 elements, in the cache); 32 leaves at most 31 to the plain
// loop.
constexpr int kBlock = 32;

const StoreTarget* stored(const std::vector<StoreTarget>& list, bool node, int id) {
  for (const StoreTarget& s : list) {
    if (s.node == node && s.id == id) return &s;
  }
  return nullptr;
}

// Whether every load of a stored node or local in `e` is at its store's offset.
bool loads_at_stores(const LExpr* e, const std::vector<StoreTarget>& list) {
  if (!e) return true;
  if (e->kind == LExpr::Kind::kLoad || e->kind == LExpr::Kind::kLocalLoad) {
    const StoreTarget* s = stored(list, e->kind == LExpr::Kind::kLoad, e->kind == LExpr::Kind::kLoad ? e->node : e->local);
    if (s && !ir::same_expr(e->offset.get(), s->offset)) return false;
  }
  if (!loads_at_stores(e->offset.get(), list)) return false;
  for (const LExprRef& a : e->args) {
    if (!loads_at_stores(a.get(), list)) return false;
  }
  return true;
}

// The f16 loads of `e` at consecutive elements of nodes the loop does not store, that every
// evaluation of `e` makes (not inside the operands a select picks between), each once.
void block_loads(const LExpr* e, int var, const std::vector<StoreTarget>& list, std::vector<const LExpr*>* out) {
  if (!e) return;
  if (e->kind == LExpr::Kind::kLoad && e->type == DType::kF16 && !stored(list, true, e->node) &&
      unit_stride(e->offset.get(), var)) {
    for (const LExpr* seen : *out) {
      if (ir::same_expr(seen, e)) return;
    }
    out->push_back(e);
    return;
  }
  block_loads(e->offset.get(), var, list, out);
  const size_t evaluated = e->kind == LExpr::Kind::kOp && e->op == Op::kSelect ? 1 : e->args.size();
  for (size_t i = 0; i < evaluated; ++i) block_loads(e->args[i].get(), var, list, out);
}

// The f16 load whose value `s` stores unchanged as f32, if it is one block_loads would take (a
// conversion: the block converts it into the target directly); else null.
const LExpr* converted_load(const LStmt& s, int var, const std::vector<StoreTarget>& list) {
  if (s.kind != LStmt::Kind::kStore || s.value->type != DType::kF32) return nullptr;
  const LExpr* e = s.value.get();
  if (e->kind == LExpr::Kind::kOp && e->op == Op::kCastF32) e = e->args[0].get();
  std::vector<const LExpr*> load;
  if (e->kind == LExpr::Kind::kLoad) block_loads(e, var, list, &load);
  return load.empty() ? nullptr : load[0];
}

bool calls_pow(const LExpr* e) {
  if (!e) return false;
  if (e->kind == LExpr::Kind::kOp && e->op == Op::kPow) return true;
  if (calls_pow(e->offset.get())) return true;
  for (const LExprRef& a : e->args) {
    if (calls_pow(a.get())) return true;
  }
  return false;
}

}  // namespace

Result<bool> KernelEmitter::half_block_loop(const LStmt& loop, const std::string& from, const std::string& to,
                                            Printer& out) {
  if (!loop.extent_expr && loop.extent < kBlock) return false;
  std::vector<StoreTarget> stores;
  bool stores_f16 = false;
  for (const LStmtRef& s : loop.body) {
    if (s->kind == LStmt::Kind::kComment) continue;
    if ((s->kind != LStmt::Kind::kStore && s->kind != LStmt::Kind::kLocalStore) || !s->value ||
        !unit_stride(s->offset.get(), loop.var)) {
      return false;
    }
    const bool node = s->kind == LStmt::Kind::kStore;
    const int id = node ? s->node : s->local;
    if (const StoreTarget* seen = stored(stores, node, id)) {
      if (!ir::same_expr(seen->offset, s->offset.get())) return false;
    } else {
      stores.push_back({node, id, s->offset.get()});
    }
    stores_f16 = stores_f16 || (node && s->value->type == DType::kF16);
  }
  if (stores.empty()) return false;
  // The loads of the statements other than conversions, and whether those statements could tell
  // a signalling NaN from a quiet one: vcvtph2ps makes it quiet, where kiln_f16_value keeps it,
  // and two things tell them apart, an f32 store of the value as it was loaded (an f16 or bf16
  // store makes every NaN the quiet NaN of its sign, a conversion to f64 makes it quiet, to an
  // integer 0, and arithmetic makes it quiet) and powf (of 1 and a quiet NaN, or a quiet NaN and
  // 0, 1; of a signalling one, NaN). Without either, the loads need not look for one
  // (kiln_f16_quiet_x32).
  std::vector<const LExpr*> loads;
  bool conversions = false, signalling_seen = false;
  for (const LStmtRef& s : loop.body) {
    if (s->kind == LStmt::Kind::kComment) continue;
    if (!loads_at_stores(s->value.get(), stores)) return false;
    if (converted_load(*s, loop.var, stores)) {
      conversions = true;
      continue;
    }
    block_loads(s->value.get(), loop.var, stores, &loads);
    signalling_seen = signalling_seen || s->value->type == DType::kF32 || calls_pow(s->value.get());
  }
  if (loads.empty() && !stores_f16 && !conversions) return false;
  const std::string convert = signalling_seen ? "kiln_f16_value_x" : "kiln_f16_quiet_x";

  const std::string v = var_name(loop.var), i64(tname(DType::kI64)), f32(tname(DType::kF32));
  const std::string block = std::to_string(kBlock);
  const std::string each = "for (int kiln_j = 0; kiln_j < " + block + "; ++kiln_j)";
  KILN_ASSIGN_OR_RETURN(var_extent_[loop.var], loop_extent_bound(loop));
  out.line("{");
  out.indent();
  out.line(i64 + " " + v + " = " + from + ";");
  out.append("#if defined(__F16C__)\n");
  if (options_.comments) {
    out.line("/* f16 in blocks of " + block + ", converted by F16C's vector instructions (the rest below) */");
  }
  out.line("for (; " + to + " - " + v + " >= " + block + "; " + v + " += " + block + ") {");
  out.indent();
  // The loads' arrays, filled at the block's first element.
  std::string arrays;
  for (size_t k = 0; k < loads.size(); ++k) {
    const std::string name = "kiln_h" + std::to_string(k);
    arrays += (k ? ", " : "") + name + "[" + block + "]";
    block_loads_.emplace_back(loads[k], name);
  }
  if (!arrays.empty()) out.line(f32 + " " + arrays + ";");
  for (const auto& [load, name] : block_loads_) {
    KILN_ASSIGN_OR_RETURN(Code at, offset(load->offset));
    const BindingInfo& b = bindings_[binding_of_node_.at(load->node)];
    out.line(helpers_.use(convert + block) + "(" + name + ", &" + b.var + "[" + at.text + "]);");
  }
  int f16_stores = 0;
  for (const LStmtRef& s : loop.body) {
    if (const LExpr* load = s->kind == LStmt::Kind::kComment ? nullptr : converted_load(*s, loop.var, stores)) {
      // A conversion: straight into the target.
      KILN_ASSIGN_OR_RETURN(Code to_at, offset(s->offset));
      KILN_ASSIGN_OR_RETURN(Code from_at, offset(load->offset));
      out.line(helpers_.use("kiln_f16_value_x" + block) + "(&" + bindings_[binding_of_node_.at(s->node)].var + "[" +
               to_at.text + "], &" + bindings_[binding_of_node_.at(load->node)].var + "[" + from_at.text + "]);");
      continue;
    }
    if (s->kind == LStmt::Kind::kComment || s->kind == LStmt::Kind::kLocalStore || s->value->type != DType::kF16) {
      // Over the block as in the plain loop.
      block_var_ = loop.var;
      if (s->kind == LStmt::Kind::kComment) {
        KILN_RETURN_IF_ERROR(statement_body(*s, out, /*tail=*/false));
      } else {
        out.line(each + " {");
        out.indent();
        KILN_RETURN_IF_ERROR(statement_body(*s, out, /*tail=*/true));
        out.dedent();
        out.line("}");
      }
      block_var_ = -1;
      continue;
    }
    // An f16 store: the values the plain loop would round and store, converted at the end.
    const std::string name = "kiln_s" + std::to_string(f16_stores++);
    block_var_ = loop.var;
    KILN_ASSIGN_OR_RETURN(Code value, narrow_float_stored(s->value));
    block_var_ = -1;
    KILN_ASSIGN_OR_RETURN(Code at, offset(s->offset));
    const BindingInfo& b = bindings_[binding_of_node_.at(s->node)];
    out.line(f32 + " " + name + "[" + block + "];");
    out.line(each + " " + name + "[kiln_j] = " + value.text + ";");
    out.line(helpers_.use("kiln_f16_bits_x" + block) + "(&" + b.var + "[" + at.text + "], " + name + ");");
  }
  block_loads_.clear();
  out.dedent();
  out.line("}");
  out.append("#endif\n");
  out.line("for (; " + v + " < " + to + "; ++" + v + ") {");
  out.indent();
  KILN_RETURN_IF_ERROR(statements(loop.body, out, /*tail=*/true));
  out.dedent();
  out.line("}");
  out.dedent();
  out.line("}");
  var_extent_[loop.var] = std::nullopt;
  return true;
}

}  // namespace kiln::codegen::internal
