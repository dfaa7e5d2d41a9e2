// conv2d's tensors as one convolution (docs/language.md, "Calls"): x [n, c, h, w], w [o, c /
// groups, kh, kw] (or another WeightLayout), b [o], y [n, o, oh, ow], NCHW, with the call's
// strides, pads and dilations.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kiln/base/status.h"

namespace kiln::ral::library {

// Where conv2d's w holds weight (o, c, a, e): its attribute transpose_w.
enum class WeightLayout : int64_t {
  kOutputFirst = 0,   // [O, C/groups, KH, KW]
  kOutputLast = 1,    // [C/groups, KH, KW, O]: w[c, a, e, o]
  kOutputBlocks = 16  // [ceil(O/16), C/groups, KH, 16 KW]: w[o / 16, c, a, 16 e + o % 16]
};
constexpr auto kOutputBlock = static_cast<int64_t>(WeightLayout::kOutputBlocks);  // output channels a block

struct ConvShape {
  int64_t n, c, h, w;  // x
  int64_t o, kh, kw;   // w: [o, c / groups, kh, kw] in `layout`
  int64_t oh, ow;      // y: [n, o, oh, ow]
  int64_t sh, sw, pt, pl, dh, dw, groups;
  bool relu;
  double clip_max;  // values above it become it (+inf: none)
  WeightLayout layout = WeightLayout::kOutputFirst;

  bool clips() const { return clip_max < std::numeric_limits<double>::infinity(); }
  int64_t group_channels() const { return c / groups; }
  int64_t group_outputs() const { return o / groups; }
  // One input and one output channel a group (MobileNet's depthwise convolutions).
  bool depthwise() const { return group_channels() == 1 && group_outputs() == 1; }
  int64_t depth() const { return group_channels() * kh * kw; }  // one image's group as a product: its k
  // Weight (o, k) of the product, k = (ch · kh + a) · kw + e: where it lies in w.
  int64_t weight_at(int64_t out, int64_t k) const {
    switch (layout) {
      case WeightLayout::kOutputLast: return k * o + out;
      case WeightLayout::kOutputBlocks: return (out / kOutputBlock * depth() + k) * kOutputBlock + out % kOutputBlock;
      default: return out * depth() + k;
    }
  }
  int64_t points() const { return oh * ow; }                     // and its n
  // A 1x1 window at stride 1 without padding: the input is the product's right operand as it is.
  bool reads_input_as_is() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && oh == h && ow == w;
  }

  // The input columns that tap column e reads: output column j reads input column j · sw +
  // offset, which lies inside x for j in [first, end) (first <= end <= ow).
  struct Columns {
    int64_t offset, first, end;
  };
  Columns columns_read(int64_t e) const { return columns_at(e * dw - pl, ow); }
  // Likewise for `count` columns j that read input column j · sw + offset.
  Columns columns_at(int64_t offset, int64_t count) const;

  // Row k of one image's group as a product: channel ch's window tap (a, e), k = (ch · kh + a)
  // · kw + e.
  struct Tap {
    int64_t ch, a, e;
  };
  Tap tap(int64_t k) const { return {k / (kh * kw), k / kw % kh, k % kw}; }

  // out[0, run) = the points of `x` (one image's group, [c / groups, h, w]) that output points
  // (i, j) ... (i, j + run - 1) read through row k's tap: 0 in the padding.
  template <typename T>
  void read_window_row(const T* x, int64_t k, int64_t i, int64_t j, int64_t run, T* out) const {
    const auto [ch, a, e] = tap(k);
    const int64_t ih = i * sh + a * dh - pt;
    if (ih < 0 || ih >= h) {
      std::fill(out, out + run, T(0));
      return;
    }
    const auto [offset, first, end] = columns_read(e);
    const int64_t lo = std::clamp(first - j, int64_t{0}, run), hi = std::clamp(end - j, lo, run);
    const T* in = x + (ch * h + ih) * w;
    std::fill(out, out + lo, T(0));
    if (sw == 1) {
      std::memcpy(out + lo, in + j + lo + offset, static_cast<size_t>(hi - lo) * sizeof(T));
    } else {
      for (int64_t t = lo; t < hi; ++t) out[t] = in[(j + t) * sw + offset];
    }
    std::fill(out + hi, out + run, T(0));
  }
};

// The shape of a call with these sizes and attributes (z: the residual's, when the call has one),
// or INVALID_ARGUMENT naming the shapes and what disagrees: the compiler checks what it knows,
// and this catches dimensions that were sizes.
Result<ConvShape> conv_shape(const int64_t* x, const int64_t* w, const int64_t* b, const int64_t* y, int64_t sh,
                             int64_t sw, int64_t pt, int64_t pl, int64_t pb, int64_t pr, int64_t dh, int64_t dw,
                             int64_t groups, int64_t relu, double clip_max, const int64_t* z = nullptr,
                             WeightLayout layout = WeightLayout::kOutputFirst);

}  // namespace kiln::ral::library
