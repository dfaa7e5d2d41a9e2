// The phase planes through which conv2d's AVX-512 products read their input (conv_avx512.cc,
// conv_depthwise.cc): a padded copy of each channel (or block of 16 channels) per phase of the
// strides, so that consecutive output points read consecutive plane points.
#pragma once

#include <cstdint>
#include <vector>

#include "ral/library/conv_shape.h"
#include "ral/library/host_threads.h"

namespace kiln::ral::library {

// The phase planes of one image's group (wide_group): plane (channel, u, v) holds the padded
// input's points (r · sh + u, c · sw + v), `height` rows of `width`, so that output point (i, j)
// of a row of the planes' width reads tap (channel, a, e) at offset(k) + i · width + j. In blocks
// of 16 channels (lanes 16, conv2d_blocked) a plane is a block's: each point its 16 channels.
struct Planes {
  int64_t lanes, height, width, plane;  // plane: points (floats: times lanes)
  std::vector<char> read;               // by phase u · sw + v: whether some tap reads it

  explicit Planes(const ConvShape& s, int64_t lanes_per_point = 1)
      : lanes(lanes_per_point),
        height(s.oh + (s.kh - 1) * s.dh / s.sh),
        width(s.ow + (s.kw - 1) * s.dw / s.sw),
        plane(height * width),
        read(static_cast<size_t>(s.sh * s.sw), 0) {
    for (int64_t a = 0; a < s.kh; ++a) {
      for (int64_t e = 0; e < s.kw; ++e) read[static_cast<size_t>(a * s.dh % s.sh * s.sw + e * s.dw % s.sw)] = 1;
    }
  }
  // Floats of one channel's (or block's) planes.
  int64_t floats(const ConvShape& s) const { return s.sh * s.sw * plane * lanes; }
  // Whether the one plane is the input itself (stride 1, no padding), read where it is.
  bool is_input(const ConvShape& s) const { return s.sh * s.sw == 1 && height == s.h && width == s.w; }
  // The wide points: rows of `width` of which the first OW are y's.
  int64_t points(const ConvShape& s) const { return (s.oh - 1) * width + s.ow; }
  // Where rows k in [0, channels · kh · kw) of the product (ConvShape::tap) read output point 0,
  // from the first plane of the group: the window's taps once, then a channel's planes apart (a
  // division per row, as ConvShape::tap takes, cost ResNet-50 about a millisecond a run, on one
  // thread while the others waited); in blocks, a block's planes apart and a lane within.
  void offsets(const ConvShape& s, int64_t channels, int64_t* out) const;
  // Writes channel x's planes (x: its h · w points, each of `lanes` floats) at `out`: sh · sw
  // planes, those no tap reads left as they are.
  void write(const ConvShape& s, const float* x, float* out) const;
  // write() for `count` channels (or blocks) of x, one after another, into `out`, spread over
  // `threads`.
  void write_all(const HostThreads& threads, const ConvShape& s, int64_t count, const float* x, float* out) const;
};

}  // namespace kiln::ral::library
