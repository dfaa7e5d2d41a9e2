// conv2d (ral/library/conv.cc) on cpu (kiln's AVX-512 product over phase planes where the
// processor has it, else im2col and a gemm), opencl and cuda (the same over mapped buffers; cuda
// where its driver starts) and interp (the direct loops), against the definition computed here in
// double: padding on every side, strides, dilations, groups, the ReLU, a residual z, a 1x1 window
// that reads the input as it is, f64, and a batch that is a size. Values are small
// integers times powers of two, so every product and sum is exact and results must match exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "kiln/lang/parser.h"

namespace kiln::e2e {
namespace {

struct Conv {
  int n, c, h, w, o, kh, kw;
  int sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1, groups = 1, relu = 0;
  bool residual = false;  // a fourth tensor z, added before the ReLU
  double clip_max = 0;    // written as the call's clip_max where above 0
  const char* type = "f32";
  // The call's transpose_w: wt declared [O, C/groups, KH, KW] (0), [C/groups, KH, KW, O] (1) or
  // [ceil(O/16), C/groups, KH, 16·KW] (16).
  int layout = 0;
  // conv2d_blocked: x, z and y in blocks of 16 channels, [N, ceil(C/16), H, W, 16] (the lanes past
  // C NaN here, which must not be read; y's past O must come out 0), w in blocks as with layout 16.
  bool blocked = false;
  bool x_in_rows = false;  // conv2d_blocked with x in NCHW ([N, C, H, W]), z and y in blocks
  uint32_t threads = 0;    // the device's threads where above 0 (else the machine's cores)

  int oh() const { return (h + pt + pb - dh * (kh - 1) - 1) / sh + 1; }
  int ow() const { return (w + pl + pr - dw * (kw - 1) - 1) / sw + 1; }
  std::string text(bool sized) const {
    auto dims = [&](const std::string& first, int a, int b, int d) {
      return "[" + first + ", " + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(d) + "]";
    };
    const std::string batch = sized ? "N" : std::to_string(n);
    auto data = [&](int channels, int a, int b) {  // x's, y's and z's shape
      return blocked ? "[" + batch + ", " + std::to_string((channels + 15) / 16) + ", " + std::to_string(a) + ", " +
                           std::to_string(b) + ", 16]"
                     : dims(batch, channels, a, b);
    };
    std::string s = sized ? "size N\n" : "";
    s += "input x : " + std::string(type) + (x_in_rows ? dims(batch, c, h, w) : data(c, h, w)) + "\n";
    s += "input wt : " + std::string(type) +
         (layout == 1    ? "[" + std::to_string(c / groups) + ", " + std::to_string(kh) + ", " + std::to_string(kw) +
                               ", " + std::to_string(o) + "]"
          : layout == 16 || blocked ? dims(std::to_string((o + 15) / 16), c / groups, kh, 16 * kw)
                         : dims(std::to_string(o), c / groups, kh, kw)) +
         "\n";
    s += "input b : " + std::string(type) + "[" + std::to_string(o) + "]\n";
    if (residual) s += "input z : " + std::string(type) + data(o, oh(), ow()) + "\n";
    s += "output y : " + std::string(type) + data(o, oh(), ow()) + "\n";
    s += std::string(blocked ? "call conv2d_blocked(x, wt, b" : "call conv2d(x, wt, b") + (residual ? ", z" : "") + ", stride_h=" + std::to_string(sh) + ", stride_w=" + std::to_string(sw) +
         ", pad_top=" + std::to_string(pt) + ", pad_left=" + std::to_string(pl) + ", pad_bottom=" + std::to_string(pb) +
         ", pad_right=" + std::to_string(pr) + ", dilation_h=" + std::to_string(dh) + ", dilation_w=" +
         std::to_string(dw) + ", groups=" + std::to_string(groups) + ", relu=" + std::to_string(relu) +
         (clip_max > 0 ? ", clip_max=" + std::to_string(clip_max) : std::string()) +
         (layout && !blocked ? ", transpose_w=" + std::to_string(layout) : "") + ") -> y\n";
    return s;
  }
};

double x_value(int i) { return ((i * 7) % 11 - 5) * 0.5; }
double w_value(int i) { return ((i * 5) % 9 - 4) * 0.25; }
double b_value(int i) { return (i % 3 - 1) * 0.125; }
double z_value(int i) { return ((i * 3) % 7 - 3) * 0.75; }

// y by the definition: out-of-range input points read 0.
std::vector<double> expected(const Conv& k) {
  const int cg = k.c / k.groups, og = k.o / k.groups;
  std::vector<double> y(static_cast<size_t>(k.n * k.o * k.oh() * k.ow()));
  for (int n = 0; n < k.n; ++n)
    for (int o = 0; o < k.o; ++o)
      for (int i = 0; i < k.oh(); ++i)
        for (int j = 0; j < k.ow(); ++j) {
          double sum = b_value(o);
          for (int ch = 0; ch < cg; ++ch)
            for (int a = 0; a < k.kh; ++a)
              for (int e = 0; e < k.kw; ++e) {
                const int ih = i * k.sh + a * k.dh - k.pt, iw = j * k.sw + e * k.dw - k.pl;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                sum += x_value(((n * k.c + o / og * cg + ch) * k.h + ih) * k.w + iw) *
                       w_value(((o * cg + ch) * k.kh + a) * k.kw + e);
              }
          const int at = ((n * k.o + o) * k.oh() + i) * k.ow() + j;
          if (k.residual) sum += z_value(at);
          if (k.relu && sum < 0) sum = 0;
          if (k.clip_max > 0 && sum > k.clip_max) sum = k.clip_max;
          y[static_cast<size_t>(at)] = sum;
        }
  return y;
}

class Conv2dTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "opencl" && !driver_availability("opencl").ok()) GTEST_SKIP() << "no OpenCL platform";
    if (GetParam() == "cuda") {
      if (Status cuda = driver_availability("cuda"); !cuda.ok()) GTEST_SKIP() << "no CUDA device: " << cuda;
    }
  }

  // Runs `k` and compares y with the definition, element by element.
  void check(const Conv& k, bool sized = false) {
    const std::string text = k.text(sized);
    SCOPED_TRACE(text);
    Result<ir::Program> program = lang::parse_program(text, "conv.kiln");
    ASSERT_TRUE(program.ok()) << program.status().message();
    Result<hal::DeviceRef> device = open_device(GetParam(), dir_.path(), k.threads);
    ASSERT_TRUE(device.ok()) << device.status().message();
    runtime::ProgramOptions options;
    if (sized) options.sizes = {k.n};
    Result<std::unique_ptr<runtime::ProgramInstance>> p = runtime::ProgramInstance::create(*device, *program, options);
    ASSERT_TRUE(p.ok()) << p.status().message();
    const ir::DType type = *ir::dtype_from_name(k.type);
    auto bytes_of = [&](int count, double (*f)(int)) {
      std::vector<unsigned char> out(static_cast<size_t>(count) * ir::dtype_size(type));
      for (int i = 0; i < count; ++i) ir::store_scalar(type, ir::Scalar{f(i), 0}, &out[static_cast<size_t>(i) * ir::dtype_size(type)]);
      return out;
    };
    const size_t size = ir::dtype_size(type);
    // Element (img, ch, p) of [N, C, points] where data in blocks hold it; lanes past C hold NaN.
    auto in_blocks = [&](const std::vector<unsigned char>& rows, int channels, int points) {
      const int blocks = (channels + 15) / 16;
      std::vector<unsigned char> out = bytes_of(k.n * blocks * points * 16, [](int) { return std::nan(""); });
      for (int img = 0; img < k.n; ++img)
        for (int ch = 0; ch < channels; ++ch)
          for (int p = 0; p < points; ++p)
            std::copy_n(&rows[static_cast<size_t>((img * channels + ch) * points + p) * size], size,
                        &out[static_cast<size_t>(((img * blocks + ch / 16) * points + p) * 16 + ch % 16) * size]);
      return out;
    };
    std::vector<unsigned char> x = bytes_of(k.n * k.c * k.h * k.w, x_value);
    if (k.blocked && !k.x_in_rows) x = in_blocks(x, k.c, k.h * k.w);
    std::vector<unsigned char> w = bytes_of(k.o * (k.c / k.groups) * k.kh * k.kw, w_value);
    if (k.layout || k.blocked) {  // the same weights, element (o, r) of [O, C/groups · KH · KW] moved
      const std::vector<unsigned char> by_output = w;
      const size_t outs = static_cast<size_t>(k.o), depth = w.size() / size / outs;
      // In blocks, the last block's channels past O hold NaN: conv2d must not let them into y.
      if (k.layout == 16 || k.blocked) w = bytes_of(static_cast<int>((outs + 15) / 16 * 16 * depth), [](int) { return std::nan(""); });
      for (size_t o = 0; o < outs; ++o) {
        for (size_t r = 0; r < depth; ++r) {
          const size_t at = k.layout == 1 && !k.blocked ? r * outs + o : (o / 16 * depth + r) * 16 + o % 16;
          std::copy_n(&by_output[(o * depth + r) * size], size, &w[at * size]);
        }
      }
    }
    const std::vector<unsigned char> b = bytes_of(k.o, b_value);
    ASSERT_TRUE((*p)->write("x", x.data(), x.size()).ok());
    ASSERT_TRUE((*p)->write("wt", w.data(), w.size()).ok());
    ASSERT_TRUE((*p)->write("b", b.data(), b.size()).ok());
    if (k.residual) {
      std::vector<unsigned char> z = bytes_of(k.n * k.o * k.oh() * k.ow(), z_value);
      if (k.blocked) z = in_blocks(z, k.o, k.oh() * k.ow());
      ASSERT_TRUE((*p)->write("z", z.data(), z.size()).ok());
    }
    const Status ran = (*p)->run("main");
    ASSERT_TRUE(ran.ok()) << ran.message();
    const std::vector<double> want = expected(k);
    const int points = k.oh() * k.ow(), blocks = (k.o + 15) / 16;
    std::vector<unsigned char> y((k.blocked ? static_cast<size_t>(k.n * blocks * points * 16) : want.size()) * size);
    ASSERT_TRUE((*p)->read("y", y.data(), y.size()).ok());
    int wrong = 0;
    for (size_t i = 0; i < y.size() / size; ++i) {
      // Where y's element i is in [N, O, points], or -1 for a lane past O (which must be 0).
      const int lane = static_cast<int>(i % 16), p = static_cast<int>(i / 16 % points);
      const int block = static_cast<int>(i / 16 / points % blocks), img = static_cast<int>(i / 16 / points / blocks);
      const int64_t at = !k.blocked ? static_cast<int64_t>(i)
                         : block * 16 + lane < k.o ? (img * k.o + block * 16 + lane) * points + p
                                                   : -1;
      const double got = ir::load_scalar(type, &y[i * size]).f, wanted = at < 0 ? 0.0 : want[static_cast<size_t>(at)];
      if (!(got == wanted) && ++wrong <= 4) ADD_FAILURE() << "y[" << i << "] = " << got << ", want " << wanted;
    }
  }

  TempDir dir_;
};

TEST_P(Conv2dTest, PaddedWindowsAtStrideOne) { check({.n = 1, .c = 3, .h = 7, .w = 9, .o = 4, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1}); }

TEST_P(Conv2dTest, UnevenPadsStridesAndDilations) {
  check({.n = 2, .c = 4, .h = 11, .w = 10, .o = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 3, .pt = 2, .pl = 0, .pb = 1, .pr = 3, .dh = 2, .dw = 1});
  check({.n = 1, .c = 3, .h = 9, .w = 40, .o = 5, .kh = 3, .kw = 3, .sh = 2, .sw = 1, .pt = 1, .pl = 2, .pb = 1, .pr = 1});  // rows strided only
}

TEST_P(Conv2dTest, GroupsAndTheRelu) {
  check({.n = 2, .c = 6, .h = 5, .w = 6, .o = 9, .kh = 3, .kw = 3, .pt = 1, .pl = 2, .pb = 0, .pr = 1, .groups = 3, .relu = 1});
  check({.n = 1, .c = 4, .h = 6, .w = 6, .o = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .groups = 4, .relu = 1});  // depthwise
}

TEST_P(Conv2dTest, OneByOneReadsTheInputAsItIs) {
  check({.n = 3, .c = 5, .h = 4, .w = 7, .o = 8, .kh = 1, .kw = 1});
  check({.n = 2, .c = 5, .h = 5, .w = 9, .o = 13, .kh = 1, .kw = 1});  // 45 points: 32 in place, 13 copied
  check({.n = 1, .c = 5, .h = 4, .w = 7, .o = 8, .kh = 1, .kw = 1, .sh = 2, .sw = 2});  // strided: a copy
}

// Without padding the cpu device reads the input where it is: rows of the input's width, whose
// last two points are junk that the product computes and does not store, and the last points
// (fewer than a panel of 32) from a copy.
TEST_P(Conv2dTest, UnpaddedWindowsReadTheInputInPlace) {
  check({.n = 2, .c = 3, .h = 7, .w = 9, .o = 5, .kh = 3, .kw = 3, .relu = 1});
  check({.n = 1, .c = 20, .h = 12, .w = 11, .o = 14, .kh = 3, .kw = 3, .residual = true});
}

TEST_P(Conv2dTest, WindowsWiderThanTheInputReachIntoThePadding) {
  check({.n = 1, .c = 2, .h = 3, .w = 2, .o = 3, .kh = 5, .kw = 5, .pt = 2, .pl = 3, .pb = 2, .pr = 3});
}

TEST_P(Conv2dTest, DilatedWindowsAtStrideOne) {
  check({.n = 1, .c = 3, .h = 9, .w = 12, .o = 5, .kh = 3, .kw = 2, .pt = 2, .pl = 0, .pb = 1, .pr = 3, .dh = 2, .dw = 3});
}

// Products deeper than the 256 rows the cpu device sums at a time (conv_avx512.cc), at stride 1
// and 2, with more output channels than one register tile and more points than one panel.
TEST_P(Conv2dTest, DeepProductsSumInBlocks) {
  check({.n = 1, .c = 40, .h = 9, .w = 10, .o = 27, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1});
  check({.n = 2, .c = 40, .h = 9, .w = 10, .o = 13, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1});
}

// Convolutions of several million multiply-adds, which the cpu device splits into parts across
// its threads: at stride 1 (the padded input read in place) and 2 (four phase planes).
TEST_P(Conv2dTest, LargeConvolutionsSplitAcrossThreads) {
  check({.n = 1, .c = 64, .h = 16, .w = 16, .o = 64, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1});
  check({.n = 1, .c = 64, .h = 24, .w = 24, .o = 96, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1});
}

// z is added to the finished sum, before the ReLU: where the product writes y itself (a 1x1
// window, in place and in its copied last points), where the rows have junk columns (padding,
// strides), across threads, in f64 and with a batch that is a size.
TEST_P(Conv2dTest, AResidualIsAddedBeforeTheRelu) {
  check({.n = 2, .c = 5, .h = 5, .w = 9, .o = 13, .kh = 1, .kw = 1, .relu = 1, .residual = true});
  check({.n = 2, .c = 6, .h = 5, .w = 6, .o = 9, .kh = 3, .kw = 3, .pt = 1, .pl = 2, .pb = 0, .pr = 1, .groups = 3, .relu = 1, .residual = true});
  check({.n = 1, .c = 7, .h = 9, .w = 8, .o = 6, .kh = 1, .kw = 1, .sh = 2, .sw = 2, .residual = true});
  check({.n = 1, .c = 64, .h = 24, .w = 24, .o = 96, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1, .residual = true});
  check({.n = 2, .c = 3, .h = 6, .w = 5, .o = 4, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1, .residual = true, .type = "f64"});
  check({.n = 3, .c = 3, .h = 6, .w = 5, .o = 4, .kh = 1, .kw = 1, .relu = 1, .residual = true}, true);
}

// clip_max caps the activation (ReLU6: relu=1, clip_max=6), where the tiles store, in the rows'
// copy, through the gemm (f64) and in the reference.
TEST_P(Conv2dTest, ClipMaxCapsTheActivation) {
  check({.n = 1, .c = 40, .h = 9, .w = 10, .o = 27, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1, .clip_max = 1.5});
  check({.n = 2, .c = 5, .h = 5, .w = 9, .o = 13, .kh = 1, .kw = 1, .residual = true, .clip_max = 0.75});
  check({.n = 2, .c = 3, .h = 6, .w = 5, .o = 4, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1, .clip_max = 0.5, .type = "f64"});
}

// One channel in and out per group (MobileNet's): the cpu device sums each channel's taps from the
// input rows themselves at column strides 1 and 2, from the channel's phase planes when dilated
// or at other strides, channels across threads; 5x5, with a residual and ReLU6, rows with more
// junk points than a vector, and in f64 (the direct loops).
TEST_P(Conv2dTest, DepthwiseConvolutions) {
  check({.n = 2, .c = 24, .h = 14, .w = 13, .o = 24, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 24, .relu = 1, .residual = true, .clip_max = 1.25});
  check({.n = 1, .c = 6, .h = 15, .w = 17, .o = 6, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 6});
  check({.n = 1, .c = 5, .h = 12, .w = 11, .o = 5, .kh = 5, .kw = 5, .pt = 2, .pl = 2, .pb = 2, .pr = 2, .groups = 5, .relu = 1});
  check({.n = 1, .c = 3, .h = 30, .w = 40, .o = 3, .kh = 3, .kw = 3, .pt = 9, .pl = 9, .pb = 9, .pr = 9, .dh = 9, .dw = 9, .groups = 3});
  check({.n = 2, .c = 4, .h = 7, .w = 6, .o = 4, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 4, .relu = 1, .type = "f64"});
}

// Rows of several vectors read from the input: a stride-2 row of 35 outputs reads its taps from
// two loads each, past the vectors' edges; exactly one vector; rows at stride 2 with columns at
// stride 1, a 3x5 window; stride 3 (through the planes).
TEST_P(Conv2dTest, DepthwiseConvolutionsOverRowsOfSeveralVectors) {
  check({.n = 1, .c = 3, .h = 8, .w = 70, .o = 3, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 3, .residual = true, .clip_max = 1.5});
  check({.n = 2, .c = 3, .h = 9, .w = 37, .o = 3, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .groups = 3, .relu = 1});
  check({.n = 1, .c = 2, .h = 4, .w = 16, .o = 2, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 2});
  check({.n = 1, .c = 2, .h = 7, .w = 40, .o = 2, .kh = 3, .kw = 5, .sh = 2, .pt = 1, .pl = 2, .pb = 1, .pr = 2, .groups = 2});
  check({.n = 1, .c = 2, .h = 10, .w = 50, .o = 2, .kh = 3, .kw = 3, .sh = 3, .sw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 2});
}

// Enough channels that the cpu device sums four at a time (and the rest one at a time): at
// stride 2 over rows of several vectors with a residual, a 5x5 window (its width known only when
// it runs) under ReLU6, and a batch whose groups of four span two images.
TEST_P(Conv2dTest, DepthwiseConvolutionsFourChannelsAtATime) {
  check({.n = 2, .c = 40, .h = 9, .w = 37, .o = 40, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 40, .relu = 1, .residual = true});
  check({.n = 1, .c = 44, .h = 12, .w = 11, .o = 44, .kh = 5, .kw = 5, .pt = 2, .pl = 2, .pb = 2, .pr = 2, .groups = 44, .relu = 1, .clip_max = 1.5});
  check({.n = 3, .c = 13, .h = 7, .w = 7, .o = 13, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 13});
}

// 3x3 windows at stride 1 (MobileNet's), which the cpu device sums two channels and up to four
// output rows at a time, each input row loaded once for the rows that read it: 9 and 13 rows (a
// last block of one, of one and three), rows of several vectors, no top padding and two rows of
// bottom padding, an odd channel (one at a time), a residual and ReLU6.
TEST_P(Conv2dTest, DepthwiseConvolutionsBlocksOfRows) {
  check({.n = 1, .c = 5, .h = 9, .w = 37, .o = 5, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 5, .relu = 1, .residual = true, .clip_max = 1.5});
  check({.n = 2, .c = 3, .h = 13, .w = 20, .o = 3, .kh = 3, .kw = 3, .pl = 1, .pb = 2, .pr = 1, .groups = 3});
  check({.n = 1, .c = 4, .h = 6, .w = 6, .o = 4, .kh = 3, .kw = 3, .groups = 4, .relu = 1});
}

// Cases for the layouts whose tiles run along output channels (16 or 32 of them a vector pair,
// one output row's points broadcast), in `layout`: rows of up to 7 points (4 vectors) and of
// several tiles (30 columns: 3 of 10), output channels that fill no vector (5), several tiles of
// them (70), products deeper than one block of rows, strides, pads, groups, a residual, ReLU6, a
// 1x1 window read in place, across threads; a depthwise convolution, f64 and the batch a size,
// whose weights are turned back into [O, C/groups, KH, KW] (the last sized).
std::vector<Conv> output_channel_cases(int layout) {
  std::vector<Conv> cases = {
      {.n = 1, .c = 40, .h = 7, .w = 7, .o = 70, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1},
      {.n = 2, .c = 33, .h = 9, .w = 30, .o = 5, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .residual = true},
      {.n = 1, .c = 64, .h = 14, .w = 14, .o = 48, .kh = 1, .kw = 1, .relu = 1, .clip_max = 1.5},
      {.n = 1, .c = 40, .h = 15, .w = 17, .o = 36, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .groups = 2, .residual = true},
      {.n = 1, .c = 24, .h = 9, .w = 11, .o = 6, .kh = 3, .kw = 2, .sh = 1, .sw = 2, .pt = 2, .pl = 0, .pb = 1, .pr = 1, .dh = 2, .groups = 3},
      {.n = 1, .c = 64, .h = 16, .w = 16, .o = 64, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1},
      {.n = 2, .c = 6, .h = 8, .w = 7, .o = 6, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 6, .relu = 1},
      {.n = 2, .c = 3, .h = 6, .w = 5, .o = 4, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .type = "f64"},
      {.n = 3, .c = 3, .h = 6, .w = 5, .o = 20, .kh = 1, .kw = 1, .relu = 1, .residual = true},
  };
  for (Conv& k : cases) k.layout = layout;
  return cases;
}

// transpose_w=1: w holds the output channel last.
TEST_P(Conv2dTest, WeightsWithTheOutputChannelLast) {
  const std::vector<Conv> cases = output_channel_cases(1);
  for (size_t i = 0; i < cases.size(); ++i) check(cases[i], i + 1 == cases.size());
}

// transpose_w=16: w holds blocks of 16 output channels, each block's channel last, which the cpu
// device's tiles along output channels read in place (the lanes past O, NaN here, never reach y).
// The cases above, and: 160 output channels over rows of 7 (tiles of 4, 4 and 2 vectors), 48 (a
// tile of 3), 20 over rows of 14 (a last tile of 1), two groups of 32 (each group's weights start
// a block) and groups of 12 output channels (blocks across groups: turned into [O, C/groups, KH,
// KW] first, as for a depthwise convolution, f64 and other devices).
TEST_P(Conv2dTest, WeightsInBlocksOfOutputChannels) {
  const std::vector<Conv> cases = output_channel_cases(16);
  for (size_t i = 0; i < cases.size(); ++i) check(cases[i], i + 1 == cases.size());
  check({.n = 1, .c = 24, .h = 7, .w = 7, .o = 160, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .residual = true, .layout = 16});
  check({.n = 2, .c = 20, .h = 7, .w = 6, .o = 48, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1, .layout = 16});
  check({.n = 1, .c = 30, .h = 14, .w = 14, .o = 20, .kh = 1, .kw = 1, .layout = 16});
  check({.n = 1, .c = 16, .h = 9, .w = 9, .o = 64, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 2, .relu = 1, .layout = 16});
  check({.n = 1, .c = 12, .h = 8, .w = 8, .o = 24, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .groups = 2, .layout = 16});
}

// conv2d_blocked: the cases above with the data in blocks of 16 channels (the cpu device's tiles
// along output channels read the blocks' phase planes, or x itself for a 1x1 window at stride 1;
// groups and f64 go through rows), and: 1x1 windows at stride 2 (one of four phase planes read),
// 7x7 at stride 2 from 3 channels, a residual over rows of 7 with a last tile of 3 vectors, and
// a 5x5 window dilated, deeper than a block of rows; then some of them with x in NCHW (the 3
// channels of an image too) and y in blocks.
TEST_P(Conv2dTest, DataInBlocksOfChannels) {
  std::vector<Conv> cases = output_channel_cases(16);
  cases.push_back({.n = 2, .c = 32, .h = 9, .w = 10, .o = 40, .kh = 1, .kw = 1, .sh = 2, .sw = 2});
  cases.push_back({.n = 1, .c = 3, .h = 20, .w = 21, .o = 17, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pt = 3, .pl = 3, .pb = 3, .pr = 3, .relu = 1});
  cases.push_back({.n = 1, .c = 24, .h = 7, .w = 7, .o = 48, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .residual = true, .clip_max = 2});
  cases.push_back({.n = 1, .c = 36, .h = 12, .w = 13, .o = 33, .kh = 5, .kw = 5, .pt = 4, .pl = 4, .pb = 4, .pr = 4, .dh = 2, .dw = 2});
  for (size_t i = 0; i < cases.size(); ++i) {
    cases[i].blocked = true;
    check(cases[i], i + 1 == output_channel_cases(16).size());
  }
  // Depthwise, each point's 16 channels summed in a vector: MobileNet's 3x3 at strides 1 and 2
  // with its ReLU6 and a residual, a last block of 4 channels, a 5x5 window dilated, a window at
  // stride 3, each over rows of fewer than 28 points (read from the blocks' phase planes) and of
  // more (from the blocks where they are, the points at the rows' ends one by one).
  for (const int wide : {0, 1}) {
    check({.n = 2, .c = 32, .h = 9, .w = wide ? 40 : 19, .o = 32, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 32, .relu = 1, .clip_max = 6, .blocked = true});
    check({.n = 1, .c = 20, .h = 12, .w = wide ? 60 : 13, .o = 20, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .groups = 20, .residual = true, .blocked = true});
    check({.n = 1, .c = 16, .h = 11, .w = wide ? 34 : 10, .o = 16, .kh = 5, .kw = 5, .pt = 4, .pl = 4, .pb = 4, .pr = 4, .dh = 2, .dw = 2, .groups = 16, .blocked = true});
    check({.n = 1, .c = 24, .h = 8, .w = wide ? 90 : 5, .o = 24, .kh = 5, .kw = 5, .sh = 3, .sw = 3, .pt = 2, .pl = 2, .pb = 1, .pr = 2, .groups = 24, .relu = 1, .residual = true, .blocked = true});
  }
  // x in NCHW (an image's 3 channels as the first layer reads them), y in blocks.
  for (Conv k : {cases[0], cases[1], cases[3], cases[7], cases[10]}) {
    k.x_in_rows = true;
    check(k);
  }
  // Two threads and at least two images each: each thread takes whole images, with planes of its
  // own (an odd batch; x in blocks and in NCHW).
  check({.n = 5, .c = 20, .h = 9, .w = 11, .o = 40, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1, .residual = true, .blocked = true, .threads = 2});
  check({.n = 4, .c = 3, .h = 16, .w = 17, .o = 20, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .pt = 3, .pl = 3, .pb = 3, .pr = 3, .blocked = true, .x_in_rows = true, .threads = 2});
  // An image's input over 1 MB with few weights: the tiles go by chunks of two rows of points,
  // every channel tile over a chunk (windows at stride 2, so that y stays small: a 3x3 over one
  // image on the device's threads, a 1x1 over four images on two threads).
  check({.n = 1, .c = 32, .h = 96, .w = 96, .o = 40, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .relu = 1, .blocked = true});
  check({.n = 4, .c = 32, .h = 96, .w = 98, .o = 40, .kh = 1, .kw = 1, .sh = 2, .sw = 2, .residual = true, .blocked = true, .threads = 2});
}

TEST_P(Conv2dTest, F64) { check({.n = 2, .c = 3, .h = 6, .w = 5, .o = 4, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .type = "f64"}); }

TEST_P(Conv2dTest, TheBatchIsASize) { check({.n = 3, .c = 3, .h = 6, .w = 5, .o = 4, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, true); }

INSTANTIATE_TEST_SUITE_P(Devices, Conv2dTest, ::testing::Values("cpu", "interp", "opencl", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace kiln::e2e
