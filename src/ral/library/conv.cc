// conv2d: y = clip?(relu?(conv(x, w) + b + z?)) over NCHW tensors, z an optional residual of y's
// shape, clip at clip_max (docs/language.md, "Calls"). The cpu device runs f32 through kiln's own
// product where the processor has AVX-512 (conv_avx512.h);
// otherwise, and for f64, it lowers each image and group to one gemm (oneDNN's sgemm or
// OpenBLAS): the input points every output point reads are copied into the columns of a
// [C/groups · KH · KW, OH · OW] matrix (im2col; a 1x1 window at stride 1 without padding reads the
// input as it is), y's rows start as the bias, the gemm adds the weights' product to them, and
// z and the activation are a pass over what it wrote. opencl and cuda run the same over mapped
// buffers; interp has the direct loops, the reference. conv2d_blocked is the same over data in
// blocks of 16 channels ([N, ceil(C/16), H, W, 16]): kiln's own product reads them as they are
// (conv_avx512_blocked); elsewhere they go through NCHW copies.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/ral/execution_context.h"
#include "ral/library/conv_avx512.h"
#include "ral/library/conv_shape.h"
#include "ral/library/library.h"
#include "ral/library/onednn.h"
#include "ral/library/openblas.h"
#include "ral/library/scratch.h"

namespace kiln::ral::library {

namespace {

template <typename T>
T relu_of(T v) {
  return v < 0 ? T(0) : v;  // NaN stays NaN, as PyTorch's and ONNX's Relu
}

// The call's activation: the ReLU where asked, then values above clip_max become it (NaN stays).
template <typename T>
T activated(const ConvShape& s, T v) {
  if (s.relu) v = relu_of(v);
  return v > T(s.clip_max) ? T(s.clip_max) : v;
}

// The columns of one image's group: col[k][i · ow + j] is the input point that output point
// (i, j) reads through row k's tap (ConvShape::tap), 0 in the padding.
template <typename T>
void im2col(const ConvShape& s, const T* x, T* col) {
  for (int64_t k = 0; k < s.depth(); ++k) {
    for (int64_t i = 0; i < s.oh; ++i) s.read_window_row(x, k, i, 0, s.ow, col + k * s.points() + i * s.ow);
  }
}

// c (m x n) += op(a) (m x k) @ b (k x n), row-major: a is m x k with rows lda apart, or with
// transpose_a k x m (w's output channel last, rows of O). f32 goes through oneDNN's sgemm where
// oneDNN loads: on ResNet-50's convolutions at batch 1 a run took 61 ms with it against 69 ms
// through OpenBLAS (medians of 20, alternating, 2026-11-30). f64, and f32 without oneDNN, through
// OpenBLAS.
template <typename T>
Status product(bool transpose_a, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, T* c) {
  if constexpr (std::is_same_v<T, float>) {
    Status through_onednn = onednn_sgemm(transpose_a, false, m, n, k, 1.0f, a, lda, b, n, 1.0f, c, n);
    if (through_onednn.code() != StatusCode::kUnavailable) return through_onednn;
  }
  return openblas_gemm<T>(transpose_a, false, m, n, k, T(1), a, lda, b, n, T(1), c, n);
}

// conv2d through a gemm library: per image and group, im2col and one product (`product`) into
// y's rows, which start as the bias.
template <typename T>
Status conv_products(const ConvShape& s, const T* x, const T* w, const T* b, const T* z, T* y) {
  thread_local std::vector<T> columns;  // kept between calls: a fresh one would fault its pages in each time
  const bool as_is = s.reads_input_as_is();
  if (!as_is && columns.size() < static_cast<size_t>(s.depth() * s.points())) {
    columns.resize(static_cast<size_t>(s.depth() * s.points()));
  }
  const int64_t og = s.group_outputs(), p = s.points();
  for (int64_t img = 0; img < s.n; ++img) {
    for (int64_t g = 0; g < s.groups; ++g) {
      const T* xg = x + (img * s.c + g * s.group_channels()) * s.h * s.w;
      T* yg = y + (img * s.o + g * og) * p;
      for (int64_t r = 0; r < og; ++r) std::fill(yg + r * p, yg + (r + 1) * p, b[g * og + r]);
      if (s.depth() > 0) {
        if (!as_is) im2col(s, xg, columns.data());
        const bool last = s.layout == WeightLayout::kOutputLast;  // conv_host turned blocks into rows
        KILN_RETURN_IF_ERROR(product(last, og, p, s.depth(), w + s.weight_at(g * og, 0), last ? s.o : s.depth(),
                                     as_is ? xg : columns.data(), yg));
      }
      if (z) {
        const T* zg = z + (yg - y);
        for (int64_t e = 0; e < og * p; ++e) yg[e] += zg[e];
      }
      if (s.relu || s.clips()) {
        for (int64_t e = 0; e < og * p; ++e) yg[e] = activated(s, yg[e]);
      }
    }
  }
  return Status();
}

template <typename T>
Status conv_reference(const ExecutionContext&, const ConvShape& s, const T* x, const T* w, const T* b, const T* z,
                      T* y);

// w's weights in conv2d's own layout [O, C/groups, KH, KW] (WeightLayout::kOutputFirst), in the
// calling thread's scratch: for the loops that read them so (a depthwise convolution's; the
// tiles along points and the gemm where blocks of output channels cannot be read in place).
template <typename T>
Result<const T*> weights_by_output(const ConvShape& s, const T* w) {
  const int64_t depth = s.depth();
  T* out = scratch<6, T>(static_cast<size_t>(s.o * depth));
  if (!out) return resource_exhausted_error("conv2d: no memory for " + std::to_string(s.o * depth * int64_t{sizeof(T)}) +
                                            " bytes of weights in [O, C/groups, KH, KW]");
  for (int64_t o = 0; o < s.o; ++o) {
    for (int64_t k = 0; k < depth; ++k) out[o * depth + k] = w[s.weight_at(o, k)];
  }
  return out;
}

// The cpu device's conv2d: kiln's own product where the processor has AVX-512 (conv_avx512.h),
// else conv_products; a depthwise convolution (one channel in and out per group) there by the
// direct loops, which a gemm per channel of one output row would only slow. Weights in another
// layout than the loops read are turned into [O, C/groups, KH, KW] first: a depthwise
// convolution's; blocks of output channels where kiln's own product does not run, or where a
// group's output channels do not start blocks (conv_avx512 reads blocks in place).
template <typename T>
Status conv_host(const ExecutionContext& context, const ConvShape& s, const T* x, const T* w, const T* b, const T* z,
                 T* y) {
  const bool depthwise = s.depthwise();
  bool own_product = false;
  if constexpr (std::is_same_v<T, float>) own_product = conv_avx512_supported();
  const bool reorder = s.layout != WeightLayout::kOutputFirst &&
                       (depthwise || (s.layout == WeightLayout::kOutputBlocks &&
                                      (!own_product || (s.groups > 1 && s.group_outputs() % kOutputBlock != 0))));
  if (reorder) {
    KILN_ASSIGN_OR_RETURN(const T* standard, weights_by_output(s, w));
    ConvShape by_output = s;
    by_output.layout = WeightLayout::kOutputFirst;
    return conv_host(context, by_output, x, standard, b, z, y);
  }
  if constexpr (std::is_same_v<T, float>) {
    if (own_product) return conv_avx512(context, s, x, w, b, z, y);
  }
  if (depthwise) return conv_reference(context, s, x, w, b, z, y);
  return conv_products(s, x, w, b, z, y);
}

// interp's conv2d: the definition, point by point, summing over (channel, row, column) of the
// window in that order, then the bias, then z.
template <typename T>
Status conv_reference(const ExecutionContext&, const ConvShape& s, const T* x, const T* w, const T* b, const T* z,
                      T* y) {
  const int64_t cg = s.group_channels(), og = s.group_outputs();
  for (int64_t img = 0; img < s.n; ++img) {
    for (int64_t oc = 0; oc < s.o; ++oc) {
      const int64_t first_channel = oc / og * cg;
      for (int64_t i = 0; i < s.oh; ++i) {
        for (int64_t j = 0; j < s.ow; ++j) {
          T sum = 0;
          for (int64_t ch = 0; ch < cg; ++ch) {
            for (int64_t a = 0; a < s.kh; ++a) {
              const int64_t ih = i * s.sh + a * s.dh - s.pt;
              if (ih < 0 || ih >= s.h) continue;
              for (int64_t e = 0; e < s.kw; ++e) {
                const int64_t iw = j * s.sw + e * s.dw - s.pl;
                if (iw < 0 || iw >= s.w) continue;
                sum += x[((img * s.c + first_channel + ch) * s.h + ih) * s.w + iw] *
                       w[s.weight_at(oc, (ch * s.kh + a) * s.kw + e)];
              }
            }
          }
          const int64_t at = ((img * s.o + oc) * s.oh + i) * s.ow + j;
          const T v = z ? sum + b[oc] + z[at] : sum + b[oc];
          y[at] = activated(s, v);
        }
      }
    }
  }
  return Status();
}

// conv2d_blocked's data in blocks of 16 channels, [n, ceil(c/16), points, 16], and in rows, [n,
// c, points]: `unblock` the first into the second; `block` back, the lanes past c 0.
template <typename T>
void unblock(int64_t n, int64_t c, int64_t points, const T* in, T* out) {
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const T* from = in + ((img * ((c + 15) / 16) + ch / 16) * points) * 16 + ch % 16;
      T* to = out + (img * c + ch) * points;
      for (int64_t p = 0; p < points; ++p) to[p] = from[p * 16];
    }
  }
}
template <typename T>
void block(int64_t n, int64_t c, int64_t points, const T* in, T* out) {
  const int64_t blocks = (c + 15) / 16;
  std::fill(out, out + n * blocks * points * 16, T(0));
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const T* from = in + (img * c + ch) * points;
      T* to = out + ((img * blocks + ch / 16) * points) * 16 + ch % 16;
      for (int64_t p = 0; p < points; ++p) to[p * 16] = from[p];
    }
  }
}

// conv2d_blocked through conv2d's own layout (`Run`: conv_host or conv_reference): x (where in
// blocks) and z into rows, the convolution, y back into blocks. interp's, and the cpu device's
// where its own product does not run (f64, groups, no AVX-512).
template <auto Run, typename T>
Status blocked_through_rows(const ExecutionContext& context, const ConvShape& s, const T* x, const T* w, const T* b,
                            const T* z, T* y, bool x_blocked) {
  const int64_t xs = s.n * s.c * s.h * s.w, ys = s.n * s.o * s.points();
  T* x_rows = x_blocked ? scratch<7, T>(static_cast<size_t>(xs)) : nullptr;
  T* yr = scratch<8, T>(static_cast<size_t>(ys));
  T* zr = z ? scratch<9, T>(static_cast<size_t>(ys)) : nullptr;
  if ((x_blocked && !x_rows) || !yr || (z && !zr)) {
    return resource_exhausted_error("conv2d_blocked: no memory for its tensors in rows (" +
                                    std::to_string((xs + 2 * ys) * int64_t{sizeof(T)}) + " bytes)");
  }
  const T* xr = x;
  if (x_blocked) {
    unblock(s.n, s.c, s.h * s.w, x, x_rows);
    xr = x_rows;
  }
  if (z) unblock(s.n, s.o, s.points(), z, zr);
  KILN_RETURN_IF_ERROR(Run(context, s, xr, w, b, zr, yr));
  block(s.n, s.o, s.points(), yr, y);
  return Status();
}

// The cpu device's conv2d_blocked: kiln's own product over the blocks where it runs (f32,
// AVX-512; one group, or a depthwise convolution over blocks), else through rows.
template <typename T>
Status conv_blocked_host(const ExecutionContext& context, const ConvShape& s, const T* x, const T* w, const T* b,
                         const T* z, T* y, bool x_blocked) {
  if constexpr (std::is_same_v<T, float>) {
    if (conv_avx512_supported() && (s.groups == 1 || (s.depthwise() && x_blocked))) {
      return conv_avx512_blocked(context, s, x, w, b, z, y, x_blocked);
    }
  }
  return blocked_through_rows<&conv_host<T>>(context, s, x, w, b, z, y, x_blocked);
}

// conv2d_blocked(x, w, b [, z]) -> y: x [N, ceil(C/16), H, W, 16] (XR 5) or [N, C, H, W] (XR 4), z
// and y [N, ceil(O/16), OH, OW, 16], w in blocks of 16 output channels ([ceil(O/16), C/groups, KH,
// 16·KW]), C = w's second dimension times groups, O = b's; z.data null: none.
template <auto Run, typename T, size_t XR>
Status conv2d_blocked_residual(ExecutionContext* context, MemRef<T, XR> x, MemRef<T, 4> w, MemRef<T, 1> b,
                               MemRef<T, 5> z, MemRef<T, 5> y, int64_t stride_h, int64_t stride_w, int64_t pad_top,
                               int64_t pad_left, int64_t pad_bottom, int64_t pad_right, int64_t dilation_h,
                               int64_t dilation_w, int64_t groups, int64_t relu, T clip_max) {
  const int64_t c = w.sizes[1] * std::max<int64_t>(groups, 1), o = b.sizes[0];
  auto blocks_of = [](const auto& t, int64_t channels) { return t.sizes[1] == (channels + 15) / 16 && t.sizes[4] == 16; };
  bool x_fits = true;  // NCHW: conv_shape checks its channels
  if constexpr (XR == 5) x_fits = blocks_of(x, c);
  if (!x_fits || !blocks_of(y, o) || (z.data && z.sizes != y.sizes)) {
    auto dims = [](const auto& t) {
      std::string text;
      for (int64_t d : t.sizes) text += (text.empty() ? "[" : ", ") + std::to_string(d);
      return text + "]";
    };
    return invalid_argument_error("conv2d_blocked: x " + dims(x) + ", y " + dims(y) +
                                  (z.data ? ", z " + dims(z) : std::string()) + "; with " + std::to_string(c) +
                                  " input and " + std::to_string(o) + " output channels they must be [N, " +
                                  (XR == 5 ? std::to_string((c + 15) / 16) + ", H, W, 16]" : std::to_string(c) + ", H, W]") +
                                  " and [N, " + std::to_string((o + 15) / 16) + ", OH, OW, 16]" + (z.data ? ", z as y" : ""));
  }
  const int64_t x4[4] = {x.sizes[0], c, x.sizes[2], x.sizes[3]}, y4[4] = {y.sizes[0], o, y.sizes[2], y.sizes[3]};
  KILN_ASSIGN_OR_RETURN(ConvShape s, conv_shape(XR == 5 ? x4 : x.sizes.data(), w.sizes.data(), b.sizes.data(), y4,
                                                stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h,
                                                dilation_w, groups, relu, clip_max, z.data ? y4 : nullptr,
                                                WeightLayout::kOutputBlocks));
  if (y.element_count() == 0) return Status();
  return Run(*context, s, x.data, w.data, b.data, z.data, y.data, XR == 5);
}

template <auto Run, typename T, size_t XR>
Status conv2d_blocked(ExecutionContext* context, MemRef<T, XR> x, MemRef<T, 4> w, MemRef<T, 1> b, MemRef<T, 5> y,
                      int64_t stride_h, int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t pad_bottom,
                      int64_t pad_right, int64_t dilation_h, int64_t dilation_w, int64_t groups, int64_t relu,
                      T clip_max) {
  return conv2d_blocked_residual<Run, T, XR>(context, x, w, b, MemRef<T, 5>{nullptr, y.sizes}, y, stride_h, stride_w,
                                             pad_top, pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups,
                                             relu, clip_max);
}

// conv2d_blocked's functions for a device, x in blocks and in NCHW, with and without z.
template <auto Run, typename T>
Status register_blocked(Registry& registry, std::string_view device) {
  KILN_RETURN_IF_ERROR(registry.add(make_function_for<"conv2d_blocked", &conv2d_blocked<Run, T, 5>>(device)));
  KILN_RETURN_IF_ERROR(registry.add(make_function_for<"conv2d_blocked", &conv2d_blocked_residual<Run, T, 5>>(device)));
  KILN_RETURN_IF_ERROR(registry.add(make_function_for<"conv2d_blocked", &conv2d_blocked<Run, T, 4>>(device)));
  return registry.add(make_function_for<"conv2d_blocked", &conv2d_blocked_residual<Run, T, 4>>(device));
}

// conv2d with a residual z of y's shape, added before the activation; z.data null: none.
template <auto Run, typename T>
Status conv2d_residual(ExecutionContext* context, MemRef<T, 4> x, MemRef<T, 4> w, MemRef<T, 1> b, MemRef<T, 4> z,
                       MemRef<T, 4> y, int64_t stride_h, int64_t stride_w, int64_t pad_top, int64_t pad_left,
                       int64_t pad_bottom, int64_t pad_right, int64_t dilation_h, int64_t dilation_w, int64_t groups,
                       int64_t relu, T clip_max, int64_t transpose_w) {
  if (transpose_w != 0 && transpose_w != 1 && transpose_w != kOutputBlock) {
    return invalid_argument_error("conv2d: transpose_w is " + std::to_string(transpose_w) + "; it must be 0, 1 or 16");
  }
  KILN_ASSIGN_OR_RETURN(ConvShape s, conv_shape(x.sizes.data(), w.sizes.data(), b.sizes.data(), y.sizes.data(), stride_h,
                                                stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h,
                                                dilation_w, groups, relu, clip_max, z.data ? z.sizes.data() : nullptr,
                                                static_cast<WeightLayout>(transpose_w)));
  if (y.element_count() == 0) return Status();
  return Run(*context, s, x.data, w.data, b.data, z.data, y.data);
}

template <auto Run, typename T>
Status conv2d(ExecutionContext* context, MemRef<T, 4> x, MemRef<T, 4> w, MemRef<T, 1> b, MemRef<T, 4> y, int64_t stride_h,
              int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t pad_bottom, int64_t pad_right,
              int64_t dilation_h, int64_t dilation_w, int64_t groups, int64_t relu, T clip_max, int64_t transpose_w) {
  return conv2d_residual<Run, T>(context, x, w, b, MemRef<T, 4>{nullptr, y.sizes}, y, stride_h, stride_w, pad_top,
                                 pad_left, pad_bottom, pad_right, dilation_h, dilation_w, groups, relu, clip_max,
                                 transpose_w);
}

template <typename T>
Status register_type(Registry& registry) {
  // opencl and cuda: the runtime maps the tensors for the call (Memory::kHost).
  for (std::string_view device : {"cpu", "opencl", "cuda"}) {
    KILN_RETURN_IF_ERROR(registry.add(make_function_for<"conv2d", &conv2d<&conv_host<T>, T>>(device)));
    KILN_RETURN_IF_ERROR(registry.add(make_function_for<"conv2d", &conv2d_residual<&conv_host<T>, T>>(device)));
  }
  KILN_RETURN_IF_ERROR(registry.add(make_function_for<"conv2d", &conv2d_residual<&conv_reference<T>, T>>("interp")));
  KILN_RETURN_IF_ERROR(registry.add(make_function_for<"conv2d", &conv2d<&conv_reference<T>, T>>("interp")));
  for (std::string_view device : {"cpu", "opencl", "cuda"}) {
    KILN_RETURN_IF_ERROR((register_blocked<&conv_blocked_host<T>, T>(registry, device)));
  }
  return register_blocked<&blocked_through_rows<&conv_reference<T>, T>, T>(registry, "interp");
}

}  // namespace

Status register_conv(Registry& registry) {
  KILN_RETURN_IF_ERROR(register_type<float>(registry));
  return register_type<double>(registry);
}

}  // namespace kiln::ral::library
