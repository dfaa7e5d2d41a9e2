// The built-in library functions through the RAL call path, on cpu and on interp (whose plain
// versions are the reference): sort, argsort, topk and the Philox random numbers, with the
// shapes that break sorting code (1x1, primes, empty rows, NaNs, ties) and the error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/base/random.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/philox.h"
#include "ral/library_call.h"

namespace kiln::ral {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
const PhiloxCode kPhiloxCodes[] = {PhiloxCode::kPortable, PhiloxCode::kAvx2, PhiloxCode::kAvx512};

// What sort must give: each row sorted with NaNs last, by an obviously correct method.
std::vector<float> expected_sort(std::vector<float> x, int64_t n, bool descending) {
  for (size_t r = 0; n > 0 && r < x.size() / static_cast<size_t>(n); ++r) {
    auto begin = x.begin() + static_cast<int64_t>(r) * n, end = begin + n;
    auto nan_start = std::stable_partition(begin, end, [](float v) { return !std::isnan(v); });
    std::stable_sort(begin, nan_start, [&](float a, float b) { return descending ? a > b : a < b; });
  }
  return x;
}

std::vector<float> random_row_data(int64_t count, uint64_t seed, bool with_nans, bool with_ties) {
  Random random(seed);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) {
    v = static_cast<float>(random.normal(0, 1));
    if (with_ties) v = std::round(v * 2) / 2;
    if (with_nans && random.uniform(0, 1) < 0.1) v = kNaN;
  }
  return x;
}

struct Shape {
  int64_t rows, n;
};
const Shape kShapes[] = {{1, 1}, {7, 13}, {3, 1}, {1, 97}, {0, 5}, {4, 0}, {5, 64}};

TEST(LibraryTest, SortAndArgsortRows) {
  for (const char* device : kLibraryDevices) {
    for (const Shape& s : kShapes) {
      for (bool descending : {false, true}) {
        const std::vector<float> x = random_row_data(s.rows * s.n, static_cast<uint64_t>(s.rows * 31 + s.n), true, true);
        std::vector<float> y(x.size(), -1);
        std::vector<int32_t> idx(x.size(), -1);
        MemRef<float, 2> xm{const_cast<float*>(x.data()), {s.rows, s.n}}, ym{y.data(), {s.rows, s.n}};
        MemRef<int32_t, 2> im{idx.data(), {s.rows, s.n}};
        int64_t desc = descending;
        const std::string where = std::string(device) + " " + std::to_string(s.rows) + "x" +
                                  std::to_string(s.n) + (descending ? " descending" : "");
        ASSERT_TRUE(call(device, full_name("sort", device, "m2df32_m2df32_i64"), {&xm, &ym, &desc}).ok()) << where;
        EXPECT_TRUE(same_bits(y, expected_sort(x, s.n, descending))) << where;
        ASSERT_TRUE(call(device, full_name("argsort", device, "m2df32_m2di32_i64"), {&xm, &im, &desc}).ok()) << where;
        // A stable permutation: gathering x by it gives the sorted rows, and equal keys keep order.
        for (int64_t r = 0; r < s.rows; ++r) {
          for (int64_t i = 0; i < s.n; ++i) {
            const int32_t at = idx[static_cast<size_t>(r * s.n + i)];
            ASSERT_TRUE(at >= 0 && at < s.n) << where;
            const float v = x[static_cast<size_t>(r * s.n + at)], sorted = y[static_cast<size_t>(r * s.n + i)];
            EXPECT_TRUE(v == sorted || (std::isnan(v) && std::isnan(sorted))) << where;
            if (i > 0) {
              const int32_t prev = idx[static_cast<size_t>(r * s.n + i - 1)];
              const float pv = x[static_cast<size_t>(r * s.n + prev)];
              if (pv == v || (std::isnan(pv) && std::isnan(v))) {
                EXPECT_LT(prev, at) << where << ": not stable";
              }
            }
          }
        }
      }
    }
  }
}

TEST(LibraryTest, TopkTakesTheLargestWithLowerPositionsFirst) {
  for (const char* device : kLibraryDevices) {
    // Ties and a NaN, which is never among the largest while numbers remain.
    std::vector<float> x = {1, 5, kNaN, 5, 3, 5, -2};
    std::vector<float> values(4);
    std::vector<int32_t> indices(4);
    MemRef<float, 1> xm{x.data(), {7}}, vm{values.data(), {4}};
    MemRef<int32_t, 1> im{indices.data(), {4}};
    ASSERT_TRUE(call(device, full_name("topk", device, "m1df32_m1df32_m1di32"), {&xm, &vm, &im}).ok());
    EXPECT_EQ(values, (std::vector<float>{5, 5, 5, 3})) << device;
    EXPECT_EQ(indices, (std::vector<int32_t>{1, 3, 5, 4})) << device;

    // Against sorting, on larger shapes and k from 0 to the row length; i32 and f64 too.
    for (const Shape& s : kShapes) {
      for (int64_t k : {int64_t{0}, int64_t{1}, s.n / 2, s.n}) {
        if (k > s.n) continue;
        std::vector<double> xd(static_cast<size_t>(s.rows * s.n));
        Random random(static_cast<uint64_t>(k + s.n));
        for (double& v : xd) v = std::round(random.normal(0, 3));
        std::vector<double> vals(static_cast<size_t>(s.rows * k));
        std::vector<int32_t> ids(static_cast<size_t>(s.rows * k));
        MemRef<double, 2> xdm{xd.data(), {s.rows, s.n}}, vdm{vals.data(), {s.rows, k}};
        MemRef<int32_t, 2> idm{ids.data(), {s.rows, k}};
        ASSERT_TRUE(call(device, full_name("topk", device, "m2df64_m2df64_m2di32"), {&xdm, &vdm, &idm}).ok());
        for (int64_t r = 0; r < s.rows; ++r) {
          std::vector<int32_t> order(static_cast<size_t>(s.n));
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
            return xd[static_cast<size_t>(r * s.n + a)] > xd[static_cast<size_t>(r * s.n + b)];
          });
          for (int64_t i = 0; i < k; ++i) {
            EXPECT_EQ(ids[static_cast<size_t>(r * k + i)], order[static_cast<size_t>(i)]) << device;
            EXPECT_EQ(vals[static_cast<size_t>(r * k + i)], xd[static_cast<size_t>(r * s.n + order[static_cast<size_t>(i)])]);
          }
        }
      }
    }
    std::vector<int32_t> xi = {3, -1, 3, 7}, vi(2), ii(2);
    MemRef<int32_t, 1> xim{xi.data(), {4}}, vim{vi.data(), {2}}, iim{ii.data(), {2}};
    ASSERT_TRUE(call(device, full_name("topk", device, "m1di32_m1di32_m1di32"), {&xim, &vim, &iim}).ok());
    EXPECT_EQ(vi, (std::vector<int32_t>{7, 3}));
    EXPECT_EQ(ii, (std::vector<int32_t>{3, 0}));
  }
}

TEST(LibraryTest, ShapeErrorsNameTheFunctionAndTheOperand) {
  for (const char* device : kLibraryDevices) {
    std::vector<float> x(12), y(12);
    std::vector<int32_t> idx(12);
    MemRef<float, 2> xm{x.data(), {3, 4}}, ym{y.data(), {4, 3}}, km{y.data(), {3, 5}};
    MemRef<int32_t, 2> im{idx.data(), {3, 5}};
    int64_t desc = 0;
    Status bad_sort = call(device, full_name("sort", device, "m2df32_m2df32_i64"), {&xm, &ym, &desc});
    EXPECT_EQ(bad_sort.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad_sort.message().find("RAL function 'sort' on device '" + std::string(device) +
                                      "': sort: y has shape [4, 3], x has shape [3, 4]"),
              std::string::npos)
        << bad_sort;
    Status big_k = call(device, full_name("topk", device, "m2df32_m2df32_m2di32"), {&xm, &km, &im});
    EXPECT_EQ(big_k.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(big_k.message().find("k = 5 is larger than the row length 4"), std::string::npos) << big_k;
  }
}

// c = alpha * op(a) @ op(b) + beta * c in long double, the reference for both devices.
template <typename T>
std::vector<T> naive_gemm(const std::vector<T>& a, const std::vector<T>& b, std::vector<T> c, int64_t m, int64_t n,
                          int64_t k, bool ta, bool tb, T alpha, T beta) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      long double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += static_cast<long double>(ta ? a[static_cast<size_t>(p * m + i)] : a[static_cast<size_t>(i * k + p)]) *
               (tb ? b[static_cast<size_t>(j * k + p)] : b[static_cast<size_t>(p * n + j)]);
      }
      T& out = c[static_cast<size_t>(i * n + j)];
      out = static_cast<T>(alpha * sum + (beta == 0 ? 0 : beta * static_cast<long double>(out)));
    }
  }
  return c;
}

template <typename T>
void check_gemm_case(const char* device, int64_t m, int64_t n, int64_t k, bool ta, bool tb, T alpha, T beta) {
  Random random(static_cast<uint64_t>(m * 1000 + n * 10 + k));
  auto fill = [&](size_t count) {
    std::vector<T> v(count);
    for (T& x : v) x = static_cast<T>(random.normal(0, 1));
    return v;
  };
  std::vector<T> a = fill(static_cast<size_t>(m * k)), b = fill(static_cast<size_t>(k * n)), c = fill(static_cast<size_t>(m * n));
  const std::vector<T> expected = naive_gemm(a, b, c, m, n, k, ta, tb, alpha, beta);
  MemRef<T, 2> am{a.data(), {ta ? k : m, ta ? m : k}}, bm{b.data(), {tb ? n : k, tb ? k : n}}, cm{c.data(), {m, n}};
  int64_t ta64 = ta, tb64 = tb;
  const std::string code = std::is_same_v<T, float> ? "f32" : "f64";
  const std::string name = full_name("gemm", device, "m2d" + code + "_m2d" + code + "_m2d" + code + "_i64_i64_" + code + "_" + code + "_i64");
  int64_t no_batch = 0;
  Status status = call(device, name, {&am, &bm, &cm, &ta64, &tb64, &alpha, &beta, &no_batch});
  ASSERT_TRUE(status.ok()) << status;
  const double tolerance = (std::is_same_v<T, float> ? 1e-5 : 1e-13) * static_cast<double>(k + 1);
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_NEAR(c[i], expected[i], tolerance * (1 + std::abs(expected[i])))
        << device << " " << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb << " at " << i;
  }
}

TEST(LibraryTest, GemmAgainstAWideReference) {
  for (const char* device : kLibraryDevices) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        check_gemm_case<float>(device, 1, 1, 1, ta, tb, 1.0f, 0.0f);
        check_gemm_case<float>(device, 7, 13, 11, ta, tb, 0.5f, 2.0f);
        check_gemm_case<double>(device, 31, 5, 17, ta, tb, -1.5, 0.25);
        check_gemm_case<double>(device, 3, 2, 1, ta, tb, 1.0, 1.0);
        // Above 2^24 multiply-adds with a dimension below 1024: oneDNN's matmul on cpu (gemm.cc).
        check_gemm_case<float>(device, 300, 260, 256, ta, tb, 1.0f, 0.0f);
      }
    }
    check_gemm_case<float>(device, 64, 48, 96, false, false, 1.0f, 0.0f);
    // beta = 0 ignores what c held, NaNs included.
    std::vector<float> a = {1, 2}, b = {3, 4}, c = {kNaN};
    MemRef<float, 2> am{a.data(), {1, 2}}, bm{b.data(), {2, 1}}, cm{c.data(), {1, 1}};
    int64_t no = 0;
    float alpha = 1, beta = 0;
    ASSERT_TRUE(call(device, full_name("gemm", device, "m2df32_m2df32_m2df32_i64_i64_f32_f32_i64"), {&am, &bm, &cm, &no, &no, &alpha, &beta, &no}).ok());
    EXPECT_EQ(c[0], 11.0f) << device;
    // A shape mismatch is a status naming the shapes.
    MemRef<float, 2> wrong{c.data(), {1, 2}};
    Status bad = call(device, full_name("gemm", device, "m2df32_m2df32_m2df32_i64_i64_f32_f32_i64"), {&am, &bm, &wrong, &no, &no, &alpha, &beta, &no});
    EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.message().find("op(a) is 1x2, op(b) is 2x1 and c is [1, 2]"), std::string::npos) << bad;
  }
}

// Products of a few rows (a dense layer at small batches), of one row or one column, every
// transpose, odd widths, and BLAS's rules for alpha = 0 and k = 0.
TEST(LibraryTest, GemmOfAFewRows) {
  for (const char* device : kLibraryDevices) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (int64_t m : {1, 3, 8, 9}) {
          for (int64_t n : {1, 7, 91, 300}) {
            for (int64_t k : {5, 37, 256}) check_gemm_case<float>(device, m, n, k, ta, tb, 1.0f, 0.0f);
          }
        }
        check_gemm_case<float>(device, 2, 130, 17, ta, tb, -0.5f, 1.5f);
        check_gemm_case<double>(device, 4, 45, 33, ta, tb, 2.0, -1.0);
        check_gemm_case<float>(device, 1, 1025, 256, ta, tb, 1.0f, 0.0f);
        // One row or one column: the host's OpenBLAS runs these as matrix-vector products.
        check_gemm_case<float>(device, 1, 300, 37, ta, tb, -0.5f, 1.5f);
        check_gemm_case<float>(device, 91, 1, 37, ta, tb, 2.0f, -1.0f);
        check_gemm_case<double>(device, 1, 45, 33, ta, tb, 2.0, -1.0);
        check_gemm_case<double>(device, 45, 1, 33, ta, tb, 0.5, 0.25);
      }
    }
    // alpha = 0 reads neither a nor b (c = beta * c), k = 0 likewise, as BLAS.
    std::vector<float> a = {kNaN, kNaN}, b = {kNaN, kNaN}, c = {4, 6};
    MemRef<float, 2> am{a.data(), {1, 2}}, bm{b.data(), {2, 2}}, cm{c.data(), {1, 2}};
    int64_t no = 0;
    float alpha = 0, beta = 0.5f;
    const std::string name = full_name("gemm", device, "m2df32_m2df32_m2df32_i64_i64_f32_f32_i64");
    ASSERT_TRUE(call(device, name, {&am, &bm, &cm, &no, &no, &alpha, &beta, &no}).ok());
    EXPECT_EQ(c, (std::vector<float>{2, 3})) << device;
    MemRef<float, 2> empty_a{a.data(), {1, 0}}, empty_b{b.data(), {0, 2}};
    alpha = 1;
    ASSERT_TRUE(call(device, name, {&empty_a, &empty_b, &cm, &no, &no, &alpha, &beta, &no}).ok());
    EXPECT_EQ(c, (std::vector<float>{1, 1.5f})) << device;
  }
}

// A batch of products with every transpose and alpha 1, beta 0: on cpu oneDNN's matmul primitive
// takes the batch in one call (gemm.cc), each product's matrices one after another.
TEST(LibraryTest, BatchedProductsWithTransposes) {
  constexpr int64_t kBatch = 5, kM = 17, kN = 33, kK = 40;
  for (const char* device : kLibraryDevices) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(std::string(device) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
        Random random(7);
        auto fill = [&](size_t count) {
          std::vector<float> v(count);
          for (float& x : v) x = static_cast<float>(random.normal(0, 1));
          return v;
        };
        std::vector<float> a = fill(kBatch * kM * kK), b = fill(kBatch * kK * kN), c(kBatch * kM * kN, kNaN);
        MemRef<float, 3> am{a.data(), {kBatch, ta ? kK : kM, ta ? kM : kK}};
        MemRef<float, 3> bm{b.data(), {kBatch, tb ? kN : kK, tb ? kK : kN}}, cm{c.data(), {kBatch, kM, kN}};
        int64_t ta64 = ta, tb64 = tb, one = 1;
        float alpha = 1, beta = 0;
        ASSERT_TRUE(call(device, full_name("gemm", device, "m3df32_m3df32_m3df32_i64_i64_f32_f32_i64"),
                         {&am, &bm, &cm, &ta64, &tb64, &alpha, &beta, &one}).ok());
        for (int64_t q = 0; q < kBatch; ++q) {
          const std::vector<float> want =
              naive_gemm(std::vector<float>(a.begin() + q * kM * kK, a.begin() + (q + 1) * kM * kK),
                         std::vector<float>(b.begin() + q * kK * kN, b.begin() + (q + 1) * kK * kN),
                         std::vector<float>(kM * kN), kM, kN, kK, ta, tb, 1.0f, 0.0f);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(c[static_cast<size_t>(q * kM * kN) + i], want[i], 1e-4 * (1 + std::abs(want[i]))) << q << " " << i;
          }
        }
      }
    }
  }
}

// Tensors of rank 3 and 4 are their products' matrices in row-major order (kiln/ir/gemm_groups.h):
// a [2, 3, 4] @ b [2, 4, 5] with batch=1 is two 3x4 @ 4x5 products; a [3, 2, 2] @ b [5, 2, 2]ᵀ
// flattens the summed dimensions. Dimensions that agree only in their products are refused.
TEST(LibraryTest, GemmOfHigherRanksIsTheProductOfTheirMatrices) {
  for (const char* device : kLibraryDevices) {
    SCOPED_TRACE(device);
    Random random(5);
    auto fill = [&](size_t count) {
      std::vector<float> v(count);
      for (float& x : v) x = static_cast<float>(random.normal(0, 1));
      return v;
    };
    std::vector<float> a = fill(24), b = fill(40), c(30, kNaN);
    MemRef<float, 3> am{a.data(), {2, 3, 4}}, bm{b.data(), {2, 4, 5}}, cm{c.data(), {2, 3, 5}};
    int64_t no = 0, one = 1;
    float alpha = 1, beta = 0;
    ASSERT_TRUE(call(device, full_name("gemm", device, "m3df32_m3df32_m3df32_i64_i64_f32_f32_i64"),
                     {&am, &bm, &cm, &no, &no, &alpha, &beta, &one}).ok());
    for (int64_t q = 0; q < 2; ++q) {
      const std::vector<float> want = naive_gemm(std::vector<float>(a.begin() + q * 12, a.begin() + q * 12 + 12),
                                                 std::vector<float>(b.begin() + q * 20, b.begin() + q * 20 + 20),
                                                 std::vector<float>(15), 3, 5, 4, false, false, 1.0f, 0.0f);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(c[static_cast<size_t>(q * 15) + i], want[i], 1e-5) << q << " " << i;
    }
    // The summed dimensions flattened, b transposed, beta = 1 adding to what c held.
    std::vector<float> c2(15, 1.0f);
    MemRef<float, 3> a2{a.data(), {3, 2, 2}}, b2{b.data(), {5, 2, 2}};
    MemRef<float, 2> c2m{c2.data(), {3, 5}};
    float add = 1;
    ASSERT_TRUE(call(device, full_name("gemm", device, "m3df32_m3df32_m2df32_i64_i64_f32_f32_i64"),
                     {&a2, &b2, &c2m, &no, &one, &alpha, &add, &no}).ok());
    const std::vector<float> want = naive_gemm(std::vector<float>(a.begin(), a.begin() + 12),
                                               std::vector<float>(b.begin(), b.begin() + 20), std::vector<float>(15, 1.0f),
                                               3, 5, 4, false, true, 1.0f, 1.0f);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(c2[i], want[i], 1e-5) << i;
    // [3, 2, 2] and [4, 1, 5]: k is 4 both ways, but the summed dimensions differ.
    MemRef<float, 3> b3{b.data(), {4, 1, 5}};
    Status bad = call(device, full_name("gemm", device, "m3df32_m3df32_m2df32_i64_i64_f32_f32_i64"),
                      {&a2, &b3, &c2m, &no, &no, &alpha, &beta, &no});
    EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.message().find("a is [3, 2, 2], b is [4, 1, 5] and c is [3, 5]"), std::string::npos) << bad;
    // Ranks that make no product with the batch asked for.
    Status ranks = call(device, full_name("gemm", device, "m3df32_m3df32_m2df32_i64_i64_f32_f32_i64"),
                        {&a2, &b3, &c2m, &no, &no, &alpha, &beta, &one});
    EXPECT_NE(ranks.message().find("their ranks make no product with batch=1"), std::string::npos) << ranks;
  }
}

TEST(PhiloxTest, KnownAnswerVectors) {
  // Salmon et al.'s known-answer vectors for Philox4x32-10 (Random123's kat_vectors).
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxTest, StreamWordsMatchRandomgen) {
  // scripts/philox-reference.py: randomgen's Philox(number=4, width=32) with kiln's key and
  // counter layout; the last case crosses the carry into the counter's second word.
  struct Case {
    uint64_t seed;
    uint32_t call_site, run;
    uint64_t first_block;
    uint32_t words[8];
  };
  const Case cases[] = {
      {0x0123456789ABCDEFull, 7u, 3u, 0ull, {0x776b54beu, 0x50c9fe93u, 0xd304eaa1u, 0xc4122e8fu, 0x17512d21u, 0xe3de0126u, 0x323d073eu, 0xdf3b7d4du}},
      {0x000000000000002Aull, 0u, 0u, 0ull, {0x9ceaf053u, 0x77f5493bu, 0x12bf50adu, 0x5742b3d7u, 0xfcdb2127u, 0x53ba6cfdu, 0x838f5a6eu, 0x744e06fbu}},
      {0xFFFFFFFFFFFFFFFFull, 4294967295u, 4294967295u, 4294967295ull, {0xa426518du, 0x56f1532cu, 0x771887b1u, 0xcd81a4c4u, 0xf2ab9c0bu, 0xad5ac87bu, 0xf044a15eu, 0x923e0cbbu}},
  };
  for (const Case& c : cases) {
    PhiloxStream stream{c.seed, c.call_site, c.run};
    for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(stream.word(c.first_block * 4 + i), c.words[i]) << i;
    uint32_t filled[8];
    stream.fill(c.first_block, filled, 8);
    EXPECT_TRUE(std::equal(filled, filled + 8, c.words));
  }
  // Every fill this processor runs gives the block-at-a-time words, over lane and pass boundaries
  // and the carry into the counter's second word (the vector code runs whole passes of 32 blocks).
  for (PhiloxCode code : kPhiloxCodes) {
    if (!philox_code_runs(code)) continue;
    for (uint64_t first_block : {uint64_t{3}, uint64_t{0xFFFFFFFF} - 40}) {
      PhiloxStream stream{0xFEDCBA9876543210ull, 1, 2};
      std::vector<uint32_t> many(1003);
      stream.fill(first_block, many.data(), many.size(), code);
      for (uint64_t i = 0; i < many.size(); ++i) ASSERT_EQ(many[i], stream.word(4 * first_block + i)) << i;
    }
  }
}

TEST(PhiloxTest, FilledUniformsAreTheScalarOnesOnEveryCode) {
  const float kMax = std::numeric_limits<float>::max();
  // lo == hi, a range whose top rounds up to hi (1 + u * 2^-23 ties to hi), and one whose width
  // overflows to infinity (0 * inf is NaN, replaced by the largest value below hi).
  const std::pair<float, float> ranges[] = {{-2, 3}, {0, 1}, {2, 2}, {1, std::nextafter(1.0f, 2.0f)}, {-kMax, kMax}};
  for (PhiloxCode code : kPhiloxCodes) {
    if (!philox_code_runs(code)) continue;
    for (auto [lo, hi] : ranges) {
      PhiloxStream stream{77, 3, 9};
      std::vector<float> numbers(1001);
      stream.fill_uniform(5, numbers.data(), numbers.size(), lo, hi, code);
      for (uint64_t i = 0; i < numbers.size(); ++i) {
        const float expected = scale_uniform(uniform_f32(stream.word(20 + i)), lo, hi);
        ASSERT_EQ(std::memcmp(&numbers[i], &expected, sizeof(float)), 0)
            << "code " << static_cast<int>(code) << ", [" << lo << ", " << hi << "), element " << i << ": "
            << numbers[i] << " instead of " << expected;
        ASSERT_TRUE(numbers[i] >= lo && (numbers[i] < hi || lo == hi)) << numbers[i];
      }
    }
  }
}

TEST(RandomTest, UniformIsTheStreamScaledAndTheSameOnEveryDevice) {
  const int64_t count = 1001;  // not a multiple of the block
  int64_t site = 5;
  std::vector<std::vector<float>> results;
  for (const char* device : kLibraryDevices) {
    std::vector<float> r(static_cast<size_t>(count));
    MemRef<float, 1> rm{r.data(), {count}};
    float lo = -2, hi = 3;
    ASSERT_TRUE(call(device, full_name("random_uniform", device, "m1df32_f32_f32_i64"), {&rm, &lo, &hi, &site}, 99, 4).ok());
    results.push_back(r);
  }
  EXPECT_TRUE(same_bits(results[0], results[1]));
  PhiloxStream stream{99, 5, 4};
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float v = results[0][static_cast<size_t>(i)];
    EXPECT_EQ(v, scale_uniform(uniform_f32(stream.word(static_cast<uint64_t>(i))), -2.0f, 3.0f));
    EXPECT_TRUE(v >= -2 && v < 3) << v;
    sum += v;
  }
  EXPECT_NEAR(sum / count, 0.5, 0.15);  // a fixed stream: deterministic, not flaky

  // Another run or call site draws other numbers; the same ones draw the same.
  auto draw = [&](int64_t call_site, uint64_t run) {
    std::vector<double> r(64);
    MemRef<double, 2> rm{r.data(), {8, 8}};
    double lo = 0, hi = 1;
    EXPECT_TRUE(call("cpu", full_name("random_uniform", "cpu", "m2df64_f64_f64_i64"), {&rm, &lo, &hi, &call_site}, 7, run).ok());
    return r;
  };
  EXPECT_EQ(draw(1, 0), draw(1, 0));
  EXPECT_NE(draw(1, 0), draw(2, 0));
  EXPECT_NE(draw(1, 0), draw(1, 1));
}

TEST(RandomTest, F64UniformsAndF32NormalsAreTheirWordsAsDocumented) {
  // docs/ral.md's mapping, from the block-at-a-time words: 1001 elements read over 500 blocks,
  // across the vector code's passes and its remainder.
  const int64_t count = 1001;
  int64_t site = 6;
  const PhiloxStream stream{0xC0FFEE, 6, 3};
  auto word = [&](int64_t i) { return stream.word(static_cast<uint64_t>(i)); };
  std::vector<double> u(count);
  MemRef<double, 1> um{u.data(), {count}};
  double lo = -1, hi = 4;
  ASSERT_TRUE(
      call("cpu", full_name("random_uniform", "cpu", "m1df64_f64_f64_i64"), {&um, &lo, &hi, &site}, 0xC0FFEE, 3).ok());
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(u[i], scale_uniform(uniform_f64(word(2 * i), word(2 * i + 1)), lo, hi)) << i;
  }
  std::vector<float> n(count);
  MemRef<float, 1> nm{n.data(), {count}};
  float mean = 2, std_dev = 3;
  ASSERT_TRUE(call("cpu", full_name("random_normal", "cpu", "m1df32_f32_f32_i64"), {&nm, &mean, &std_dev, &site},
                   0xC0FFEE, 3)
                  .ok());
  for (int64_t j = 0; 2 * j < count; ++j) {
    const double u1 = 1.0 - uniform_f32(word(2 * j)), u2 = uniform_f32(word(2 * j + 1));
    const double r = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * std::numbers::pi * u2;
    ASSERT_EQ(n[2 * j], static_cast<float>(mean + std_dev * (r * std::cos(angle)))) << 2 * j;
    if (2 * j + 1 < count) {
      ASSERT_EQ(n[2 * j + 1], static_cast<float>(mean + std_dev * (r * std::sin(angle)))) << 2 * j + 1;
    }
  }
}

TEST(RandomTest, NormalHasItsMomentsAndRefusesBadParameters) {
  for (const char* device : kLibraryDevices) {
    std::vector<double> r(20001);
    MemRef<double, 1> rm{r.data(), {20001}};
    double mean = 1.5, std_dev = 2;
    int64_t site = 0;
    ASSERT_TRUE(call(device, full_name("random_normal", device, "m1df64_f64_f64_i64"), {&rm, &mean, &std_dev, &site}, 3).ok());
    double sum = 0, sq = 0;
    for (double v : r) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sq += v * v;
    }
    const double m = sum / r.size(), var = sq / r.size() - m * m;
    EXPECT_NEAR(m, 1.5, 0.1) << device;
    EXPECT_NEAR(std::sqrt(var), 2.0, 0.1) << device;

    std::vector<float> f(3);
    MemRef<float, 1> fm{f.data(), {3}};
    float fmean = 0, bad_std = -1;
    Status bad = call(device, full_name("random_normal", device, "m1df32_f32_f32_i64"), {&fm, &fmean, &bad_std, &site});
    EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.message().find("random_normal"), std::string::npos) << bad;
    float lo = 1, hi = 0;
    EXPECT_EQ(call(device, full_name("random_uniform", device, "m1df32_f32_f32_i64"), {&fm, &lo, &hi, &site}).code(),
              StatusCode::kInvalidArgument);
    float same = 2;
    ASSERT_TRUE(call(device, full_name("random_uniform", device, "m1df32_f32_f32_i64"), {&fm, &same, &same, &site}).ok());
    EXPECT_EQ(f, (std::vector<float>{2, 2, 2}));
  }
}

}  // namespace
}  // namespace kiln::ral
