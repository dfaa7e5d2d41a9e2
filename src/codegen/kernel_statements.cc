// Pass 2 of the kernel emitter (kernel_emitter.h), statements: the kernel's body, loops (the
// parallel one split over workgroups), local arrays on the stack or the heap, stores, comments.
#include <limits>

#include "codegen/kernel_emitter.h"

namespace kiln::codegen::internal {

namespace {

// Lane loops up to this extent get the dialect's unroll hint (a split reduction has 16 or 32
// lanes); longer ones would only grow the code.
constexpr int64_t kMaxUnrolledLaneLoop = 64;

bool references_local(const LExprRef& e, int local) {
  if (!e) return false;
  if (e->kind == LExpr::Kind::kLocalLoad && e->local == local) return true;
  if (references_local(e->offset, local)) return true;
  for (const LExprRef& arg : e->args) {
    if (references_local(arg, local)) return true;
  }
  return false;
}

// Whether statements read or write local `local` (as declared by the enclosing declaration).
bool references_local(const std::vector<LStmtRef>& body, int local) {
  for (const LStmtRef& s : body) {
    if (s->kind == LStmt::Kind::kLocalDecl && s->local == local) continue;  // another one
    if (s->kind == LStmt::Kind::kLocalStore && s->local == local) return true;
    if (references_local(s->cond, local) || references_local(s->offset, local) ||
        references_local(s->value, local) || references_local(s->body, local)) {
      return true;
    }
    for (const LExprRef& v : s->values) {
      if (references_local(v, local)) return true;
    }
  }
  return false;
}

}  // namespace

Status KernelEmitter::emit(Printer& out) {
  if (!ir::is_identifier(kernel_.name)) {
    return invalid_argument_error("kernel name '" + kernel_.name + "' is not a C identifier");
  }
  if (d_.is_reserved(kernel_.name)) {
    return invalid_argument_error("kernel name '" + kernel_.name + "' is reserved");
  }
  if (kernel_.var_count < 0 || kernel_.local_count < 0) return error("negative var or local count");
  KernelFrame frame;
  KILN_RETURN_IF_ERROR(make_frame(&frame));
  if (frame.parallel) plan_work_groups();
  frame.group_barriers = !group_locals_.empty();
  frame.fails = fails_;
  var_extent_.assign(static_cast<size_t>(kernel_.var_count), std::nullopt);
  local_in_scope_.assign(static_cast<size_t>(kernel_.local_count), std::nullopt);

  if (kernel_.size_count < 0) return error("negative size count");
  if (options_.comments) {
    std::string line = "/* kernel " + kernel_.name + ": " + std::to_string(kernel_.nodes.size()) +
                       (kernel_.nodes.size() == 1 ? " binding" : " bindings");
    if (frame.parallel) {
      KILN_ASSIGN_OR_RETURN(std::string extent, extent_text(*kernel_.body));
      line += ", parallel over " + extent + " iterations";
    } else {
      line += ", one workgroup";
    }
    out.line(line + " */");
  }
  d_.emit_kernel_begin(out, frame);
  // Each size from its two push constants: the low 32 bits, then the high ones.
  const std::string i64(tname(DType::kI64)), u64(d_.unsigned_name(DType::kI64));
  for (int size = 0; size < kernel_.size_count; ++size) {
    out.line("const " + i64 + " kiln_size" + std::to_string(size) + " = (" + i64 + ")((" + u64 + ")" +
             d_.push_constant(2 * size) + " | ((" + u64 + ")" + d_.push_constant(2 * size + 1) + " << 32));");
  }
  trace_declarations(out);
  KILN_RETURN_IF_ERROR(sized_body(out, frame.parallel));
  d_.emit_kernel_end(out, frame);
  return Status();
}

Status KernelEmitter::body(Printer& out, bool parallel) {
  return parallel ? parallel_rows(out) : statement(kernel_.body, out, /*tail=*/true);
}

Status KernelEmitter::sized_body(Printer& out, bool parallel) {
  // A size may be up to 2^40, so a product of two sizes or of a size and a loop over another
  // one may not fit int64, and is printed through the wrapping helpers, which GCC does not
  // strength-reduce (a 1024^3 product whose three dimensions are sizes took 13% longer than
  // with numbers, in the index arithmetic around its inner loop). Below a smaller bound on the sizes
  // the same arithmetic provably fits: the kernel tests its sizes against the largest bound
  // from 2^16 up that makes as much of it plain as 2^16 does, and runs a copy printed for it.
  // Shared work-group arrays are declared at the kernel's scope, once: such kernels keep one copy.
  constexpr int kLowest = 16, kHighest = 39;  // bounds 2^16 to 2^39, below kiln's limit of 2^40
  static_assert((int64_t{1} << kHighest) < ir::kMaxSizeValue);
  auto fallbacks = [&](int64_t size_hi, int* count) -> Status {
    Printer scratch;
    size_hi_ = size_hi;
    range_fallbacks_ = 0;
    KILN_RETURN_IF_ERROR(body(scratch, parallel));
    *count = range_fallbacks_;
    return Status();
  };
  int at_limit = 0, at_lowest = 0;
  if (d_.plain_sized_copy() && kernel_.size_count > 0 && group_locals_.empty()) {
    KILN_RETURN_IF_ERROR(fallbacks(ir::kMaxSizeValue, &at_limit));
    if (at_limit > 0) KILN_RETURN_IF_ERROR(fallbacks(int64_t{1} << kLowest, &at_lowest));
  }
  if (at_lowest >= at_limit) {
    size_hi_ = ir::kMaxSizeValue;
    return body(out, parallel);
  }
  // The largest exponent whose bound prints as few fallbacks as 2^16 does.
  int lo = kLowest, hi = kHighest;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    int count = 0;
    KILN_RETURN_IF_ERROR(fallbacks(int64_t{1} << mid, &count));
    if (count <= at_lowest) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int64_t bound = int64_t{1} << lo;
  std::string test;
  for (int size : printed_sizes_) {
    test += (test.empty() ? "kiln_size" : " && kiln_size") + std::to_string(size) + " <= " + std::to_string(bound);
  }
  if (options_.comments) {
    out.line("/* sizes up to " + std::to_string(bound) + ": the same statements, their index arithmetic plain */");
  }
  out.line("if (" + test + ") {");
  out.indent();
  size_hi_ = bound;
  KILN_RETURN_IF_ERROR(body(out, parallel));
  out.dedent();
  out.line("} else {");
  out.indent();
  size_hi_ = ir::kMaxSizeValue;
  KILN_RETURN_IF_ERROR(body(out, parallel));
  out.dedent();
  out.line("}");
  return Status();
}

Status KernelEmitter::statements(const std::vector<LStmtRef>& list, Printer& out, bool tail) {
  for (size_t i = 0; i < list.size(); ++i) {
    KILN_RETURN_IF_ERROR(statement(list[i], out, tail && i + 1 == list.size()));
  }
  return Status();
}

Status KernelEmitter::for_loop(const LStmt& stmt, Printer& out, bool split) {
  if (stmt.var < 0 || stmt.var >= kernel_.var_count) {
    return error("loop variable v" + std::to_string(stmt.var) + " is out of range (vars " +
                 std::to_string(kernel_.var_count) + ")");
  }
  if (var_extent_[stmt.var]) {
    return error("loop variable v" + std::to_string(stmt.var) + " is reused by a nested loop");
  }
  if (stmt.extent < 0 && !stmt.extent_expr) return error("loop over a negative extent");
  if (!split && !stmt.extent_expr) {
    KILN_ASSIGN_OR_RETURN(bool vectorized, vector_loop(stmt, out));
    if (vectorized) return Status();
  }
  const std::string v = var_name(stmt.var);
  KILN_ASSIGN_OR_RETURN(const std::string extent, extent_text(stmt));
  const std::string i64(tname(DType::kI64));
  if (split) {
    // The dispatch convention: W workgroups in x; workgroup x runs [x * C, min(E, (x + 1) * C)),
    // C = ceil(E / W).
    const std::string count = "(" + i64 + ")" + d_.workgroup_count();
    if (options_.comments) {
      out.line("/* this workgroup's chunk of the parallel loop over " + v + " in [0, " + extent +
               ") */");
    }
    out.line("const " + i64 + " chunk = (" + extent + " + " + count + " - 1) / " + count + ";");
    out.line("const " + i64 + " begin = (" + i64 + ")" + d_.workgroup_index() + " * chunk;");
    out.line("const " + i64 + " end = begin + chunk < " + extent + " ? begin + chunk : " + extent +
             ";");
  }
  if (d_.half_blocks() && !in_group_mode_) {
    KILN_ASSIGN_OR_RETURN(bool blocked, half_block_loop(stmt, split ? "begin" : "0", split ? "end" : extent, out));
    if (blocked) return Status();
  }
  if (split) {
    if (d_.work_item_index().empty() || in_group_mode_) {
      // One work item, or all of them together (each row's lanes are shared).
      out.line("for (" + i64 + " " + v + " = begin; " + v + " < end; ++" + v + ") {");
    } else {
      // A grid-stride loop: neighbouring work items take neighbouring iterations.
      out.line("for (" + i64 + " " + v + " = begin + (" + i64 + ")" + d_.work_item_index() + "; " +
               v + " < end; " + v + " += (" + i64 + ")" + d_.work_item_count() + ") {");
    }
  } else if (in_group_mode_ && lane_loops_.count(&stmt)) {
    // Work item i takes lanes i, i + n, ...
    out.line("for (" + i64 + " " + v + " = (" + i64 + ")" + d_.work_item_index() + "; " + v +
             " < " + extent + "; " + v + " += (" + i64 + ")" + d_.work_item_count() + ") {");
  } else {
    if (!stmt.extent_expr && stmt.extent <= kMaxUnrolledLaneLoop && !d_.unroll_hint().empty() &&
        lane_loop_target(stmt) >= 0) {
      out.line(d_.unroll_hint());
    }
    out.line("for (" + i64 + " " + v + " = 0; " + v + " < " + extent + "; ++" + v + ") {");
  }
  out.indent();
  KILN_ASSIGN_OR_RETURN(var_extent_[stmt.var], loop_extent_bound(stmt));
  const bool lanes = in_group_mode_ && lane_loops_.count(&stmt);
  if (lanes) in_lane_loop_ = true;
  Status status = statements(stmt.body, out, /*tail=*/true);
  if (lanes) in_lane_loop_ = false;
  var_extent_[stmt.var] = std::nullopt;
  KILN_RETURN_IF_ERROR(status);
  out.dedent();
  out.line("}");
  return Status();
}

Result<int64_t> KernelEmitter::loop_extent_bound(const LStmt& loop) {
  if (!loop.extent_expr) return loop.extent;
  // A loop over a size runs as far as its extent's value range allows.
  KILN_ASSIGN_OR_RETURN(Code extent, expr(loop.extent_expr));
  return std::max<int64_t>(1, extent.range.hi);
}

Result<std::string> KernelEmitter::extent_text(const LStmt& loop) {
  if (!loop.extent_expr) return std::to_string(loop.extent);
  KILN_ASSIGN_OR_RETURN(Code extent, expr(loop.extent_expr));
  return "(" + extent.text + ")";
}

Status KernelEmitter::local_decl(const LStmt& stmt, Printer& out, bool tail) {
  const int local = stmt.local;
  if (local_in_scope_[local]) {
    return error("local l" + std::to_string(local) + " is declared again inside its own scope");
  }
  if (stmt.local_size <= 0) return error("local l" + std::to_string(local) + " has no elements");
  const int64_t elem = type_size(stmt.type);
  if (stmt.local_size > std::numeric_limits<int64_t>::max() / elem) {
    return error("local l" + std::to_string(local) + " is too large");
  }
  const int64_t bytes = stmt.local_size * elem;
  const std::string name = local_name(local);
  const std::string type(tname(stmt.type));
  const std::string size = std::to_string(stmt.local_size);
  const bool group = in_group_mode_ && group_locals_.count(local);
  const bool heap = !group && d_.heap_locals() && stack_bytes_ + bytes > kMaxStackLocalBytes;

  // The local's scope is its body: a block of its own unless the enclosing one ends with it.
  const bool braces = !tail;
  if (braces) {
    out.line("{");
    out.indent();
  }
  if (heap) {
    uses_heap_ = true;
    if (options_.comments) {
      out.line("/* " + std::to_string(bytes) + " bytes: on the heap rather than the stack */");
    }
    out.line(type + "* " + name + " = (" + type + "*)calloc(" + size + ", sizeof(" + type + "));");
    std::string frees;
    for (const std::string& outer : heap_locals_) frees += "free(" + outer + "); ";
    if (frees.empty()) {
      out.line("if (!" + name + ") " + d_.return_error(internal::kReturnOutOfMemory));
    } else {
      out.line("if (!" + name + ") { " + frees + d_.return_error(internal::kReturnOutOfMemory) +
               " }");
    }
    heap_locals_.push_back(name);
  } else if (group) {
    // Declared at kernel scope (parallel_rows); each work item zeroes its own lanes.
    const std::string i64(tname(DType::kI64));
    out.line("for (" + i64 + " kiln_z = (" + i64 + ")" + d_.work_item_index() + "; kiln_z < " +
             size + "; kiln_z += (" + i64 + ")" + d_.work_item_count() + ") " + name +
             "[kiln_z] = 0;");
  } else {
    out.line(type + " " + name + "[" + size + "] = {0};");
    stack_bytes_ += bytes;
  }
  if (!references_local(stmt.body, local)) out.line("(void)" + name + ";");
  local_in_scope_[local] = stmt.type;
  Status status = statements(stmt.body, out, /*tail=*/true);
  local_in_scope_[local] = std::nullopt;
  KILN_RETURN_IF_ERROR(status);
  if (heap) {
    heap_locals_.pop_back();
    out.line("free(" + name + ");");
  } else if (!group) {
    stack_bytes_ -= bytes;
  }
  if (braces) {
    out.dedent();
    out.line("}");
  }
  return Status();
}

Status KernelEmitter::statement(const LStmtRef& ref, Printer& out, bool tail) {
  const LStmt& stmt = *ref;
  if (reads_group_lanes(stmt)) {
    // Every work item reads lanes of the others: after they are written, and before they are
    // written again.
    out.line(d_.group_barrier());
    KILN_RETURN_IF_ERROR(statement_body(stmt, out, tail));
    out.line(d_.group_barrier());
    return Status();
  }
  return statement_body(stmt, out, tail);
}

Status KernelEmitter::statement_body(const LStmt& stmt, Printer& out, bool tail) {
  switch (stmt.kind) {
    case LStmt::Kind::kBlock:
      return statements(stmt.body, out, tail);
    case LStmt::Kind::kFor:
      return for_loop(stmt, out, /*split=*/false);
    case LStmt::Kind::kIf: {
      KILN_ASSIGN_OR_RETURN(Code c, condition(stmt.cond));
      out.line("if (" + c.text + ") {");
      out.indent();
      KILN_RETURN_IF_ERROR(statements(stmt.body, out, /*tail=*/true));
      out.dedent();
      out.line("}");
      return Status();
    }
    case LStmt::Kind::kStore: {
      // make_frame() checked that the value has the node's type.
      const BindingInfo& b = bindings_[binding_of_node_.at(stmt.node)];
      KILN_ASSIGN_OR_RETURN(Code at, offset(stmt.offset));
      KILN_ASSIGN_OR_RETURN(Code value, narrow_float_stored(stmt.value));
      // With shared rows, work item 0 stores for the workgroup (kernel_work_groups.cc).
      const std::string guard =
          in_group_mode_ ? "if (" + d_.work_item_index() + " == 0) " : std::string();
      out.line(guard + store_element(b, stmt.value->type, at, value));
      return Status();
    }
    case LStmt::Kind::kLocalDecl:
      return local_decl(stmt, out, tail);
    case LStmt::Kind::kLocalStore: {
      const std::optional<DType>& type = local_in_scope_[stmt.local];
      if (!type) return error("stores to local l" + std::to_string(stmt.local) + " outside its scope");
      if (stmt.value->type != *type) {
        return error("stores " + std::string(ir::dtype_name(stmt.value->type)) + " to local l" +
                     std::to_string(stmt.local) + " (" + std::string(ir::dtype_name(*type)) + ")");
      }
      KILN_ASSIGN_OR_RETURN(Code at, offset(stmt.offset));
      KILN_ASSIGN_OR_RETURN(Code value, narrow_float_stored(stmt.value));
      // A local of f16 / bf16 keeps floats rounded to the type, as a store to memory would.
      if (ir::is_narrow_float(*type)) value = round_narrow_float(value, *type);
      out.line(local_name(stmt.local) + "[" + at.text + "] = " + value.text + ";");
      return Status();
    }
    case LStmt::Kind::kTrace:
      return trace(stmt, out);
    case LStmt::Kind::kFail: {
      KILN_ASSIGN_OR_RETURN(Code value, expr(stmt.value));
      out.line(d_.fail(ir::kFirstFailureCode + stmt.site, value.text));
      return Status();
    }
    case LStmt::Kind::kComment: {
      if (!options_.comments) return Status();
      std::string_view text = stmt.text;
      // One comment line per line of text.
      while (true) {
        size_t nl = text.find('\n');
        out.line("/* " + comment_safe(text.substr(0, nl)) + " */");
        if (nl == std::string_view::npos) break;
        text = text.substr(nl + 1);
      }
      return Status();
    }
  }
  return error("unknown statement kind");
}

// Value tracing (kiln/loop/loop.h): a line counter per kTrace statement, and whether this
// workgroup (and work-item) is the one that prints.
void KernelEmitter::trace_declarations(Printer& out) {
  if (trace_counters_.empty()) return;
  const std::string i64(tname(DType::kI64));
  for (size_t i = 0; i < trace_counters_.size(); ++i) {
    out.line(i64 + " kiln_trace_lines" + std::to_string(i) + " = 0;");
  }
  std::string here = d_.workgroup_index() + " == 0";
  if (!d_.work_item_index().empty()) here += " && " + d_.work_item_index() + " == 0";
  out.line("const int kiln_tracing = " + here + ";");
}

Status KernelEmitter::trace(const LStmt& stmt, Printer& out) {
  if (!stmt.value || stmt.value->type != DType::kI32) return error("a trace without an i32 run id");
  KILN_ASSIGN_OR_RETURN(Code run, expr(stmt.value));
  std::string format = "\\036kiln-trace %d " + std::to_string(stmt.site);
  std::string args = ", " + d_.print_argument(DType::kI32, run.text, nullptr);
  const std::string more = "printf(\"" + format + " more\\n\"" + args + ");";
  for (const LExprRef& v : stmt.values) {
    KILN_ASSIGN_OR_RETURN(Code value, expr(v));
    // f16 / bf16 values as the type holds them (the interpreter prints them so).
    if (ir::is_narrow_float(v->type)) value = round_narrow_float(value, v->type);
    std::string conversion;
    args += ", " + d_.print_argument(v->type, value.text, &conversion);
    format += " " + conversion;
  }
  const std::string print = "printf(\"" + format + "\\n\"" + args + ");";
  uses_print_ = true;
  const std::string counter = "kiln_trace_lines" + std::to_string(trace_counters_.at(&stmt));
  if (stmt.extent <= 0) {
    out.line("if (kiln_tracing) " + print);
    return Status();
  }
  const std::string limit = std::to_string(stmt.extent);
  out.line("if (kiln_tracing && " + counter + " <= " + limit + ") {");
  out.indent();
  out.line("if (" + counter + " < " + limit + ") " + print);
  out.line("else " + more);
  out.line("++" + counter + ";");
  out.dedent();
  out.line("}");
  return Status();
}

}  // namespace kiln::codegen::internal
