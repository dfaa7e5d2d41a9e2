// What the library functions share: tensors seen as rows along their last axis, shape checks
// with messages that name the function and the operand, and the order with NaNs last.
#pragma once

#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "kiln/base/log.h"
#include "kiln/base/settings.h"
#include "kiln/base/status.h"
#include "kiln/hal/buffer.h"
#include "kiln/loop/op_eval.h"
#include "kiln/ral/element_types.h"
#include "kiln/ral/memref.h"

namespace kiln::ral::library {

template <typename T, int N>
int64_t row_length(const MemRef<T, N>& m) {
  return m.sizes[N - 1];
}

template <typename T, int N>
int64_t row_count(const MemRef<T, N>& m) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < N; ++d) rows *= m.sizes[static_cast<size_t>(d)];
  return rows;
}

// The shape checks below work on the sizes alone, out of line (rows.cc), so that a function of
// every element type and rank instantiates only the one-line forwarders.
std::string shape_string(std::span<const int64_t> sizes);
// INVALID_ARGUMENT unless a and b (of one rank) agree on every axis but the last, and on the
// last too when `last_too`.
Status check_row_shapes(const char* function, std::span<const int64_t> a, const char* a_name,
                        std::span<const int64_t> b, const char* b_name, bool last_too);
Result<int64_t> check_topk_shapes(std::span<const int64_t> x, std::span<const int64_t> values,
                                  std::span<const int64_t> indices);
Status check_argsort_shapes(std::span<const int64_t> x, std::span<const int64_t> idx);

template <typename T, int N>
std::string shape_string(const MemRef<T, N>& m) {
  return shape_string(std::span<const int64_t>(m.sizes));
}

// check_row_shapes of two memrefs.
template <typename A, typename B, int N>
Status check_rows(const char* function, const MemRef<A, N>& a, const char* a_name, const MemRef<B, N>& b,
                  const char* b_name, bool last_too) {
  return check_row_shapes(function, a.sizes, a_name, b.sizes, b_name, last_too);
}

// The checks of topk(x) -> values, indices: k (the outputs' last axis) is returned.
template <typename T, int N>
Result<int64_t> check_topk(const MemRef<T, N>& x, const MemRef<T, N>& values, const MemRef<int32_t, N>& indices) {
  return check_topk_shapes(x.sizes, values.sizes, indices.sizes);
}

template <typename T, int N>
Status check_argsort(const MemRef<T, N>& x, const MemRef<int32_t, N>& idx) {
  return check_argsort_shapes(x.sizes, idx.sizes);
}

// Calls add.template operator()<T, N>() for every element type T of `Types` and rank 1 to 4,
// stopping at the first error.
template <typename... Types, typename Add>
Status for_each_type_and_rank(Add&& add) {
  Status status;
  auto ranks = [&]<typename T>() {
    if (status.ok()) status = add.template operator()<T, 1>();
    if (status.ok()) status = add.template operator()<T, 2>();
    if (status.ok()) status = add.template operator()<T, 3>();
    if (status.ok()) status = add.template operator()<T, 4>();
  };
  (ranks.template operator()<Types>(), ...);
  return status;
}

// The same over every element type (kiln/ral/element_types.h): the host's sorting functions and
// collectives take them all.
template <typename Add>
Status for_each_element_type(Add&& add) {
  return for_each_type_and_rank<bool, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t, Half,
                                BFloat16, float, double>(std::forward<Add>(add));
}

// The buffer a memref of a device-memory function (Memory::kDevice) stands for, or its data
// pointer.
inline const hal::Buffer& buffer_at(const void* data) { return *static_cast<const hal::Buffer*>(data); }
template <typename T, int N>
const hal::Buffer& buffer_of(const MemRef<T, N>& m) {
  return buffer_at(m.data);
}

// Where a device's gemm runs: its BLAS library on the device (CLBlast, cuBLAS), or OpenBLAS on
// the host over mapped buffers; kLibraryElseHost is the library where it starts, else the host
// (the default, when no variable asks for the library: cuBLAS loads but cannot start on a
// driver or device it does not support).
enum class GemmPlace { kLibrary, kHost, kLibraryElseHost };

// The place the environment variable `variable` asks for (`library` or `host`), nullopt when it
// is unset. INVALID_ARGUMENT naming the variable for another value; `loaded` (the library's load
// status), annotated, when the library is asked for and could not be loaded.
inline Result<std::optional<GemmPlace>> gemm_place_asked(const char* variable, const char* library,
                                                         const Status& loaded) {
  KILN_ASSIGN_OR_RETURN(const std::optional<std::string> asked, setting_choice(variable));
  if (!asked) return std::optional<GemmPlace>();
  if (*asked == "host") return std::optional<GemmPlace>(GemmPlace::kHost);
  if (*asked != library) return internal_error(std::string(variable) + " has no choice '" + *asked + "'");
  if (!loaded.ok()) return loaded.annotate(std::string(variable) + "=" + library);
  return std::optional<GemmPlace>(GemmPlace::kLibrary);
}

// Warns that `function` runs on the host because of `why`, once per process for each reason.
inline void warn_gemm_on_host(const char* function, const Status& why) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(why.message()).second) KILN_LOG(kWarn, std::string(function) + " runs on the host: " + why.message());
}

// Runs a device's `function` (gemm, qgemm) where `where` places it: `host` (over mapped buffers)
// for kHost, else `library`, and `host` after all when the library is UNAVAILABLE under
// kLibraryElseHost, saying why (warn_gemm_on_host).
template <typename Library, typename Host>
Status run_gemm_at(const char* function, GemmPlace where, Library&& library, Host&& host) {
  if (where == GemmPlace::kHost) return host();
  Status done = library();
  if (where != GemmPlace::kLibraryElseHost || done.code() != StatusCode::kUnavailable) return done;
  warn_gemm_on_host(function, done);
  return host();
}

// The checks of random_uniform's range and random_normal's parameters.
template <typename T>
Status check_uniform_range(T lo, T hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) {
    return invalid_argument_error("random_uniform: lo = " + std::to_string(lo) + ", hi = " + std::to_string(hi) +
                                  " is not a finite range with lo <= hi");
  }
  return Status();
}

template <typename T>
Status check_normal_parameters(T mean, T std_dev) {
  if (!std::isfinite(mean) || !std::isfinite(std_dev) || std_dev < 0) {
    return invalid_argument_error("random_normal: mean = " + std::to_string(mean) + ", std = " +
                                  std::to_string(std_dev) + " must be finite, with std >= 0");
  }
  return Status();
}

// What an element is ordered by: its value, in f32 for f16 and bf16 (docs/ral.md).
template <typename T>
auto order_key(T v) {
  if constexpr (std::is_same_v<T, Half>) return static_cast<float>(ir::f16_value(v.bits));
  else if constexpr (std::is_same_v<T, BFloat16>) return static_cast<float>(ir::bf16_value(v.bits));
  else return v;
}
template <typename T>
using OrderKey = decltype(order_key(T{}));
// Whether elements of T are 16-bit floats, ordered by keys made once per row rather than per
// comparison.
template <typename T>
inline constexpr bool kNarrowFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// Strict weak orders with NaNs after every number, ascending or descending (elements of f16 and
// bf16 by their keys).
template <typename T>
bool before(T a, T b, bool descending) {
  if constexpr (kNarrowFloat<T>) {
    return before(order_key(a), order_key(b), descending);
  } else {
    if (is_nan(a)) return false;
    if (is_nan(b)) return true;
    return descending ? b < a : a < b;
  }
}

}  // namespace kiln::ral::library
