// The random program generator (program_generator.h): the program's declarations, its routines
// and statements, subscripts and the tensors a statement may read.
#include "runtime/program_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace kiln::e2e {

using ir::DType;
using ir::Role;

std::string ProgramGenerator::generate() {
  declare();
  const int routines = 1 + pick(3);
  const int gather_routine = pick(routines);
  std::string body;
  for (int r = 0; r < routines; ++r) {
    const bool top_level = chance(0.4) && r == 0 && allow_main_;
    std::string name = prefix_ + "r" + std::to_string(r);
    if (!top_level) body += "\nroutine " + name + " {\n";
    else body += "\n# statements outside a routine: the routine main\n";
    const int statements = 2 + pick(5);
    const std::string indent = top_level ? "" : "  ";
    if (!row_block_.empty() && !row_block_done_ && chance(0.6)) {
      // The row block: each row tensor from the earlier ones, then an output from the last.
      row_block_done_ = true;
      const GenTensor* previous = nullptr;
      for (size_t t : row_block_) {
        GenTensor& target = tensors_[t];
        body += indent + statement(&target, previous, true) + "\n";
        if (target.role == Role::kTensor) previous = &target;
      }
    }
    if (!gather_.empty() && r == gather_routine) body += indent + gather_statement() + "\n";
    for (int s = 0; s < statements; ++s) {
      GenTensor* pipe = nullptr;
      for (GenTensor& t : tensors_) {
        if (t.pipe && !t.written && !pipe) pipe = &t;
      }
      if (pipe && chance(0.35)) {
        // An intermediate made for one reader.
        body += indent + statement(pipe) + "\n";
        body += indent + statement(nullptr, pipe) + "\n";
        if (chance(0.3)) pipe->pipe_open = true;
        ++s;
        continue;
      }
      body += indent + statement() + "\n";
    }
    if (!top_level) body += "}\n";
  }
  return declarations_ + body;
}

GenTensor& ProgramGenerator::add(Role role, const std::string& stem, DType dtype, std::vector<int64_t> dims) {
  GenTensor t;
  t.name = prefix_ + stem + std::to_string(tensors_.size());
  t.role = role;
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.bounded = role == Role::kInput || role == Role::kConst || chance(0.5);
  t.written = false;
  // Integer inputs hold values across their whole range now and then; f16 / bf16 tensors that
  // are written are exact (readable) or rounded (unread), half and half.
  if (role == Role::kInput && ir::is_integer_type(dtype)) t.wide = chance(0.3);
  if (t.is_narrow() && role != Role::kInput && role != Role::kConst) t.narrow_exact = chance(0.5);
  tensors_.push_back(std::move(t));
  return tensors_.back();
}

std::set<std::string> ProgramGenerator::wide_inputs() const {
  std::set<std::string> out;
  for (const GenTensor& t : tensors_) {
    if (t.wide) out.insert(t.name);
  }
  return out;
}

DType ProgramGenerator::any_type(double ints) {
  // Weights in percent at ints = 1: f32 48, f64 8, f16 6, bf16 6, i32 8, and 3 each for bool,
  // i8, u8, i16, u16, u32, i64, u64.
  struct Weighted { DType type; double weight; bool integer; };
  static const Weighted table[] = {
      {DType::kF32, 48, false}, {DType::kF64, 8, false}, {DType::kF16, 6, false}, {DType::kBF16, 6, false},
      {DType::kI32, 8, true},   {DType::kBool, 3, true}, {DType::kI8, 3, true},   {DType::kU8, 3, true},
      {DType::kI16, 3, true},   {DType::kU16, 3, true},  {DType::kU32, 3, true},  {DType::kI64, 3, true},
      {DType::kU64, 3, true}};
  double total = 0;
  for (const Weighted& w : table) total += w.weight * (w.integer ? ints : 1);
  double u = rng_.uniform() * total;
  for (const Weighted& w : table) {
    u -= w.weight * (w.integer ? ints : 1);
    if (u < 0) return w.type;
  }
  return DType::kF32;
}

DType ProgramGenerator::index_type() {
  static const std::vector<DType> others = {DType::kI8, DType::kU8, DType::kI16, DType::kI64};
  return chance(0.5) ? DType::kI32 : one_of(others);
}

std::vector<int64_t> ProgramGenerator::shape() {
  int rank = pick(10);
  rank = rank < 1 ? 0 : rank < 4 ? 1 : rank < 8 ? 2 : 3;
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d) dims.push_back(dim());
  return dims;
}

std::string ProgramGenerator::dims_text(const std::vector<int64_t>& dims, bool bare_scalar) {
  if (dims.empty()) return bare_scalar ? "" : "[]";
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

void ProgramGenerator::declare() {
  const int pool = 2 + pick(2);
  // Now and then a dimension of 8 or 16 and a row block of 64-71 rows: the sizes where the C
  // dialect writes inner loops as vectors and products run in register tiles.
  for (int i = 0; i < pool; ++i) dim_pool_.push_back(chance(0.15) ? 8 * (1 + pick(2)) : 1 + pick(7));
  tensors_.reserve(32);  // references into tensors_ stay valid

  const int inputs = 1 + pick(4), params = pick(4), outputs = 1 + pick(3), temps = pick(4);
  for (int i = 0; i < inputs; ++i) {
    const DType type = any_type();
    std::vector<int64_t> dims = shape();
    GenTensor& x = add(Role::kInput, "x", type, std::move(dims));
    if (i == 0) x.wide = false;  // float_input's last resort: an input that is not wide
  }
  for (int i = 0; i < params; ++i) {
    const DType type = any_type();
    std::vector<int64_t> dims = shape();
    GenTensor& p = add(Role::kParam, "w", type, std::move(dims));
    p.init = initializer(p);
  }
  for (int i = 0; i < outputs; ++i) {
    const DType type = any_type();
    add(Role::kOutput, "y", type, shape());
  }
  for (int i = 0; i < temps; ++i) {
    const DType type = any_type();
    std::vector<int64_t> dims = shape();
    GenTensor& t = add(Role::kTensor, "t", type, std::move(dims));
    if (chance(0.2)) t.init = initializer(t);
  }
  for (int i = pick(3); i > 0; --i) {
    // An intermediate for one reader, which lowering inlines: f16 / bf16 ones exact, so that
    // the inlined value must be rounded as the stored one is.
    const double u = rng_.uniform();
    const DType type = u < 0.75 ? DType::kF32 : u < 0.87 ? DType::kF64 : u < 0.94 ? DType::kF16 : DType::kBF16;
    GenTensor& t = add(Role::kTensor, "v", type, shape());
    t.pipe = true;
    t.bounded = true;
    t.narrow_exact = t.is_narrow();
  }
  if (chance(0.6)) {
    // The row block: 2-4 intermediates and an output sharing dimension 0.
    const int64_t rows = chance(0.15) ? 64 + pick(8) : one_of(dim_pool_);
    const int count = 2 + pick(3);
    for (int i = 0; i <= count; ++i) {
      std::vector<int64_t> dims = {rows};
      for (int d = pick(3); d > 0; --d) dims.push_back(dim());
      const bool last = i == count;
      GenTensor& t = add(last ? Role::kOutput : Role::kTensor, last ? "z" : "r",
                         chance(0.9) ? DType::kF32 : DType::kF64, std::move(dims));
      t.row = true;
      t.bounded = true;
      row_block_.push_back(tensors_.size() - 1);
    }
  }
  if (chance(0.35)) {
    // The gather (gather_statement): index tensor, values with the choices first, output.
    std::vector<int64_t> dims;
    for (int d = 1 + pick(2); d > 0; --d) dims.push_back(dim());
    std::vector<int64_t> choices = {2 + pick(6)};
    choices.insert(choices.end(), dims.begin(), dims.end());
    const DType index = index_type();
    add(Role::kInput, "gi", index, dims);
    const double u = rng_.uniform();
    add(Role::kInput, "gx", u < 0.7 ? DType::kF32 : u < 0.8 ? DType::kF64 : u < 0.9 ? DType::kF16 : DType::kBF16, choices);
    GenTensor& out = add(Role::kOutput, "gp", chance(0.85) ? DType::kF32 : DType::kF64, dims);
    out.gather = true;
    out.bounded = true;
    const size_t last = tensors_.size() - 1;
    gather_ = {last - 2, last - 1, last};
  }
  // Consts: an integer one (for subscripts and bounds), a float scalar, a filled tensor.
  if (chance(0.5)) {
    static const std::vector<DType> types = {DType::kI32, DType::kI32, DType::kI64, DType::kU8, DType::kI16, DType::kU16};
    GenTensor& c = add(Role::kConst, "n", one_of(types), {});
    c.value = 1 + pick(3);
    c.init = std::to_string(static_cast<int>(c.value));
  }
  if (chance(0.4)) {
    static const std::vector<DType> types = {DType::kF32, DType::kF32, DType::kF32, DType::kF32, DType::kF32,
                                             DType::kF32, DType::kF64, DType::kF64, DType::kF16, DType::kBF16};
    GenTensor& c = add(Role::kConst, "c", one_of(types), {});
    c.value = one_of(std::vector<double>{0.5, 0.25, 1.5, -0.75});
    c.init = format_number(c.value);
  }
  if (chance(0.3)) {
    GenTensor& c = add(Role::kConst, "k", DType::kF32, shape());
    c.value = one_of(std::vector<double>{0.5, 2, -1});
    c.init = format_number(c.value);
  }

  for (const GenTensor& t : tensors_) {
    std::string line = std::string(ir::role_name(t.role));
    line += std::string(line.size() < 6 ? 7 - line.size() : 1, ' ');
    line += t.name + " : " + std::string(ir::dtype_name(t.dtype)) + dims_text(t.dims, chance(0.5));
    if (!t.init.empty()) line += " = " + t.init;
    if (chance(0.1)) line += "  # " + std::string(t.bounded ? "bounded" : "free");
    declarations_ += line + "\n";
  }
}

std::string ProgramGenerator::format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string ProgramGenerator::initializer(const GenTensor& t) {
  if (t.dtype == DType::kI32) {
    switch (pick(3)) {
      case 0: return std::to_string(pick(5) - 2);
      case 1: return "uniform(-3, 4)";
      default: return "normal(0, 2)";
    }
  }
  // Random INITs are for floats and i32 only: the other integer types and bool get a number.
  if (t.dtype == DType::kBool) return one_of(std::vector<std::string>{"true", "false", "1", "0"});
  if (ir::is_unsigned_type(t.dtype)) return std::to_string(pick(4));
  if (ir::is_integer_type(t.dtype)) return std::to_string(pick(5) - 2);
  switch (pick(4)) {
    case 0: return one_of(std::vector<std::string>{"0", "1", "0.5", "-0.25", "1e-1"});
    case 1: return "uniform(-1, 1)";
    case 2: return "uniform(0, 0.5)";
    default: return "normal(0, 0.2)";
  }
}

GenTensor& ProgramGenerator::choose_target() {
  std::vector<std::pair<int, size_t>> weighted;
  int total = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const GenTensor& t = tensors_[i];
    int w = 0;
    if (t.pipe || t.row || t.gather) continue;
    if (t.role == Role::kOutput) w = t.written ? 1 : 4;
    if (t.role == Role::kParam) w = 2;
    if (t.role == Role::kTensor) w = t.written ? 2 : 3;
    if (w) weighted.push_back({w, i}), total += w;
  }
  int r = pick(total);
  for (auto [w, i] : weighted) {
    if (r < w) return tensors_[i];
    r -= w;
  }
  return tensors_[weighted.back().second];
}

std::string ProgramGenerator::statement(GenTensor* pipe_target, const GenTensor* must_read,
                                        bool row_block) {
  GenTensor* row_target = row_block ? pipe_target : nullptr;
  if (row_block) pipe_target = nullptr;
  GenTensor* chosen = row_target ? row_target : pipe_target ? pipe_target : &choose_target();
  for (int tries = 0; must_read && !chosen->is_wide_float() && tries < 20; ++tries) chosen = &choose_target();
  GenTensor& target = *chosen;
  if (!pipe_target && !row_target && !must_read && ir::is_integer_type(target.dtype) && chance(0.12)) {
    return arg_reduction_statement(target);
  }
  StatementCtx ctx;
  ctx.target = &target;
  ctx.row_mode = row_block;
  if (target.is_wide_float()) ctx.must_read = must_read;
  // Index names: target indices first, then candidates for reduced indices.
  std::vector<std::string> names = {"i", "j", "k", "l", "m", "n", "ky", "kx", "co"};
  for (size_t i = names.size(); i > 1; --i) std::swap(names[i - 1], names[static_cast<size_t>(pick(static_cast<int>(i)))]);
  size_t next_name = 0;
  for (int64_t d : target.dims) ctx.indices.push_back({names[next_name++], d, true, true, true, true});

  // Accumulation and reduction.
  const bool is_float = target.is_float();
  ir::Accum accum = ir::Accum::kAssign;
  {
    int a = pick(20);
    accum = a < 11 ? ir::Accum::kAssign : a < 15 ? ir::Accum::kAdd : a < 17 ? ir::Accum::kSub : ir::Accum::kMul;
  }
  if (is_float && target.bounded && (accum == ir::Accum::kAdd || accum == ir::Accum::kSub) &&
      target.small_adds >= 4) {
    accum = ir::Accum::kAssign;
  }
  if (is_float && target.may_inf && accum == ir::Accum::kMul) accum = ir::Accum::kAdd;

  if (pipe_target || (row_target && chance(0.85))) accum = ir::Accum::kAssign;
  // An f16 / bf16 target is never combined with its own value, which may be a rounding apart
  // between devices already: `=` only (and no reduction for an exact one).
  if (target.is_narrow()) accum = ir::Accum::kAssign;
  ir::Reduce reduce = ir::Reduce::kNone;
  if (!pipe_target && !target.narrow_exact && chance(0.45)) {
    std::vector<ir::Reduce> allowed = {ir::Reduce::kSum, ir::Reduce::kProd, ir::Reduce::kMax,
                                       ir::Reduce::kMin, ir::Reduce::kMean};
    if (is_float && (target.bounded || accum == ir::Accum::kMul)) {
      allowed = {ir::Reduce::kProd, ir::Reduce::kMax, ir::Reduce::kMin, ir::Reduce::kMean};
    }
    reduce = one_of(allowed);
    // Reduced-index candidates; their extents multiply to at most 7^3.
    const int count = pick(10) < 1 ? 0 : pick(10) < 7 ? 1 : pick(10) < 8 ? 2 : 3;
    for (int c = 0; c < count; ++c) ctx.indices.push_back({names[next_name++], dim(), false, false, false, false});
    ctx.reduction = true;
    // An empty max / min (every point out of range) gives -inf / +inf: keep that out of
    // bounded targets and of products.
    ctx.no_compound = (reduce == ir::Reduce::kMax || reduce == ir::Reduce::kMin) &&
                      (!is_float || target.bounded || accum == ir::Accum::kMul || chance(0.3));
    if (!is_float) ctx.no_compound = ctx.no_compound && chance(0.5);
  }

  // The right side.
  std::string rhs;
  if (!is_float) {
    Gen e = chance(0.15) && reduce == ir::Reduce::kNone ? exact_float(ctx) : int_expr(ctx, 3);
    if (reduce != ir::Reduce::kNone && e.literal) {
      Gen n = nonliteral_int(ctx);
      e = int_binary(e, "*", n);
    }
    // The mean of integers is computed in f64: exact only while the sum stays below 2^53.
    if (reduce == ir::Reduce::kMean && e.bound > 0x1p40) reduce = ir::Reduce::kSum;
    rhs = e.text;
  } else if (target.narrow_exact) {
    rhs = narrow_exact_value(ctx).text;
  } else {
    double limit = 8;  // bound of the right side (of the reduced expression for a reduction)
    bool bounded = target.bounded;
    if (bounded) limit = accum == ir::Accum::kAssign || accum == ir::Accum::kMul ? 1 : 0.125;
    else if (accum == ir::Accum::kMul) limit = 2;
    if (reduce == ir::Reduce::kSum || reduce == ir::Reduce::kMean) limit = std::min(limit, 2.0);
    if (reduce == ir::Reduce::kProd) limit = std::min(limit, 1.0);
    Gen e = float_expr(ctx, 3);
    if (reduce != ir::Reduce::kNone && e.literal) e = binary(e, "*", nonliteral_float(ctx), e.bound * 8);
    e = shape_bound(e, limit);
    rhs = e.text;
    if (bounded && (accum == ir::Accum::kAdd || accum == ir::Accum::kSub)) ++target.small_adds;
  }
  if (reduce != ir::Reduce::kNone) {
    rhs = std::string(ir::reduce_name(reduce)) + "(" + rhs + ")";
    if ((reduce == ir::Reduce::kMax || reduce == ir::Reduce::kMin) && ctx.any_compound &&
        target.is_float()) {
      target.may_inf = true;  // (only free targets get here)
    }
  }

  // The statement.
  std::string text = target.name;
  if (target.rank() > 0) {
    text += "[";
    for (int d = 0; d < target.rank(); ++d) text += (d ? ", " : "") + ctx.indices[static_cast<size_t>(d)].name;
    text += "]";
  }
  text += " " + std::string(ir::accum_name(accum)) + " " + rhs;
  std::vector<std::string> bounds;
  for (const Index& index : ctx.indices) {
    if (!index.used) continue;
    if (!index.target && target.rank() > 0 && chance(0.15)) {
      // A triangular bound (language version 2): below a target index plus at least 1, so that
      // every point keeps its first value (no empty max or min).
      const Index& by = ctx.indices[static_cast<size_t>(pick(target.rank()))];
      bounds.push_back(index.name + " < " + by.name + " + " + std::to_string(1 + pick(3)));
      continue;
    }
    if (!index.bare || (chance(0.1) && index.extent > 0)) {
      // An integer const of the same value may stand for the bound.
      std::string limit = std::to_string(index.extent);
      for (const GenTensor& t : tensors_) {
        if (t.role == Role::kConst && ir::is_integer_type(t.dtype) && t.value == double(index.extent) && chance(0.5)) {
          limit = t.name;
        }
      }
      bounds.push_back(index.name + " < " + limit);
    }
  }
  if (!bounds.empty()) {
    text += " where ";
    for (size_t b = 0; b < bounds.size(); ++b) text += (b ? ", " : "") + bounds[b];
  }
  target.written = true;
  return text;
}

std::string ProgramGenerator::gather_statement() {
  const GenTensor& index = tensors_[gather_[0]];
  const GenTensor& values = tensors_[gather_[1]];
  GenTensor& out = tensors_[gather_[2]];
  const std::string at = out.rank() == 1 ? "[a]" : "[a, b]";
  const std::string choices = std::to_string(values.dims[0]);
  // The key compared with g: the index itself, or shifted / clamped so that other values fall
  // in and out of range (abs(t) - 1 is -1 for t = 0).
  std::string key = index.name + at;
  switch (pick(5)) {
    case 0: key = "abs(" + key + ") - 1"; break;
    case 1: key = "min(" + key + ", " + choices + ")"; break;
    case 2: key = key + " + 1"; break;
    default: break;
  }
  const std::string value = values.name + (out.rank() == 1 ? "[g, a]" : "[g, a, b]");
  out.written = true;
  if (chance(0.5)) {
    // The gather itself (language version 2): the key read as a subscript; out of range reads 0.
    const std::string read = values.name + "[" + key + (out.rank() == 1 ? ", a]" : ", a, b]");
    switch (pick(3)) {
      case 0: return out.name + at + " = " + read;
      case 1: return out.name + at + " = " + read + " * 0.5 + " + value.substr(0, value.find('[')) + "[0" +
                     (out.rank() == 1 ? ", a]" : ", a, b]") + " * 0.5";
      default: return out.name + at + " = max(" + read + " - " + value + ")";  // over g, within [-2, 2]
    }
  }
  std::string rhs;
  if (chance(0.75)) {
    rhs = "select(" + (chance(0.7) ? key + " == g" : "g == " + key) + ", " + value + ", 0)";
  } else {
    rhs = "select(" + key + " != g, 0, " + value + ")";
  }
  // Exactly one choice (or none) matches, so sum and max stay within the values' [-1, 1].
  return out.name + at + " = " + (chance(0.8) ? "sum(" : "max(") + rhs + ")";
}

std::string ProgramGenerator::arg_reduction_statement(GenTensor& target) {
  StatementCtx ctx;
  ctx.target = &target;
  static const char* const names[] = {"i", "j", "k"};
  for (size_t d = 0; d < target.dims.size(); ++d) ctx.indices.push_back({names[d], target.dims[d], true, true, true, true});
  // Exact tensors of any type: integer and bool ones, float inputs, exact f16 / bf16 ones.
  std::vector<const GenTensor*> sources;
  for (bool floats : {false, true}) {
    for (const GenTensor* t : readable(ctx, floats, true)) {
      if (t->rank() > 0 && t->role != Role::kConst) sources.push_back(t);
    }
  }
  if (sources.empty()) return statement();
  const GenTensor& source = *one_of(sources);
  const int along = pick(source.rank());
  std::string read = source.name + "[";
  for (int d = 0; d < source.rank(); ++d) {
    const int64_t extent = source.dims[static_cast<size_t>(d)];
    std::string sub = d == along ? "r" : std::to_string(pick(static_cast<int>(extent)));
    if (d != along) {
      for (const Index& index : ctx.indices) {
        if (index.extent == extent && chance(0.7)) sub = index.name;
      }
    }
    read += (d ? ", " : "") + sub;
  }
  read += "]";
  // Ties (small integers, bools) give the first position; -x of an unsigned value wraps, which
  // reorders it.
  switch (pick(4)) {
    case 0: read = "-" + read; break;
    case 1: read = "abs(" + read + ")"; break;
    default: break;
  }
  target.written = true;
  std::string text = target.name;
  if (target.rank() > 0) {
    text += "[";
    for (int d = 0; d < target.rank(); ++d) text += (d ? ", " : "") + std::string(names[d]);
    text += "]";
  }
  return text + " = " + (chance(0.5) ? "argmax(" : "argmin(") + read + ")";
}

std::vector<size_t> ProgramGenerator::usable_indices(const StatementCtx& ctx) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < ctx.indices.size(); ++i) out.push_back(i);
  return out;
}

std::string ProgramGenerator::term(StatementCtx& ctx, size_t i, int64_t coefficient) {
  ctx.indices[i].used = true;
  ctx.indices[i].in_subscript = true;
  const std::string& name = ctx.indices[i].name;
  if (coefficient == 1) return name;
  return chance(0.8) ? std::to_string(coefficient) + "*" + name : name + "*" + std::to_string(coefficient);
}

std::string ProgramGenerator::plus_offset(std::string text, int64_t offset) {
  if (offset > 0) return text + " + " + std::to_string(offset);
  if (offset < 0) return text + " - " + std::to_string(-offset);
  return text;
}

const GenTensor* ProgramGenerator::int_const() {
  std::vector<const GenTensor*> consts;
  for (const GenTensor& t : tensors_) {
    if (t.role == Role::kConst && ir::is_integer_type(t.dtype)) consts.push_back(&t);
  }
  return consts.empty() ? nullptr : one_of(consts);
}

std::string ProgramGenerator::subscript(StatementCtx& ctx, int64_t size, int shift_of) {
  if (shift_of >= 0) {
    const int64_t offset = ctx.no_compound ? 0 : pick(4) - 1;  // -1 .. 2
    if (offset != 0) ctx.any_compound = true;
    if (offset == 0) ctx.indices[static_cast<size_t>(shift_of)].bare = true;
    return plus_offset(term(ctx, static_cast<size_t>(shift_of), 1), offset);
  }
  std::vector<size_t> bare, all = usable_indices(ctx);
  for (size_t i : all) {
    if (ctx.indices[i].extent == size) bare.push_back(i);
  }
  // Prefer an unused reduced index (so that reductions reduce), then any bare candidate.
  for (size_t i : bare) {
    if (!ctx.indices[i].target && !ctx.indices[i].used && chance(0.7)) {
      ctx.indices[i].bare = true;
      return term(ctx, i, 1);
    }
  }
  if (!bare.empty() && (ctx.no_compound || chance(0.65))) {
    size_t i = one_of(bare);
    ctx.indices[i].bare = true;
    return term(ctx, i, 1);
  }
  if (all.empty() || ctx.no_compound || chance(0.1)) {
    return std::to_string(pick(static_cast<int>(size)));  // a literal in range
  }
  ctx.any_compound = true;
  const size_t a = one_of(all), b = one_of(all);
  switch (pick(7)) {
    case 0: return plus_offset(term(ctx, a, 1), one_of(std::vector<int64_t>{-2, -1, 1, 2}));
    case 1: return plus_offset(term(ctx, a, 2) + " + " + term(ctx, b, 1), -1);  // 2*i + k - 1
    case 2: return term(ctx, a, 1) + " + " + term(ctx, b, 1);
    case 3: return std::to_string(pick(static_cast<int>(size) + 1)) + " - " + term(ctx, a, 1);
    case 4: {
      const GenTensor* c = int_const();
      if (c) return term(ctx, a, 1) + (chance(0.5) ? " + " : " - ") + c->name;
      return plus_offset(term(ctx, a, 1), 1);
    }
    case 5: return term(ctx, a, 2);
    default: return plus_offset(term(ctx, a, 1) + " + " + term(ctx, b, 1), -1 - pick(2));
  }
}

std::string ProgramGenerator::reference(StatementCtx& ctx, const GenTensor& t, bool shifted_self) {
  if (t.rank() == 0) return t.name;
  std::string out = t.name + "[";
  // In the row block, a row tensor is read in the statement's own row.
  const bool in_row = ctx.row_mode && t.row && !shifted_self && ctx.target->rank() > 0 &&
                      t.dims[0] == ctx.target->dims[0];
  for (int d = 0; d < t.rank(); ++d) {
    if (d == 0 && in_row) {
      ctx.indices[0].bare = true;
      out += term(ctx, 0, 1);
      continue;
    }
    out += (d ? ", " : "") + subscript(ctx, t.dims[static_cast<size_t>(d)], shifted_self ? d : -1);
  }
  return out + "]";
}

std::vector<const GenTensor*> ProgramGenerator::readable(const StatementCtx& ctx, bool want_float, bool exact_only) const {
  std::vector<const GenTensor*> out;
  for (const GenTensor& t : tensors_) {
    if (t.is_float() != want_float) continue;
    if (t.role == Role::kConst && ir::is_integer_type(t.dtype)) continue;  // used in subscripts
    if (t.role == Role::kTensor && !t.written && &t != ctx.target) continue;
    if (t.pipe && !t.pipe_open) continue;
    if (ctx.row_mode && &t == ctx.target && t.row) continue;  // would need a snapshot
    if (t.unread()) continue;
    if (exact_only && t.is_float() && t.role != Role::kInput && t.role != Role::kConst && !t.narrow_exact) continue;
    out.push_back(&t);
  }
  return out;
}

}  // namespace kiln::e2e
