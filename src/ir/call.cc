#include "kiln/ir/call.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

#include "kiln/ir/conv_windows.h"
#include "kiln/ir/gemm_groups.h"
#include "kiln/ir/sizes.h"

namespace kiln::ir {

namespace {

using Rule = CallAttribute::Rule;

// "f32[4, 3]"; a dimension that is a size shows as "?" (the checks do not know the sizes' names).
std::string shape_string(const TensorNode& n) {
  std::string s = std::string(dtype_name(n.dtype)) + "[";
  for (size_t d = 0; d < n.dims.size(); ++d) s += (d ? ", " : "") + size_expr_text(n.dimension(d), {});
  return s + "]";
}

// Checks of one built-in's tensors, reporting through `error(loc, message)`.
class BuiltinChecker {
 public:
  BuiltinChecker(const Call& call, const std::vector<TensorNode>& nodes, std::vector<Diagnostic>* out)
      : call_(call), nodes_(nodes), out_(out) {}

  void run() {
    const std::string& f = call_.function;
    if (f == "gemm") gemm();
    else if (f == "conv2d" || f == "conv2d_blocked") conv2d(f == "conv2d_blocked");
    else if (f == "qgemm") qgemm();
    else if (f == "sort" || f == "argsort") sort(f == "argsort");
    else if (f == "topk") topk();
    else if (f == "random_uniform" || f == "random_normal") random();
    else if (f == "allreduce" || f == "broadcast") same_everywhere();
    else if (f == "allgather" || f == "reduce_scatter") stacked(f == "allgather");
    else if (f == "rank" || f == "world_size") scalar_i32();
  }

 private:
  const TensorNode& arg(int i) const { return nodes_[static_cast<size_t>(call_.args[static_cast<size_t>(i)].node)]; }
  SourceLoc arg_loc(int i) const { return call_.args[static_cast<size_t>(i)].loc; }
  int tensor_count() const {
    return static_cast<int>(std::count_if(call_.args.begin(), call_.args.end(), [](const CallArg& a) { return a.node >= 0; }));
  }
  const TensorNode& out(int i) const { return nodes_[static_cast<size_t>(call_.outputs[static_cast<size_t>(i)])]; }
  SourceLoc out_loc(int i) const {
    return static_cast<size_t>(i) < call_.output_locs.size() ? call_.output_locs[static_cast<size_t>(i)] : call_.loc;
  }
  void error(SourceLoc loc, std::string message) {
    out_->push_back(Diagnostic{loc, call_.function + ": " + std::move(message)});
  }
  bool rank_between(const TensorNode& n, SourceLoc loc, size_t lo, size_t hi) {
    if (n.dims.size() >= lo && n.dims.size() <= hi) return true;
    error(loc, "'" + n.name + "' has rank " + std::to_string(n.dims.size()) + "; " + call_.function +
                   " takes tensors of rank " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)));
    return false;
  }
  bool type_in(const TensorNode& n, SourceLoc loc, std::initializer_list<DType> types) {
    if (std::find(types.begin(), types.end(), n.dtype) != types.end()) return true;
    std::string names;
    for (DType t : types) names += (names.empty() ? "" : " or ") + std::string(dtype_name(t));
    error(loc, "'" + n.name + "' is " + std::string(dtype_name(n.dtype)) + "; it must be " + names);
    return false;
  }
  void same_shape(const TensorNode& want_like, const TensorNode& n, SourceLoc loc, bool check_type) {
    if (n.dims != want_like.dims || (check_type && n.dtype != want_like.dtype)) {
      error(loc, "'" + n.name + "' is " + shape_string(n) + "; it must be " +
                     (check_type ? shape_string(want_like) : "of shape " + shape_string(want_like).substr(3)) +
                     " like '" + want_like.name + "'");
    }
  }

  // One block of `n`'s dimensions as a matrix side: "8", or "(32·4·4)" for several.
  static std::string block_text(const TensorNode& n, int from, int count) {
    std::string s;
    for (int d = from; d < from + count; ++d) {
      const SizeExpr e = n.dimension(static_cast<size_t>(d));
      s += (d > from ? "·" : "") + (e.is_constant() ? std::to_string(e.offset) : size_expr_text(e, {}));
    }
    return count > 1 ? "(" + s + ")" : s;
  }
  static bool same_block(const TensorNode& x, int x_from, const TensorNode& y, int y_from, int count) {
    for (int d = 0; d < count; ++d) {
      if (x.dimension(static_cast<size_t>(x_from + d)) != y.dimension(static_cast<size_t>(y_from + d))) return false;
    }
    return true;
  }

  void gemm() {
    const TensorNode &a = arg(0), &b = arg(1), &c = out(0);
    // Every operand is checked, so that each wrong one is reported.
    const bool ranks = rank_between(a, arg_loc(0), 2, kGemmMaxRank);
    const bool b_rank = rank_between(b, arg_loc(1), 2, kGemmMaxRank);
    const bool c_rank = rank_between(c, out_loc(0), 2, kGemmMaxRank);
    // f32 and f64 products keep one type; bf16 and f16 operands give f32 or their own type, i8
    // operands i32 (language version 3).
    const bool type = a.dtype == DType::kF32 || a.dtype == DType::kF64 || is_narrow_float(a.dtype) || a.dtype == DType::kI8;
    if (!type) {
      error(arg_loc(0), "'" + a.name + "' is " + std::string(dtype_name(a.dtype)) +
                            "; gemm takes f32, f64, bf16, f16 or i8 operands (a product of other types is written as a "
                            "sum, or cast to one of these)");
    }
    if (!(ranks && b_rank && c_rank && type)) return;
    if (b.dtype != a.dtype) return error(arg_loc(1), "'" + b.name + "' is " + std::string(dtype_name(b.dtype)) + " and '" + a.name + "' is " + std::string(dtype_name(a.dtype)) + "; gemm's operands have one element type");
    const bool c_type = c.dtype == a.dtype ? a.dtype != DType::kI8 : (is_narrow_float(a.dtype) && c.dtype == DType::kF32) || (a.dtype == DType::kI8 && c.dtype == DType::kI32);
    if (!c_type) {
      const std::string want = a.dtype == DType::kI8 ? "i32" : is_narrow_float(a.dtype) ? "f32 or " + std::string(dtype_name(a.dtype)) : std::string(dtype_name(a.dtype));
      return error(out_loc(0), "'" + c.name + "' is " + std::string(dtype_name(c.dtype)) + "; a product of " + std::string(dtype_name(a.dtype)) + " operands gives " + want);
    }
    const bool ta = call_attribute(call_, "transpose_a") != 0, tb = call_attribute(call_, "transpose_b") != 0;
    const int64_t batch = static_cast<int64_t>(call_attribute(call_, "batch"));
    const std::optional<GemmGroups> g = gemm_groups(static_cast<int64_t>(a.dims.size()), static_cast<int64_t>(b.dims.size()),
                                                    static_cast<int64_t>(c.dims.size()), batch);
    if (!g) {
      return error(call_.function_loc.line > 0 ? call_.function_loc : call_.loc,
                   "'" + a.name + "' (rank " + std::to_string(a.dims.size()) + "), '" + b.name + "' (rank " +
                       std::to_string(b.dims.size()) + ") and '" + c.name + "' (rank " + std::to_string(c.dims.size()) +
                       ") make no product with batch=" + std::to_string(batch) +
                       ": their ranks are batch + rows + depth, batch + depth + cols and batch + rows + cols, with at "
                       "least one dimension in each of rows, depth and cols");
    }
    for (const auto& [n, loc] : {std::pair{&a, arg_loc(0)}, std::pair{&b, arg_loc(1)}}) {
      if (!same_block(*n, 0, c, 0, g->batch)) {
        return error(loc, "'" + n->name + "' is " + shape_string(*n) + "; its first " + std::to_string(g->batch) +
                              " dimension(s), the batch, must be those of '" + c.name + "' " + shape_string(c));
      }
    }
    const auto [a_rows, a_depth, b_depth, b_cols] = g->starts(ta, tb);
    const std::string m = block_text(a, a_rows, g->rows), k = block_text(a, a_depth, g->depth);
    const std::string k2 = block_text(b, b_depth, g->depth), n = block_text(b, b_cols, g->cols);
    if (!same_block(a, a_depth, b, b_depth, g->depth)) {
      return error(arg_loc(1), "inner dimensions differ: op('" + a.name + "') is " + m + "x" + k + ", op('" + b.name +
                                   "') is " + k2 + "x" + n);
    }
    if (!same_block(a, a_rows, c, g->batch, g->rows) || !same_block(b, b_cols, c, g->batch + g->rows, g->cols)) {
      error(out_loc(0), "'" + c.name + "' is " + shape_string(c) + "; the product is " + m + "x" + n +
                            (g->batch ? ", batched over " + block_text(c, 0, g->batch) : ""));
    }
  }

  // conv2d(x, w, b [, z]) -> y over NCHW tensors of one float type: x [N, C, H, W], w [O,
  // C/groups, KH, KW] (with transpose_w=1 [C/groups, KH, KW, O]; with transpose_w=16 [ceil(O/16),
  // C/groups, KH, 16·KW]), b [O], y [N, O, OH, OW] with OH = (H + pad_top + pad_bottom -
  // dilation_h·(KH - 1) - 1) / stride_h + 1 (and the same across), z (a residual) of y's shape.
  // Dimensions that are sizes are checked when the call runs. conv2d_blocked (data_blocks): x
  // [N, ceil(C/16), H, W, 16] or [N, C, H, W], y and z [N, ceil(O/16), OH, OW, 16], w in blocks as
  // with transpose_w=16, C = w's second dimension · groups.
  void conv2d(bool data_blocks = false) {
    const TensorNode &x = arg(0), &w = arg(1), &b = arg(2), &y = out(0);
    const size_t data_rank = data_blocks ? 5 : 4;
    const bool x_blocks = data_blocks && x.dims.size() != 4;  // else NCHW
    if (tensor_count() == 4) {  // z, checked first: its shape is y's, whatever the other errors
      const size_t reported = out_->size();
      same_shape(y, arg(3), arg_loc(3), true);
      if (out_->size() != reported) return;
    }
    bool ok = rank_between(x, arg_loc(0), 4, data_rank) & rank_between(w, arg_loc(1), 4, 4) &
              rank_between(b, arg_loc(2), 1, 1) & rank_between(y, out_loc(0), data_rank, data_rank);
    ok = type_in(x, arg_loc(0), {DType::kF32, DType::kF64}) & ok;
    if (!ok) return;
    for (const auto& [n, loc] : {std::pair{&w, arg_loc(1)}, std::pair{&b, arg_loc(2)}, std::pair{&y, out_loc(0)}}) {
      if (n->dtype != x.dtype) {
        return error(loc, "'" + n->name + "' is " + std::string(dtype_name(n->dtype)) + " and '" + x.name + "' is " +
                              std::string(dtype_name(x.dtype)) + "; " + call_.function + "'s tensors have one element type");
      }
    }
    for (const char* name : {"stride_h", "stride_w", "dilation_h", "dilation_w", "groups"}) {
      if (call_attribute(call_, name) < 1) return error(call_.loc, std::string(name) + " must be at least 1");
    }
    const double layout = data_blocks ? 16 : call_attribute(call_, "transpose_w");
    if (layout != 0 && layout != 1 && layout != 16) {
      return error(call_.loc, "transpose_w is 0 (w [O, C/groups, KH, KW]), 1 ([C/groups, KH, KW, O]) or 16 "
                              "([ceil(O/16), C/groups, KH, 16·KW]), not " + std::to_string(static_cast<int64_t>(layout)));
    }
    const auto groups = static_cast<int64_t>(call_attribute(call_, "groups"));
    auto known = [](const TensorNode& n, size_t d) -> std::optional<int64_t> {
      const SizeExpr e = n.dimension(d);
      return e.is_constant() ? std::optional<int64_t>(e.offset) : std::nullopt;
    };
    // w's dimensions: output channels, input channels per group, window rows, window columns. In
    // blocks of 16 output channels (transpose_w=16), b's dimension is the output channels and w's
    // first the blocks.
    const bool transposed = layout == 1, blocked = layout == 16;
    const size_t w_out = transposed ? 3 : 0, w_in = transposed ? 0 : 1, w_window = transposed ? 1 : 2;
    const TensorNode& outs_of = blocked ? b : w;
    const size_t outs_at = blocked ? 0 : w_out;
    const std::optional<int64_t> outs = known(outs_of, outs_at), per_group = known(w, w_in);
    std::optional<int64_t> channels = known(x, 1);
    if (x_blocks) {  // x's blocks follow from w's channels
      channels = per_group ? std::optional<int64_t>(*per_group * groups) : std::nullopt;
      const std::optional<int64_t> blocks = known(x, 1), lanes = known(x, 4);
      if ((channels && blocks && *blocks != (*channels + 15) / 16) || (lanes && *lanes != 16)) {
        return error(arg_loc(0), "'" + x.name + "' is " + shape_string(x) + "; it must hold " +
                                     (channels ? std::to_string(*channels) : std::string("C")) +
                                     " channels (the second dimension of '" + w.name + "' times groups) in blocks of 16, [N, " +
                                     (channels ? std::to_string((*channels + 15) / 16) : std::string("ceil(C/16)")) + ", H, W, 16]");
      }
    }
    if (channels && *channels % groups) {
      return error(arg_loc(0), "'" + x.name + "' is " + shape_string(x) + "; its " + std::to_string(*channels) +
                                   " channels do not split into groups=" + std::to_string(groups));
    }
    if (channels && per_group && *channels != *per_group * groups) {
      return error(arg_loc(1), "'" + w.name + "' is " + shape_string(w) + "; its " +
                                   (transposed ? "first dimension (transpose_w=1)" : "second dimension") + " must be " +
                                   std::to_string(*channels / groups) + ", the channels of '" + x.name + "' per group");
    }
    if (outs && *outs % groups) {
      return error(blocked ? arg_loc(2) : arg_loc(1),
                   "'" + outs_of.name + "' is " + shape_string(outs_of) + "; its " + std::to_string(*outs) +
                       " output channels do not split into groups=" + std::to_string(groups));
    }
    if (blocked) {
      const std::optional<int64_t> blocks = known(w, 0), columns = known(w, 3);
      if ((outs && blocks && *blocks != (*outs + 15) / 16) || (columns && *columns % 16)) {
        return error(arg_loc(1), "'" + w.name + "' is " + shape_string(w) + "; " +
                                     (data_blocks ? "conv2d_blocked's w" : "with transpose_w=16 it") + " holds blocks of " +
                                     "16 output channels, [ceil(O/16), C/groups, KH, 16·KW] for the O = " +
                                     block_text(b, 0, 1) + " output channels of '" + b.name + "'");
      }
    } else if (b.dimension(0) != w.dimension(w_out)) {
      return error(arg_loc(2), "'" + b.name + "' is " + shape_string(b) + "; it must hold a bias per output channel, " +
                                   block_text(w, static_cast<int>(w_out), 1) + " like the " +
                                   (transposed ? "last dimension of '" + w.name + "' (transpose_w=1)"
                                               : "first dimension of '" + w.name + "'"));
    }
    std::string want = block_text(x, 0, 1) + ", " + block_text(outs_of, static_cast<int>(outs_at), 1);
    bool fits = y.dimension(0) == x.dimension(0) && (data_blocks || y.dimension(1) == outs_of.dimension(outs_at));
    if (data_blocks) {  // y's second dimension: blocks of the output channels
      const std::optional<int64_t> blocks = known(y, 1);
      want = block_text(x, 0, 1) + ", " + (outs ? std::to_string((*outs + 15) / 16) : std::string("?"));
      fits = fits && (!outs || !blocks || *blocks == (*outs + 15) / 16);
    }
    static constexpr const char* kAcross[2][4] = {{"stride_h", "pad_top", "pad_bottom", "dilation_h"},
                                                  {"stride_w", "pad_left", "pad_right", "dilation_w"}};
    for (size_t d = 0; d < 2; ++d) {
      std::optional<int64_t> window = known(w, w_window + d);
      if (blocked && d == 1 && window) *window /= 16;  // 16·KW columns of blocks
      const std::optional<int64_t> in = known(x, 2 + d), got = known(y, 2 + d);
      if (!in || !window) {
        want += ", ?";
        continue;
      }
      auto attribute = [&](int which) { return static_cast<int64_t>(call_attribute(call_, kAcross[d][which])); };
      const std::optional<int64_t> extent = conv_windows(*in, attribute(1), attribute(2), *window, attribute(0), attribute(3));
      if (!extent) {
        return error(arg_loc(1), "'" + w.name + "' is " + shape_string(w) + "; its window (dilated) is larger than '" +
                                     x.name + "' " + shape_string(x) + " with its padding");
      }
      want += ", " + std::to_string(*extent);
      fits = fits && (!got || *got == *extent);
    }
    if (data_blocks) {
      const std::optional<int64_t> lanes = known(y, 4);
      want += ", 16";
      fits = fits && (!lanes || *lanes == 16);
    }
    if (!fits) {
      error(out_loc(0), "'" + y.name + "' is " + shape_string(y) + "; the convolution gives " +
                            std::string(dtype_name(x.dtype)) + "[" + want + "]");
    }
  }

  // qgemm(a, b, scale_a, scale_b) -> c: i8 operands (2-D), f32 scales of op(a)'s rows and op(b)'s
  // columns, an f32 c.
  void qgemm() {
    const TensorNode &a = arg(0), &b = arg(1), &sa = arg(2), &sb = arg(3), &c = out(0);
    bool ok = rank_between(a, arg_loc(0), 2, 2) & rank_between(b, arg_loc(1), 2, 2) &
              rank_between(sa, arg_loc(2), 1, 1) & rank_between(sb, arg_loc(3), 1, 1) & rank_between(c, out_loc(0), 2, 2);
    ok = type_in(a, arg_loc(0), {DType::kI8}) & type_in(b, arg_loc(1), {DType::kI8}) & type_in(sa, arg_loc(2), {DType::kF32}) &
         type_in(sb, arg_loc(3), {DType::kF32}) & type_in(c, out_loc(0), {DType::kF32}) & ok;
    if (!ok) return;
    const bool ta = call_attribute(call_, "transpose_a") != 0, tb = call_attribute(call_, "transpose_b") != 0;
    const SizeExpr m = a.dimension(ta ? 1 : 0), k = a.dimension(ta ? 0 : 1);
    const SizeExpr kb = b.dimension(tb ? 1 : 0), n = b.dimension(tb ? 0 : 1);
    auto text = [](const SizeExpr& e) { return e.is_constant() ? std::to_string(e.offset) : size_expr_text(e, {}); };
    if (k != kb) {
      return error(arg_loc(1), "op(" + a.name + ") is " + text(m) + "×" + text(k) + " and op(" + b.name + ") " +
                                   text(kb) + "×" + text(n) + ": their inner dimensions differ");
    }
    if (c.dimension(0) != m || c.dimension(1) != n) {
      return error(out_loc(0), "'" + c.name + "' is " + shape_string(c) + "; it must be f32[" + text(m) + ", " + text(n) + "]");
    }
    if (sa.dimension(0) != m) {
      return error(arg_loc(2), "'" + sa.name + "' is " + shape_string(sa) + "; it must be f32[" + text(m) + "], a scale per row of op(" + a.name + ")");
    }
    if (sb.dimension(0) != n) {
      return error(arg_loc(3), "'" + sb.name + "' is " + shape_string(sb) + "; it must be f32[" + text(n) + "], a scale per column of op(" + b.name + ")");
    }
  }

  void sort(bool indices) {
    const TensorNode &x = arg(0), &y = out(0);
    if (!rank_between(x, arg_loc(0), 1, 4)) return;
    if (indices) {
      if (type_in(y, out_loc(0), {DType::kI32})) same_shape(x, y, out_loc(0), false);
    } else {
      same_shape(x, y, out_loc(0), true);
    }
  }

  void topk() {
    const TensorNode &x = arg(0), &values = out(0), &indices = out(1);
    if (!rank_between(x, arg_loc(0), 1, 4)) return;
    if (values.dtype != x.dtype || values.dims.size() != x.dims.size()) {
      return error(out_loc(0), "'" + values.name + "' is " + shape_string(values) + "; it must be " +
                                   std::string(dtype_name(x.dtype)) + " of rank " + std::to_string(x.dims.size()) +
                                   " like '" + x.name + "'");
    }
    for (size_t d = 0; d + 1 < x.dims.size(); ++d) {
      if (values.dims[d] != x.dims[d]) {
        return error(out_loc(0), "'" + values.name + "' is " + shape_string(values) + "; all but its last dimension must be those of '" + x.name + "' " + shape_string(x));
      }
    }
    if (values.dims.back() > x.dims.back()) {
      return error(out_loc(0), "k = " + std::to_string(values.dims.back()) + " (the last dimension of '" +
                                   values.name + "') is larger than the " + std::to_string(x.dims.back()) +
                                   " elements of each row of '" + x.name + "'");
    }
    if (type_in(indices, out_loc(1), {DType::kI32})) same_shape(values, indices, out_loc(1), false);
  }

  void random() {
    const TensorNode& r = out(0);
    if (!rank_between(r, out_loc(0), 1, 4)) return;
    type_in(r, out_loc(0), {DType::kF32, DType::kF64, DType::kF16, DType::kBF16});
    if (call_.function == "random_uniform" && call_attribute(call_, "lo") > call_attribute(call_, "hi")) {
      error(call_.loc, "lo = " + std::to_string(call_attribute(call_, "lo")) + " is above hi = " +
                           std::to_string(call_attribute(call_, "hi")));
    }
  }

  // Collectives (docs/language.md, "Collectives"): y like x, of any element type, rank 0 to 4.
  bool collective_operand(const TensorNode& x, SourceLoc loc, size_t lowest_rank) {
    return rank_between(x, loc, lowest_rank, 4);
  }
  void op_attribute() {
    const double op = call_attribute(call_, "op");
    if (op > 3) error(call_.loc, "op=" + std::to_string(static_cast<int64_t>(op)) + " is none of 0 (sum), 1 (mean), 2 (max), 3 (min)");
  }
  void same_everywhere() {
    const TensorNode &x = arg(0), &y = out(0);
    if (call_.function == "allreduce") op_attribute();
    if (collective_operand(x, arg_loc(0), 0)) same_shape(x, y, out_loc(0), true);
  }
  // allgather: y's first dimension is R × x's (a scalar x gives y of [R]); reduce_scatter: x's is
  // R × y's. R is known when the job runs; here, the other dimensions and a divisible first one.
  void stacked(bool gather) {
    if (!gather) op_attribute();
    const TensorNode &x = arg(0), &y = out(0);
    const TensorNode& whole = gather ? y : x;
    const TensorNode& part = gather ? x : y;
    const SourceLoc whole_loc = gather ? out_loc(0) : arg_loc(0), part_loc = gather ? arg_loc(0) : out_loc(0);
    if (!collective_operand(part, part_loc, gather ? 0 : 1) || !collective_operand(whole, whole_loc, 1)) return;
    if (whole.dtype != part.dtype) {
      return error(out_loc(0), "'" + y.name + "' is " + std::string(dtype_name(y.dtype)) + " and '" + x.name + "' is " +
                                   std::string(dtype_name(x.dtype)) + "; a collective keeps the element type");
    }
    const size_t part_rank = std::max<size_t>(part.dims.size(), 1);
    bool fits = whole.dims.size() == part_rank;
    for (size_t d = 1; fits && d < part.dims.size(); ++d) fits = whole.dims[d] == part.dims[d];
    const int64_t part_first = part.dims.empty() ? 1 : part.dims[0];
    if (fits && !part.is_sized() && !whole.is_sized() && part_first > 0) fits = whole.dims[0] % part_first == 0;
    if (!fits) {
      error(whole_loc, "'" + whole.name + "' is " + shape_string(whole) + " and '" + part.name + "' " + shape_string(part) +
                           "; " + (gather ? "y" : "x") + "'s first dimension must be R × " + (gather ? "x" : "y") +
                           "'s (R ranks) and its other dimensions the same");
    }
  }
  void scalar_i32() {
    const TensorNode& r = out(0);
    if (!r.dims.empty() || r.dtype != DType::kI32) {
      error(out_loc(0), "'" + r.name + "' is " + shape_string(r) + "; " + call_.function + " gives an i32 scalar");
    }
  }

  const Call& call_;
  const std::vector<TensorNode>& nodes_;
  std::vector<Diagnostic>* out_;
};

}  // namespace

const std::vector<BuiltinCall>& builtin_calls() {
  static const std::vector<BuiltinCall> calls = {
      {"gemm", 2, 1, {{"transpose_a", 0, Rule::kFlag}, {"transpose_b", 0, Rule::kFlag}, {"alpha", 1, Rule::kFinite}, {"beta", 0, Rule::kFinite}, {"batch", 0, Rule::kCount}}},
      {"conv2d", 3, 1, {{"stride_h", 1, Rule::kCount}, {"stride_w", 1, Rule::kCount}, {"pad_top", 0, Rule::kCount}, {"pad_left", 0, Rule::kCount}, {"pad_bottom", 0, Rule::kCount}, {"pad_right", 0, Rule::kCount}, {"dilation_h", 1, Rule::kCount}, {"dilation_w", 1, Rule::kCount}, {"groups", 1, Rule::kCount}, {"relu", 0, Rule::kFlag}, {"clip_max", std::numeric_limits<double>::infinity(), Rule::kFinite}, {"transpose_w", 0, Rule::kCount}}, 1},
      {"conv2d_blocked", 3, 1, {{"stride_h", 1, Rule::kCount}, {"stride_w", 1, Rule::kCount}, {"pad_top", 0, Rule::kCount}, {"pad_left", 0, Rule::kCount}, {"pad_bottom", 0, Rule::kCount}, {"pad_right", 0, Rule::kCount}, {"dilation_h", 1, Rule::kCount}, {"dilation_w", 1, Rule::kCount}, {"groups", 1, Rule::kCount}, {"relu", 0, Rule::kFlag}, {"clip_max", std::numeric_limits<double>::infinity(), Rule::kFinite}}, 1},
      {"qgemm", 4, 1, {{"transpose_a", 0, Rule::kFlag}, {"transpose_b", 0, Rule::kFlag}}},
      {"sort", 1, 1, {{"descending", 0, Rule::kFlag}}},
      {"argsort", 1, 1, {{"descending", 0, Rule::kFlag}}},
      {"topk", 1, 2, {}},
      {"random_uniform", 0, 1, {{"lo", 0, Rule::kFinite}, {"hi", 1, Rule::kFinite}}},
      {"random_normal", 0, 1, {{"mean", 0, Rule::kFinite}, {"std", 1, Rule::kNonNegative}}},
      {"allreduce", 1, 1, {{"op", 0, Rule::kCount}}},
      {"allgather", 1, 1, {}},
      {"reduce_scatter", 1, 1, {{"op", 0, Rule::kCount}}},
      {"broadcast", 1, 1, {{"root", 0, Rule::kCount}}},
      {"rank", 0, 1, {}},
      {"world_size", 0, 1, {}},
  };
  return calls;
}

const BuiltinCall* find_builtin_call(std::string_view name) {
  for (const BuiltinCall& b : builtin_calls()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

double call_attribute(const Call& call, std::string_view name) {
  for (const CallArg& a : call.args) {
    if (a.node < 0 && a.attribute == name) return a.value;
  }
  if (const BuiltinCall* b = find_builtin_call(call.function)) {
    for (const CallAttribute& a : b->attributes) {
      if (a.name == name) return a.default_value;
    }
  }
  return 0;
}

std::vector<int> call_tensors(const Call& call) {
  std::vector<int> nodes;
  for (const CallArg& a : call.args) {
    if (a.node >= 0) nodes.push_back(a.node);
  }
  nodes.insert(nodes.end(), call.outputs.begin(), call.outputs.end());
  return nodes;
}

std::vector<Diagnostic> check_call(const Call& call, const std::vector<TensorNode>& nodes) {
  std::vector<Diagnostic> out;
  auto error = [&](SourceLoc loc, std::string message) {
    out.push_back(Diagnostic{loc, call.function + ": " + std::move(message)});
  };
  auto valid_node = [&](int node) { return node >= 0 && static_cast<size_t>(node) < nodes.size(); };
  const SourceLoc name_loc = call.function_loc.line > 0 ? call.function_loc : call.loc;
  if (call.outputs.empty()) error(call.loc, "a call writes at least one output ('-> NAME')");

  int tensors = 0;
  bool seen_attribute = false;
  std::set<std::string> attributes;
  const BuiltinCall* builtin = find_builtin_call(call.function);
  for (const CallArg& a : call.args) {
    if (a.node >= 0) {
      if (!valid_node(a.node)) return {Diagnostic{a.loc, call.function + ": an argument names no tensor"}};
      if (seen_attribute) error(a.loc, "tensor '" + nodes[static_cast<size_t>(a.node)].name + "' comes after an attribute; tensors go first");
      ++tensors;
      continue;
    }
    seen_attribute = true;
    if (!attributes.insert(a.attribute).second) error(a.loc, "attribute '" + a.attribute + "' is given twice");
    if (!std::isfinite(a.value)) error(a.loc, "attribute '" + a.attribute + "' must be a finite number");
    if (!builtin) continue;
    auto it = std::find_if(builtin->attributes.begin(), builtin->attributes.end(),
                           [&](const CallAttribute& c) { return c.name == a.attribute; });
    if (it == builtin->attributes.end()) {
      std::string known;
      for (const CallAttribute& c : builtin->attributes) known += (known.empty() ? "" : ", ") + std::string(c.name);
      error(a.loc, "unknown attribute '" + a.attribute + "'" + (known.empty() ? "; it takes none" : "; it takes " + known));
    } else if (it->rule == Rule::kFlag && a.value != 0 && a.value != 1) {
      error(a.loc, "attribute '" + a.attribute + "' is 0 or 1");
    } else if (it->rule == Rule::kNonNegative && a.value < 0) {
      error(a.loc, "attribute '" + a.attribute + "' must not be negative");
    } else if (it->rule == Rule::kCount && (a.value < 0 || a.value != std::floor(a.value) || a.value > INT32_MAX)) {
      error(a.loc, "attribute '" + a.attribute + "' is a whole number from 0 to 2^31 - 1");
    }
  }
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    const SourceLoc loc = i < call.output_locs.size() ? call.output_locs[i] : call.loc;
    const int o = call.outputs[i];
    if (!valid_node(o)) return {Diagnostic{loc, call.function + ": an output names no tensor"}};
    const TensorNode& n = nodes[static_cast<size_t>(o)];
    if (n.role == Role::kInput || n.role == Role::kConst) {
      error(loc, "'" + n.name + "' is " + (n.role == Role::kInput ? "an input" : "a const") + "; a call cannot write it");
    }
    for (size_t j = 0; j < i; ++j) {
      if (call.outputs[j] == o) error(loc, "'" + n.name + "' is named twice as an output");
    }
    for (const CallArg& a : call.args) {
      if (a.node == o) error(loc, "'" + n.name + "' is both an argument and an output of the call");
    }
  }
  if (!builtin) return out;  // a host function: its signature is checked when the routine is linked
  const int most = builtin->tensor_args + builtin->optional_tensor_args;
  if (tensors < builtin->tensor_args || tensors > most || static_cast<int>(call.outputs.size()) != builtin->outputs) {
    error(name_loc, "takes " + std::to_string(builtin->tensor_args) +
                        (most > builtin->tensor_args ? " or " + std::to_string(most) : std::string()) +
                        " tensor argument(s) and " +
                        std::to_string(builtin->outputs) + " output(s), but the call has " + std::to_string(tensors) +
                        " and " + std::to_string(call.outputs.size()));
    return out;
  }
  if (!out.empty()) return out;
  BuiltinChecker(call, nodes, &out).run();
  return out;
}

std::optional<Call> complete_call(const RawCall& raw, const std::vector<TensorNode>& nodes, size_t visible_nodes,
                                  int position, std::vector<Diagnostic>* diagnostics, const NodeLookup* lookup) {
  const size_t before = diagnostics->size();
  auto resolve = [&](const std::string& name, SourceLoc loc) -> int {
    const TensorNode* node = lookup ? lookup->find(name) : nullptr;
    if (!lookup) {
      for (const TensorNode& n : nodes) {
        if (n.name == name) node = &n;
      }
    }
    if (!node) {
      diagnostics->push_back(Diagnostic{loc, "unknown tensor '" + name + "'; declare it before the statements that use it"});
      return -1;
    }
    if (static_cast<size_t>(node->id) >= visible_nodes) {
      diagnostics->push_back(Diagnostic{loc, "'" + name + "' is used before its declaration on line " +
                                                 std::to_string(node->loc.line) + "; declare it before the statements that use it"});
      return -1;
    }
    return node->id;
  };
  Call call;
  call.function = raw.function;
  call.position = position;
  call.loc = raw.loc;
  call.function_loc = raw.function_loc;
  for (const RawCallArg& a : raw.args) {
    CallArg arg;
    arg.loc = a.loc;
    if (a.attribute) {
      arg.attribute = a.name;
      arg.value = a.value;
    } else {
      arg.node = resolve(a.name, a.loc);
    }
    call.args.push_back(std::move(arg));
  }
  for (const auto& [name, loc] : raw.outputs) {
    call.outputs.push_back(resolve(name, loc));
    call.output_locs.push_back(loc);
  }
  if (diagnostics->size() != before) return std::nullopt;
  std::vector<Diagnostic> problems = check_call(call, nodes);
  if (!problems.empty()) {
    diagnostics->insert(diagnostics->end(), problems.begin(), problems.end());
    return std::nullopt;
  }
  return call;
}

std::vector<Diagnostic> check_collective_ranks(const Call& call, const std::vector<TensorNode>& nodes, int ranks) {
  const std::vector<int> tensors = call_tensors(call);  // x, then y
  if (tensors.size() != 2 || call.outputs.size() != 1) return {};
  const TensorNode& x = nodes[static_cast<size_t>(tensors[0])];
  const TensorNode& y = nodes[static_cast<size_t>(call.outputs[0])];
  const std::string R = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
  if (call.function == "broadcast") {
    const double root = call_attribute(call, "root");
    if (root < ranks) return {};
    return {Diagnostic{call.loc, "broadcast: root " + std::to_string(static_cast<int64_t>(root)) +
                                     " is not a rank of this job of " + R + " (ranks 0 to " + std::to_string(ranks - 1) + ")"}};
  }
  const bool gather = call.function == "allgather";
  if ((!gather && call.function != "reduce_scatter") || x.is_sized() || y.is_sized()) return {};
  const TensorNode& whole = gather ? y : x;
  const TensorNode& part = gather ? x : y;
  const int64_t part_first = part.dims.empty() ? 1 : part.dims[0];
  if (!whole.dims.empty() && whole.dims[0] == ranks * part_first) return {};
  return {Diagnostic{call.loc, call.function + ": '" + whole.name + "' is " + shape_string(whole) + " and '" + part.name +
                                   "' " + shape_string(part) + "; " + (gather ? "y" : "x") + "'s first dimension must be R × " +
                                   (gather ? "x" : "y") + "'s, and this job has R = " + R}};
}

}  // namespace kiln::ir
