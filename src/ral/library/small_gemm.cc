#include "ral/library/small_gemm.h"

#include <cstring>
#include <vector>

namespace kiln::ral::library {

namespace {

// One body, compiled into functions of two targets (below): GCC and Clang give the vector type
// the registers of the function it is inlined into.
template <typename T>
struct Lanes {
  using V [[gnu::vector_size(32)]] = T;
  static constexpr int64_t kCount = 32 / sizeof(T);
  // Taken by reference and given back through one: a vector passed by value would change the
  // ABI between the two targets.
  [[gnu::always_inline]] static void load(V& v, const T* p) { std::memcpy(&v, p, sizeof v); }
  [[gnu::always_inline]] static T sum(const V& v) {
    T s = 0;
    for (int64_t i = 0; i < kCount; ++i) s += v[i];
    return s;
  }
};

template <typename T>
[[gnu::always_inline]] inline T stored(T product, T alpha, T beta, const T& old) {
  return beta == 0 ? alpha * product : alpha * product + beta * old;
}

// Columns [j, n) of rows [i, i + R) of c, as far as whole blocks of U vectors reach; returns
// where they stopped. op(b) = b: the rows of c are sums of the rows of b scaled by the rows of
// op(a), R·U accumulators held in registers while the rows of b stream past once for R rows.
template <typename T, bool TA, int64_t R, int64_t U>
[[gnu::always_inline]] inline int64_t column_blocks(int64_t i, int64_t j, int64_t n, int64_t k, T alpha, const T* a,
                                                   int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  using L = Lanes<T>;
  using V = typename L::V;
  constexpr int64_t kWidth = U * L::kCount;
  for (; j + kWidth <= n; j += kWidth) {
    V acc[R][U] = {};
    for (int64_t p = 0; p < k; ++p) {
      V bv[U];
#pragma GCC unroll 8
      for (int64_t u = 0; u < U; ++u) L::load(bv[u], b + p * ldb + j + u * L::kCount);
#pragma GCC unroll 4
      for (int64_t r = 0; r < R; ++r) {
        const T x = TA ? a[p * lda + i + r] : a[(i + r) * lda + p];
#pragma GCC unroll 8
        for (int64_t u = 0; u < U; ++u) acc[r][u] += x * bv[u];
      }
    }
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t u = 0; u < U; ++u) {
        for (int64_t l = 0; l < L::kCount; ++l) {
          T& out = c[(i + r) * ldc + j + u * L::kCount + l];
          out = stored(acc[r][u][l], alpha, beta, out);
        }
      }
    }
  }
  return j;
}

// Rows [i, i + R) of c: blocks of U vectors, then single vectors, then single columns.
template <typename T, bool TA, int64_t R, int64_t U>
[[gnu::always_inline]] inline void row_group(int64_t i, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                                             const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  int64_t j = column_blocks<T, TA, R, U>(i, 0, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  j = column_blocks<T, TA, R, 1>(i, j, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  for (; j < n; ++j) {
    for (int64_t r = 0; r < R; ++r) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += (TA ? a[p * lda + i + r] : a[(i + r) * lda + p]) * b[p * ldb + j];
      c[(i + r) * ldc + j] = stored(acc, alpha, beta, c[(i + r) * ldc + j]);
    }
  }
}

// op(b) = b: rows of c four at a time (8 accumulators), then two (8), then one (8).
template <typename T, bool TA>
[[gnu::always_inline]] inline void rows_of_b(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                                             const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) row_group<T, TA, 4, 2>(i, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  for (; i + 2 <= m; i += 2) row_group<T, TA, 2, 4>(i, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  for (; i < m; ++i) row_group<T, TA, 1, 8>(i, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// op(b) = bᵀ: each element of c is a dot product of a row of op(a) with a row of b, four rows of
// b at a time so that each vector of op(a) is loaded once for four. A column of a (op(a) = aᵀ) is
// first copied into a row.
template <typename T>
[[gnu::always_inline]] inline void dots_with_b(bool transpose_a, int64_t m, int64_t n, int64_t k, T alpha,
                                               const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
                                               int64_t ldc) {
  using L = Lanes<T>;
  using V = typename L::V;
  constexpr int64_t kRows = 4;
  thread_local std::vector<T> column;
  const int64_t vector_end = k - k % L::kCount;
  for (int64_t i = 0; i < m; ++i) {
    const T* x = a + i * lda;
    if (transpose_a) {
      column.resize(static_cast<size_t>(k));
      for (int64_t p = 0; p < k; ++p) column[static_cast<size_t>(p)] = a[p * lda + i];
      x = column.data();
    }
    T* c_row = c + i * ldc;
    int64_t j = 0;
    for (; j + kRows <= n; j += kRows) {
      V acc[kRows] = {};
      for (int64_t p = 0; p < vector_end; p += L::kCount) {
        V xv;
        L::load(xv, x + p);
#pragma GCC unroll 4
        for (int64_t r = 0; r < kRows; ++r) {
          V bv;
          L::load(bv, b + (j + r) * ldb + p);
          acc[r] += xv * bv;
        }
      }
      for (int64_t r = 0; r < kRows; ++r) {
        T s = L::sum(acc[r]);
        for (int64_t p = vector_end; p < k; ++p) s += x[p] * b[(j + r) * ldb + p];
        c_row[j + r] = stored(s, alpha, beta, c_row[j + r]);
      }
    }
    for (; j < n; ++j) {
      V acc = {};
      for (int64_t p = 0; p < vector_end; p += L::kCount) {
        V xv, bv;
        L::load(xv, x + p);
        L::load(bv, b + j * ldb + p);
        acc += xv * bv;
      }
      T s = L::sum(acc);
      for (int64_t p = vector_end; p < k; ++p) s += x[p] * b[j * ldb + p];
      c_row[j] = stored(s, alpha, beta, c_row[j]);
    }
  }
}

template <typename T>
[[gnu::always_inline]] inline void product(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                                           T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
                                           int64_t ldc) {
  if (alpha == 0 || k == 0) {  // c = beta * c, as BLAS: a and b are not read
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? T(0) : beta * c[i * ldc + j];
    }
  } else if (transpose_b) {
    dots_with_b(transpose_a, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if (transpose_a) {
    rows_of_b<T, true>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    rows_of_b<T, false>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

template <typename T>
__attribute__((target("avx2,fma"))) void product_avx2(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                                                      int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                                                      int64_t ldb, T beta, T* c, int64_t ldc) {
  product(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void product_generic(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                     int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  product(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace

template <typename T>
void small_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  (has_avx2_fma() ? product_avx2<T> : product_generic<T>)(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb,
                                                         beta, c, ldc);
}

template void small_gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                int64_t, float, float*, int64_t);
template void small_gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                 const double*, int64_t, double, double*, int64_t);

}  // namespace kiln::ral::library
