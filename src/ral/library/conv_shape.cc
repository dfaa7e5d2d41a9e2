#include "ral/library/conv_shape.h"

#include <algorithm>
#include <string>

#include "kiln/ir/conv_windows.h"

namespace kiln::ral::library {

namespace {

std::string dims_text(const int64_t* d, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

ConvShape::Columns ConvShape::columns_at(int64_t offset, int64_t count) const {
  const int64_t first = offset >= 0 ? 0 : std::min(count, (-offset + sw - 1) / sw);
  const int64_t end = w - offset <= 0 ? first : std::clamp((w - offset + sw - 1) / sw, first, count);
  return {offset, first, end};
}

Result<ConvShape> conv_shape(const int64_t* x, const int64_t* w, const int64_t* b, const int64_t* y, int64_t sh,
                             int64_t sw, int64_t pt, int64_t pl, int64_t pb, int64_t pr, int64_t dh, int64_t dw,
                             int64_t groups, int64_t relu, double clip_max, const int64_t* z, WeightLayout layout) {
  const bool last = layout == WeightLayout::kOutputLast, blocks = layout == WeightLayout::kOutputBlocks;
  // The output channels: w's first or last dimension; in blocks, b's (w's first is the blocks).
  const int64_t wo = blocks ? b[0] : last ? w[3] : w[0], wc = last ? w[0] : w[1];
  const int64_t wkh = last ? w[1] : w[2], wkw = blocks ? w[3] / kOutputBlock : last ? w[2] : w[3];
  ConvShape s{x[0], x[1], x[2], x[3], wo, wkh, wkw, y[2], y[3], sh, sw, pt, pl, dh, dw, groups, relu != 0, clip_max,
              layout};
  auto fail = [&](const std::string& why) {
    return invalid_argument_error("conv2d: x " + dims_text(x, 4) + ", w " + dims_text(w, 4) + ", b " + dims_text(b, 1) +
                                  (z ? ", z " + dims_text(z, 4) : std::string()) + ", y " + dims_text(y, 4) + ": " + why);
  };
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || groups < 1 || pt < 0 || pl < 0 || pb < 0 || pr < 0) {
    return fail("strides, dilations and groups must be at least 1 and pads at least 0");
  }
  if (blocks && (w[0] != (s.o + kOutputBlock - 1) / kOutputBlock || w[3] % kOutputBlock)) {
    return fail("with transpose_w=16, w is [ceil(O / 16), C / groups, KH, 16 KW] for b's O output channels");
  }
  const std::string per_group = last ? "first" : "second";
  if (s.c % groups || s.o % groups || wc != s.c / groups) {
    return fail("with groups=" + std::to_string(groups) + ", x's channels and the output channels split into "
                "the groups and w's " + per_group + " dimension is x's channels per group");
  }
  if (b[0] != s.o || y[0] != s.n || y[1] != s.o) {
    return fail("b must be [O] and y [N, O, OH, OW] (w is " + std::string(last ? "[..., O]" : blocks ? "in blocks of 16 output channels" : "[O, ...]") + ")");
  }
  if (ir::conv_windows(s.h, pt, pb, s.kh, sh, dh) != s.oh || ir::conv_windows(s.w, pl, pr, s.kw, sw, dw) != s.ow) {
    return fail("y's last two dimensions must be the windows' count (x's extent with the pads, less the dilated "
                "window, over the stride, plus 1)");
  }
  if (z && !std::equal(z, z + 4, y)) return fail("z must have y's shape");
  return s;
}

}  // namespace kiln::ral::library
