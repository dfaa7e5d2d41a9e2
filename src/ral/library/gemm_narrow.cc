// gemm of narrow operands (language version 3): bf16 or f16 operands into an f32 c or one of
// their own type, and i8 x i8 into an i32 c; alpha and beta are f32. qgemm, the quantized
// product: i8 x i8 with f32 scales of op(a)'s rows and op(b)'s columns, into an f32 c
// (c[i, j] = f32(sum) * scale_a[i] * scale_b[j], in that order). The cpu device runs i8
// products through oneDNN (onednn.h: VNNI and AMX where the CPU has them), bf16 ones on kiln's
// own kernels (gemm_bf16.h: AMX, or AVX-512 BF16 on AMD's CPUs) where the CPU has one and the
// product has 16 rows and columns or more, else through oneDNN where it has AMX for them or the
// product is small, and the other bf16 and all f16 ones
// through OpenBLAS's sgemm over f32 copies of the operands (widened()); the opencl device runs
// the same over mapped buffers; interp has plain loops, the reference: f32 sums for bf16/f16,
// i64 sums saturated to i32 for i8. Where oneDNN is missing, cpu and opencl fall back to the
// reference loops and say so once. cuda runs them on the device (cuda_narrow_gemm.h: cuBLAS's
// cublasGemmEx, and kiln's kernels for the i8 products cuBLAS does not take and for qgemm's
// scales) where cuda_gemm places gemm, else over mapped buffers as opencl does.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/base/log.h"
#include "kiln/hal/buffer.h"
#include "kiln/ir/gemm_groups.h"
#include "kiln/loop/op_eval.h"
#include "kiln/ral/element_types.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/cuda_library.h"
#include "ral/library/cuda_narrow_gemm.h"
#include "ral/library/gemm_bf16.h"
#include "ral/library/gemm_shape.h"
#include "ral/library/library.h"
#include "ral/library/narrow_floats.h"
#include "ral/library/onednn.h"
#include "ral/library/openblas.h"
#include "ral/library/rows.h"
#include "ral/library/scratch.h"

namespace kiln::ral::library {

namespace {

// An element's value as the f32 (or i32) it computes in, and a result stored into an element.
float value_of(BFloat16 x) { return static_cast<float>(ir::bf16_value(x.bits)); }
float value_of(Half x) { return static_cast<float>(ir::f16_value(x.bits)); }
float value_of(float x) { return x; }
void store(float v, BFloat16* out) { out->bits = ir::bf16_bits(v); }
void store(float v, Half* out) { out->bits = ir::f16_bits(v); }
void store(float v, float* out) { *out = v; }

// i32 from an f32-scaled i64 sum: rounded to nearest and saturated (oneDNN's rule).
int32_t saturated(double v) {
  if (std::isnan(v)) return 0;
  v = std::nearbyint(v);
  return static_cast<int32_t>(std::clamp(v, -2147483648.0, 2147483647.0));
}

// The reference: plain loops over one product.
template <typename TA, typename TC>
void reference_product(const GemmShape& s, const TA* a, const TA* b, TC* c, float alpha, float beta) {
  auto at = [&](int64_t i, int64_t p) { return s.transpose_a ? a[p * s.m + i] : a[i * s.k + p]; };
  auto bt = [&](int64_t p, int64_t j) { return s.transpose_b ? b[j * s.k + p] : b[p * s.n + j]; };
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      TC& out = c[i * s.n + j];
      if constexpr (std::is_same_v<TA, int8_t>) {
        int64_t sum = 0;
        for (int64_t p = 0; p < s.k; ++p) sum += int64_t{at(i, p)} * int64_t{bt(p, j)};
        // beta = 0 ignores c, as BLAS does.
        const double scaled = double{alpha} * static_cast<double>(sum);
        out = saturated(beta == 0 ? scaled : scaled + double{beta} * out);
      } else {
        float sum = 0;
        for (int64_t p = 0; p < s.k; ++p) sum += value_of(at(i, p)) * value_of(bt(p, j));
        store(beta == 0 ? alpha * sum : alpha * sum + beta * value_of(out), &out);
      }
    }
  }
}

void warn_reference(const Status& why) {
  static std::once_flag warned;
  std::call_once(warned, [&] { KILN_LOG(kWarn, "gemm of narrow operands runs as plain loops: " + why.message()); });
}

// Products of f16 operands, and of bf16 operands where oneDNN has no AMX for them and the product
// is large enough to be bound by arithmetic, run through OpenBLAS's sgemm over f32 copies of the
// operands (onednn.h says why; the copies cost a pass over each operand, which products of fewer
// than about kWidenedFrom rows or columns do not win back).
constexpr int64_t kWidenedFrom = 64;
template <typename TA>
bool widened(const GemmShape& s) {
  if constexpr (std::is_same_v<TA, Half>) return true;
  return std::min(s.m, s.n) >= kWidenedFrom && bf16_kernel() == Bf16Kernel::kNone && !onednn_bf16_on_amx();
}

// Products of bf16 operands run on kiln's own kernels (gemm_bf16.h) where the CPU has one, but for
// those of fewer than a tile's 16 rows or columns, which would be mostly padding. On AMX a 1024^3
// product into an f32 c took 1.05-1.15 ms against 1.15-1.34 ms through oneDNN's AMX kernels (2.1-2.7
// ms in the first runs of half the processes, whose OpenMP thread woke on the caller's core),
// and 1.11 against PyTorch's 1.10 in one `make bench-peers` run (2026-12-01, docs/performance.md).
constexpr int64_t kOwnKernelFrom = 16;
bool on_own_kernel(const GemmShape& s) {
  return std::min(s.m, s.n) >= kOwnKernelFrom && bf16_kernel() != Bf16Kernel::kNone;
}
template <typename TC>
Status own_kernel_product(const ExecutionContext* context, const GemmShape& s, const BFloat16* a, const BFloat16* b,
                          TC* c, float alpha, float beta) {
  return gemm_bf16(bf16_kernel(), context, s, reinterpret_cast<const uint16_t*>(a),
                   reinterpret_cast<const uint16_t*>(b), c, alpha, beta);
}

// `count` narrow floats as f32 in the calling thread's scratch `kSlot`, widened by the context's
// threads; null when the scratch cannot be allocated.
template <int kSlot, typename TA>
const float* widened_copy(const ExecutionContext* context, const TA* in, int64_t count) {
  float* out = scratch<kSlot>(static_cast<size_t>(count));
  if (!out) return nullptr;
  const uint64_t parts = context && count >= (int64_t{1} << 16) ? context->host_threads() : 1;
  if (parts <= 1) {
    widen(in, count, out);
    return out;
  }
  context->host_parallel(parts, [&](uint64_t part) {
    const int64_t begin = count * static_cast<int64_t>(part) / static_cast<int64_t>(parts);
    const int64_t end = count * static_cast<int64_t>(part + 1) / static_cast<int64_t>(parts);
    widen(in + begin, end - begin, out + begin);
  });
  return out;
}

// One product on the host through the libraries, into an f32 c (`c32`, which holds c's values
// when beta != 0).
template <typename TA>
Status library_product(const ExecutionContext* context, const GemmShape& s, const TA* a, const TA* b, float* c32,
                       float alpha, float beta) {
  if constexpr (std::is_same_v<TA, BFloat16>) {
    if (on_own_kernel(s)) return own_kernel_product(context, s, a, b, c32, alpha, beta);
    if (!widened<TA>(s)) {
      return onednn_gemm_bf16(s.transpose_a, s.transpose_b, s.m, s.n, s.k, alpha,
                              reinterpret_cast<const uint16_t*>(a), s.lda(), reinterpret_cast<const uint16_t*>(b),
                              s.ldb(), beta, c32, s.ldc());
    }
  }
  const float* a32 = widened_copy<0>(context, a, s.stride_a());
  const float* b32 = widened_copy<1>(context, b, s.stride_b());
  if (!a32 || !b32) return resource_exhausted_error("gemm: no memory for the f32 copies of its operands");
  return openblas_gemm<float>(s.transpose_a, s.transpose_b, s.m, s.n, s.k, alpha, a32, s.lda(), b32, s.ldb(), beta,
                              c32, s.ldc());
}

// One product into a c of the operands' type: oneDNN rounds its f32 sums into a bf16 c itself
// where it runs the product; otherwise the product is made in f32 and rounded once where it is
// stored.
template <typename TA, typename TC>
Status narrow_result_product(const ExecutionContext* context, const GemmShape& s, const TA* a, const TA* b, TC* c,
                             float alpha, float beta) {
  if constexpr (std::is_same_v<TA, BFloat16> && std::is_same_v<TC, BFloat16>) {
    if (on_own_kernel(s)) return own_kernel_product(context, s, a, b, c, alpha, beta);
    if (alpha == 1 && beta == 0 && !widened<TA>(s)) {
      Status done = onednn_gemm_bf16_to_bf16(s.transpose_a, s.transpose_b, s.m, s.n, s.k,
                                             reinterpret_cast<const uint16_t*>(a), s.lda(),
                                             reinterpret_cast<const uint16_t*>(b), s.ldb(),
                                             reinterpret_cast<uint16_t*>(c), s.ldc());
      if (done.code() != StatusCode::kUnimplemented) return done;
    }
  }
  float* c32 = scratch<2>(static_cast<size_t>(s.stride_c()));
  if (!c32) return resource_exhausted_error("gemm: no memory for the f32 sums of its result");
  if (beta != 0) widen(c, s.stride_c(), c32);
  KILN_RETURN_IF_ERROR(library_product(context, s, a, b, c32, alpha, beta));
  narrow(c32, s.stride_c(), c);
  return Status();
}

// One i8 product through oneDNN with the reference's rounding. oneDNN scales its i32 sums in f32
// and rounds ties away from zero (alpha 2.5 on an odd sum), where kiln rounds the exact value in
// f64 to nearest even, as the reference does: so oneDNN gives the exact sums (alpha 1, beta 0;
// its i32 sums cannot overflow below 2^17 terms of at most 2^14) and kiln scales them.
Status s8_product(const GemmShape& s, const int8_t* a, const int8_t* b, int32_t* c, float alpha, float beta) {
  if (s.k >= (int64_t{1} << 17)) {
    return unavailable_error("an i8 product of 2^17 or more terms can overflow oneDNN's i32 sums");
  }
  if (alpha == 1 && beta == 0) {
    return onednn_gemm_s8(s.transpose_a, s.transpose_b, s.m, s.n, s.k, 1.0f, a, s.lda(), b, s.ldb(), 0.0f, c, s.ldc());
  }
  std::vector<int32_t> sums(static_cast<size_t>(s.m * s.n));
  KILN_RETURN_IF_ERROR(
      onednn_gemm_s8(s.transpose_a, s.transpose_b, s.m, s.n, s.k, 1.0f, a, s.lda(), b, s.ldb(), 0.0f, sums.data(), s.n));
  for (int64_t i = 0; i < s.m * s.n; ++i) {
    const double scaled = double{alpha} * static_cast<double>(sums[static_cast<size_t>(i)]);
    c[i] = saturated(beta == 0 ? scaled : scaled + double{beta} * c[i]);
  }
  return Status();
}

// Every product of `s` on the host: the libraries, or the reference where they are missing.
template <typename TA, typename TC>
Status host_products(const ExecutionContext* context, const GemmShape& s, const TA* a, const TA* b, TC* c, float alpha,
                     float beta) {
  if (s.m == 0 || s.n == 0) return Status();
  for (int64_t p = 0; p < s.batch; ++p) {
    const TA* pa = a + p * s.stride_a();
    const TA* pb = b + p * s.stride_b();
    TC* pc = c + p * s.stride_c();
    Status done;
    if constexpr (std::is_same_v<TA, int8_t>) {
      done = s8_product(s, pa, pb, pc, alpha, beta);
    } else if constexpr (std::is_same_v<TC, float>) {
      done = library_product(context, s, pa, pb, pc, alpha, beta);
    } else {
      done = narrow_result_product(context, s, pa, pb, pc, alpha, beta);
    }
    if (done.code() == StatusCode::kUnavailable) {
      warn_reference(done);
      reference_product(s, pa, pb, pc, alpha, beta);
    } else if (!done.ok()) {
      return done;
    }
  }
  return Status();
}

template <typename TA, typename TC, int RA, int RB, int RC>
Result<GemmShape> narrow_shape(const MemRef<TA, RA>& a, const MemRef<TA, RB>& b, const MemRef<TC, RC>& c,
                               int64_t transpose_a, int64_t transpose_b, int64_t batch) {
  return gemm_shape(a.sizes, b.sizes, c.sizes, transpose_a, transpose_b, batch);
}

template <typename TA, typename TC, int RA, int RB, int RC>
Status gemm_host(ExecutionContext* context, MemRef<TA, RA> a, MemRef<TA, RB> b, MemRef<TC, RC> c, int64_t transpose_a,
                 int64_t transpose_b, float alpha, float beta, int64_t batch) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, narrow_shape(a, b, c, transpose_a, transpose_b, batch));
  return host_products(context, s, a.data, b.data, c.data, alpha, beta);
}

// opencl: the same over mapped buffers (each memref's data is the tensor's hal::Buffer).
template <typename TA, typename TC, int RA, int RB, int RC>
Status gemm_mapped(ExecutionContext* context, MemRef<TA, RA> a, MemRef<TA, RB> b, MemRef<TC, RC> c, int64_t transpose_a,
                   int64_t transpose_b, float alpha, float beta, int64_t batch) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, narrow_shape(a, b, c, transpose_a, transpose_b, batch));
  if (s.m == 0 || s.n == 0 || s.batch == 0) return Status();
  std::array<hal::Mapping, 3> mapped;
  const hal::Buffer* buffers[3] = {&buffer_of(a), &buffer_of(b), &buffer_of(c)};
  for (size_t i = 0; i < 3; ++i) {
    Result<hal::Mapping> m =
        const_cast<hal::Buffer*>(buffers[i])->map(i == 2 ? hal::MapAccess::kReadWrite : hal::MapAccess::kRead);
    if (!m.ok()) return m.status().annotate("gemm: mapping its tensors");
    mapped[i] = std::move(*m);
  }
  return host_products(context, s, static_cast<const TA*>(mapped[0].data()), static_cast<const TA*>(mapped[1].data()),
                       static_cast<TC*>(mapped[2].data()), alpha, beta);
}

// cuda: on the device where cuda_gemm places gemm, else over mapped buffers; k = 0 (c = beta *
// c) on the host, as for f32.
template <typename TA, typename TC, int RA, int RB, int RC>
Status gemm_cuda(ExecutionContext* execution, MemRef<TA, RA> a, MemRef<TA, RB> b, MemRef<TC, RC> c,
                 int64_t transpose_a, int64_t transpose_b, float alpha, float beta, int64_t batch) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, narrow_shape(a, b, c, transpose_a, transpose_b, batch));
  if (s.m == 0 || s.n == 0 || s.batch == 0) return Status();
  KILN_ASSIGN_OR_RETURN(GemmPlace where, cuda_gemm(buffer_of(c)));
  return run_gemm_at(
      "gemm", s.k == 0 ? GemmPlace::kHost : where,
      [&] { return cuda_narrow_gemm<TA, TC>(execution, buffer_of(a), buffer_of(b), buffer_of(c), s, alpha, beta); },
      [&] {
        KILN_RETURN_IF_ERROR(await_call_stream(*execution, buffer_of(c), "gemm"));
        return gemm_mapped(execution, a, b, c, transpose_a, transpose_b, alpha, beta, batch);
      });
}

template <typename TA, typename TC, int RA, int RB, int RC>
Status gemm_reference(ExecutionContext*, MemRef<TA, RA> a, MemRef<TA, RB> b, MemRef<TC, RC> c, int64_t transpose_a,
                      int64_t transpose_b, float alpha, float beta, int64_t batch) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, narrow_shape(a, b, c, transpose_a, transpose_b, batch));
  for (int64_t p = 0; p < s.batch; ++p) {
    reference_product(s, a.data + p * s.stride_a(), b.data + p * s.stride_b(), c.data + p * s.stride_c(), alpha, beta);
  }
  return Status();
}

// qgemm: the i32 products through host_products, then scaled into c.
Status scaled_products(const GemmShape& s, const int8_t* a, const int8_t* b, const float* scale_a,
                       const float* scale_b, float* c, bool reference) {
  std::vector<int32_t> sums(static_cast<size_t>(s.m * s.n));
  if (reference) {
    reference_product(s, a, b, sums.data(), 1.0f, 0.0f);
  } else {
    KILN_RETURN_IF_ERROR(host_products(nullptr, s, a, b, sums.data(), 1.0f, 0.0f));
  }
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      c[i * s.n + j] = static_cast<float>(sums[static_cast<size_t>(i * s.n + j)]) * scale_a[i] * scale_b[j];
    }
  }
  return Status();
}

Result<GemmShape> qgemm_shape(const MemRef<int8_t, 2>& a, const MemRef<int8_t, 2>& b, const MemRef<float, 2>& c,
                              int64_t transpose_a, int64_t transpose_b) {
  return gemm_shape(a.sizes, b.sizes, c.sizes, transpose_a, transpose_b, 0);
}

template <bool kReference>
Status qgemm_host(ExecutionContext*, MemRef<int8_t, 2> a, MemRef<int8_t, 2> b, MemRef<float, 1> scale_a,
                  MemRef<float, 1> scale_b, MemRef<float, 2> c, int64_t transpose_a, int64_t transpose_b) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, qgemm_shape(a, b, c, transpose_a, transpose_b));
  if (s.m == 0 || s.n == 0) return Status();
  return scaled_products(s, a.data, b.data, scale_a.data, scale_b.data, c.data, kReference);
}

Status qgemm_mapped(ExecutionContext*, MemRef<int8_t, 2> a, MemRef<int8_t, 2> b, MemRef<float, 1> scale_a,
                    MemRef<float, 1> scale_b, MemRef<float, 2> c, int64_t transpose_a, int64_t transpose_b) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, qgemm_shape(a, b, c, transpose_a, transpose_b));
  if (s.m == 0 || s.n == 0) return Status();
  std::array<hal::Mapping, 5> mapped;
  const void* data[5] = {a.data, b.data, scale_a.data, scale_b.data, c.data};
  for (size_t i = 0; i < 5; ++i) {
    auto* buffer = const_cast<hal::Buffer*>(reinterpret_cast<const hal::Buffer*>(data[i]));
    Result<hal::Mapping> m = buffer->map(i == 4 ? hal::MapAccess::kReadWrite : hal::MapAccess::kRead);
    if (!m.ok()) return m.status().annotate("qgemm: mapping its tensors");
    mapped[i] = std::move(*m);
  }
  return scaled_products(s, static_cast<const int8_t*>(mapped[0].data()), static_cast<const int8_t*>(mapped[1].data()),
                         static_cast<const float*>(mapped[2].data()), static_cast<const float*>(mapped[3].data()),
                         static_cast<float*>(mapped[4].data()), false);
}

Status qgemm_cuda(ExecutionContext* execution, MemRef<int8_t, 2> a, MemRef<int8_t, 2> b, MemRef<float, 1> scale_a,
                  MemRef<float, 1> scale_b, MemRef<float, 2> c, int64_t transpose_a, int64_t transpose_b) {
  KILN_ASSIGN_OR_RETURN(GemmShape s, qgemm_shape(a, b, c, transpose_a, transpose_b));
  if (s.m == 0 || s.n == 0) return Status();
  KILN_ASSIGN_OR_RETURN(GemmPlace where, cuda_gemm(buffer_of(c)));
  return run_gemm_at(
      "qgemm", s.k == 0 ? GemmPlace::kHost : where,
      [&] {
        return cuda_qgemm(execution, buffer_of(a), buffer_of(b), buffer_of(scale_a), buffer_of(scale_b), buffer_of(c),
                          s);
      },
      [&] {
        KILN_RETURN_IF_ERROR(await_call_stream(*execution, buffer_of(c), "qgemm"));
        return qgemm_mapped(execution, a, b, scale_a, scale_b, c, transpose_a, transpose_b);
      });
}

template <typename TA, typename TC, int RA, int RB, int RC>
Status register_ranks(Registry& registry) {
  if constexpr (!ir::gemm_ranks_possible(RA, RB, RC)) {
    return Status();
  } else {
    KILN_RETURN_IF_ERROR(registry.add(make_function<"gemm", "cpu", &gemm_host<TA, TC, RA, RB, RC>>()));
    KILN_RETURN_IF_ERROR(
        registry.add(make_function<"gemm", "opencl", &gemm_mapped<TA, TC, RA, RB, RC>, Memory::kDevice>()));
    KILN_RETURN_IF_ERROR(
        registry.add(make_function<"gemm", "cuda", &gemm_cuda<TA, TC, RA, RB, RC>, Memory::kDeviceStream>()));
    return registry.add(make_function<"gemm", "interp", &gemm_reference<TA, TC, RA, RB, RC>>());
  }
}

template <typename TA, typename TC>
Status register_all_ranks(Registry& registry) {
  static_assert(ir::kGemmMaxRank == 4, "the ranks below run from 2 to kGemmMaxRank");
  Status status;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((status = status.ok() ? register_ranks<TA, TC, 2 + I / 9, 2 + I / 3 % 3, 2 + I % 3>(registry) : status), ...);
  }(std::make_integer_sequence<int, 27>{});
  return status;
}

}  // namespace

Status register_narrow_gemm(Registry& registry) {
  KILN_RETURN_IF_ERROR((register_all_ranks<BFloat16, float>(registry)));
  KILN_RETURN_IF_ERROR((register_all_ranks<BFloat16, BFloat16>(registry)));
  KILN_RETURN_IF_ERROR((register_all_ranks<Half, float>(registry)));
  KILN_RETURN_IF_ERROR((register_all_ranks<Half, Half>(registry)));
  KILN_RETURN_IF_ERROR((register_all_ranks<int8_t, int32_t>(registry)));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"qgemm", "cpu", &qgemm_host<false>>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"qgemm", "opencl", &qgemm_mapped, Memory::kDevice>()));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"qgemm", "cuda", &qgemm_cuda, Memory::kDeviceStream>()));
  return registry.add(make_function<"qgemm", "interp", &qgemm_host<true>>());
}

}  // namespace kiln::ral::library
