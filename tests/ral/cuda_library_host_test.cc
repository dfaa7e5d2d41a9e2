// The cuda device's library functions end to end without a GPU: the registered functions (found
// by their full names, as a call statement finds them) run through CudaLibrary on the driver API
// stand-in (common/cuda_fake_api.h), whose module holds the real library kernels built as C++
// (common/cuda_host_kernels.h). So the host side is what runs for real: the scratch memory, the
// launch parameters as the kernels read them, the bitonic stages, the stream and its waits, the
// resource's lifetime and that every call is made with the context pushed. The results must be the
// cpu device's, bit for bit. NVRTC must be present (CudaLibrary builds its module with it).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "common/cuda_fake_api.h"
#include "common/cuda_host_kernels.h"
#include "common/same_bits.h"
#include "common/scoped_env.h"
#include "drivers/cuda/cu_allocator.h"
#include "drivers/cuda/cu_api.h"
#include "drivers/cuda/nvrtc.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/cublas.h"
#include "ral/library/cuda_kernels.h"
#include "ral/library/cuda_library.h"

namespace kiln::ral::library {
namespace {

using cuda::CUdeviceptr;
using cuda::CUstream;
using cuda::fake::Fake;
using u64 = unsigned long long;

// A stand-in kernel that reads its parameters as the kernel's types A... and runs the host-built
// kernel over the launch's grid. A pointer parameter arrives as a CUdeviceptr, which in the
// stand-in is the host address.
template <typename... A>
Fake::ExtraKernel host_kernel(test::HostKernels* kernels, std::string name) {
  return [kernels, name](void** params, unsigned grid, unsigned block) -> std::function<void()> {
    std::tuple<A...> args;
    size_t i = 0;
    std::apply([&](auto&... arg) { ((std::memcpy(&arg, params[i++], sizeof arg)), ...); }, args);
    return [kernels, name, args, grid, block] {
      std::apply([&](auto... arg) { kernels->launch_grid(name, grid, block, arg...); }, args);
    };
  };
}

template <typename T>
void add_sort_kernels(test::HostKernels* kernels, const std::string& s) {
  Fake::extra_kernels["kiln_sort_load_" + s] = host_kernel<const T*, T*, unsigned*, u64, u64, u64>(kernels, "kiln_sort_load_" + s);
  Fake::extra_kernels["kiln_sort_step_" + s] =
      host_kernel<T*, unsigned*, u64, u64, u64, u64, u64, int>(kernels, "kiln_sort_step_" + s);
  Fake::extra_kernels["kiln_sort_store_" + s] =
      host_kernel<const T*, const unsigned*, T*, int*, u64, u64, u64>(kernels, "kiln_sort_store_" + s);
}

void add_gemm_kernels(test::HostKernels* kernels) {
  Fake::extra_kernels["kiln_gemm_i8"] =
      host_kernel<const signed char*, const signed char*, int*, u64, u64, u64, u64, int, int, float, float>(
          kernels, "kiln_gemm_i8");
  Fake::extra_kernels["kiln_qgemm_scale"] =
      host_kernel<const int*, const float*, const float*, float*, u64, u64>(kernels, "kiln_qgemm_scale");
}

template <typename T>
void add_random_kernels(test::HostKernels* kernels, const std::string& s) {
  for (const std::string f : {"kiln_random_uniform_", "kiln_random_normal_"}) {
    Fake::extra_kernels[f + s] = host_kernel<T*, u64, unsigned, unsigned, unsigned, unsigned, T, T>(kernels, f + s);
  }
}

class CudaLibraryHostTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kernels_ = new test::HostKernels();
    built_ = new Status(kernels_->build());
    add_sort_kernels<float>(kernels_, "f32");
    add_sort_kernels<double>(kernels_, "f64");
    add_sort_kernels<int>(kernels_, "i32");
    add_random_kernels<float>(kernels_, "f32");
    add_random_kernels<double>(kernels_, "f64");
    add_gemm_kernels(kernels_);
  }
  static void TearDownTestSuite() {
    Fake::extra_kernels.clear();
    delete kernels_;
    delete built_;
  }

  void SetUp() override {
    if (Status nvrtc = cuda::nvrtc_available(); !nvrtc.ok()) GTEST_SKIP() << "no NVRTC: " << nvrtc;
    ASSERT_TRUE(built_->ok()) << *built_;
    Fake::misuse = 0;
    cuda::CuDeviceRecord record;
    record.name = "fake";
    record.compute_major = 9;
    record.memory_pools = true;  // as on every GPU kiln supports (CUDA 11.2 and later)
    record.info.capabilities.total_memory = uint64_t{80} << 30;
    record.info.name = "cuda:0";
    record.info.driver = "cuda";
    Result<std::shared_ptr<cuda::CuContext>> context = cuda::CuContext::create(cuda::fake::fake_api(), record);
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = *context;
    allocator_ = std::make_unique<cuda::CuAllocator>(context_, this);
  }
  void TearDown() override {
    allocator_.reset();
    context_.reset();
    EXPECT_EQ(Fake::misuse.load(), 0) << "a CUDA call without the context pushed";
  }

  // A "device" buffer holding `values`; in the stand-in its memory is host memory.
  template <typename T>
  hal::BufferRef buffer(const std::vector<T>& values) {
    Result<hal::BufferRef> b = allocator_->allocate({}, std::max<size_t>(values.size() * sizeof(T), 4));
    EXPECT_TRUE(b.ok()) << b.status();
    if (!values.empty()) std::memcpy(host(*b), values.data(), values.size() * sizeof(T));
    return *b;
  }
  static void* host(const hal::BufferRef& b) { return cuda::fake::address(cuda::buffer_pointer(*b)); }
  template <typename T>
  static std::vector<T> contents(const hal::BufferRef& b, size_t count) {
    std::vector<T> out(count);
    if (count) std::memcpy(out.data(), host(b), count * sizeof(T));
    return out;
  }

  // One call of `name` in an execution of `context`, or of a "cuda" context of its own (whose
  // CudaLibrary then goes with it).
  static Status call(const std::string& name, std::vector<void*> args, uint64_t seed = 0, uint64_t run = 0,
                     Context* context = nullptr) {
    std::optional<Context> own;
    if (!context) context = &own.emplace("cuda");
    Status status;
    {
      ExecutionContext execution(*context, seed, run);
      args.insert(args.begin(), nullptr);
      execution.call(name.c_str(), args.data());
      status = execution.finish();
    }
    if (own) own->finish();
    return status;
  }
  static void call_cpu(const std::string& name, std::vector<void*> args, uint64_t seed = 0, uint64_t run = 0) {
    call_on("cpu", name, std::move(args), seed, run);
  }
  // One call of `device`'s function `name` (host memory), which must succeed.
  static void call_on(const char* device, const std::string& name, std::vector<void*> args, uint64_t seed = 0,
                      uint64_t run = 0) {
    Context context(device);
    ExecutionContext execution(context, seed, run);
    args.insert(args.begin(), nullptr);
    execution.call(name.c_str(), args.data());
    const Status status = execution.finish();
    ASSERT_TRUE(status.ok()) << status;
  }

  static test::HostKernels* kernels_;
  static Status* built_;
  std::shared_ptr<cuda::CuContext> context_;
  std::unique_ptr<cuda::CuAllocator> allocator_;
};
test::HostKernels* CudaLibraryHostTest::kernels_ = nullptr;
Status* CudaLibraryHostTest::built_ = nullptr;

using test::same_bits;

// cuBLAS that loads but cannot start (here: no CUDA driver for it to start on) leaves gemm to the
// host over mapped buffers, with a warning, unless KILN_CUDA_GEMM=cublas asked for cuBLAS.
TEST_F(CudaLibraryHostTest, GemmFallsBackToTheHostWhereCublasCannotStart) {
  if (cuda::driver_version().ok()) GTEST_SKIP() << "a CUDA driver is present: there cuBLAS starts on the real device";
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, 0, 1, 1, 1};  // 2x3 @ 3x2
  hal::BufferRef ab = buffer(a), bb = buffer(b), cb = buffer(std::vector<float>(4, -1.0f));
  const auto as = [](const hal::BufferRef& x) { return reinterpret_cast<float*>(x.get()); };
  MemRef<float, 2> am{as(ab), {2, 3}}, bm{as(bb), {3, 2}}, cm{as(cb), {2, 2}};
  int64_t no = 0;
  float alpha = 1, beta = 0;
  const std::string gemm = "gemm___cuda___pvoid_m2df32_m2df32_m2df32_i64_i64_f32_f32_i64___void";
  Status done = call(gemm, {&am, &bm, &cm, &no, &no, &alpha, &beta, &no});
  ASSERT_TRUE(done.ok()) << done;
  EXPECT_EQ(contents<float>(cb, 4), (std::vector<float>{4, 5, 10, 11}));
  test::ScopedEnv asked("KILN_CUDA_GEMM", "cublas");
  Status refused = call(gemm, {&am, &bm, &cm, &no, &no, &alpha, &beta, &no});
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused;
  EXPECT_NE(refused.message().find("cuBLAS"), std::string::npos) << refused;
}

// The same for the narrow products, which need cuBLAS too: bf16 operands (cublasGemmEx) and a
// qgemm whose i8 product cuBLAS would take (rows of 4), on the host with the reference's results.
TEST_F(CudaLibraryHostTest, NarrowProductsFallBackToTheHostWhereCublasCannotStart) {
  if (cuda::driver_version().ok()) GTEST_SKIP() << "a CUDA driver is present: there cuBLAS starts on the real device";
  const std::vector<BFloat16> a = {{0x3f80}, {0x4000}, {0x4040}, {0x4080}, {0x40a0}, {0x40c0}};  // 1 to 6
  const std::vector<BFloat16> b = {{0x3f80}, {0}, {0}, {0x3f80}, {0x3f80}, {0x3f80}};           // 1 0; 0 1; 1 1
  hal::BufferRef ab = buffer(a), bb = buffer(b), cb = buffer(std::vector<float>(4, -1.0f));
  MemRef<BFloat16, 2> am{reinterpret_cast<BFloat16*>(ab.get()), {2, 3}}, bm{reinterpret_cast<BFloat16*>(bb.get()), {3, 2}};
  MemRef<float, 2> cm{reinterpret_cast<float*>(cb.get()), {2, 2}};
  int64_t no = 0;
  float alpha = 1, beta = 0;
  const std::string gemm = "gemm___cuda___pvoid_m2dbf16_m2dbf16_m2df32_i64_i64_f32_f32_i64___void";
  Status done = call(gemm, {&am, &bm, &cm, &no, &no, &alpha, &beta, &no});
  ASSERT_TRUE(done.ok()) << done;
  EXPECT_EQ(contents<float>(cb, 4), (std::vector<float>{4, 5, 10, 11}));

  const int64_t m = 3, n = 4, k = 8;
  std::vector<int8_t> qa(m * k), qb(k * n);
  for (size_t i = 0; i < qa.size(); ++i) qa[i] = static_cast<int8_t>(static_cast<int>(i * 29 % 255) - 127);
  for (size_t i = 0; i < qb.size(); ++i) qb[i] = static_cast<int8_t>(static_cast<int>(i * 53 % 255) - 127);
  std::vector<float> sa = {0.5f, 0.25f, 3.0f}, sb = {0.1f, 0.2f, 0.3f, 0.7f}, want(m * n);
  hal::BufferRef qab = buffer(qa), qbb = buffer(qb), sab = buffer(sa), sbb = buffer(sb), qcb = buffer(want);
  MemRef<int8_t, 2> qam{reinterpret_cast<int8_t*>(qab.get()), {m, k}}, qbm{reinterpret_cast<int8_t*>(qbb.get()), {k, n}};
  MemRef<float, 1> sam{reinterpret_cast<float*>(sab.get()), {m}}, sbm{reinterpret_cast<float*>(sbb.get()), {n}};
  MemRef<float, 2> qcm{reinterpret_cast<float*>(qcb.get()), {m, n}};
  const std::string qgemm = "qgemm___cuda___pvoid_m2di8_m2di8_m1df32_m1df32_m2df32_i64_i64___void";
  const int launches_before = Fake::launches;
  done = call(qgemm, {&qam, &qbm, &sam, &sbm, &qcm, &no, &no});
  ASSERT_TRUE(done.ok()) << done;
  EXPECT_EQ(Fake::launches, launches_before);
  MemRef<int8_t, 2> ham{qa.data(), {m, k}}, hbm{qb.data(), {k, n}};
  MemRef<float, 1> hsa{sa.data(), {m}}, hsb{sb.data(), {n}};
  MemRef<float, 2> hcm{want.data(), {m, n}};
  call_on("interp", "qgemm___interp___pvoid_m2di8_m2di8_m1df32_m1df32_m2df32_i64_i64___void",
          {&ham, &hbm, &hsa, &hsb, &hcm, &no, &no});
  EXPECT_TRUE(same_bits(contents<float>(qcb, want.size()), want));

  test::ScopedEnv asked("KILN_CUDA_GEMM", "cublas");
  Status refused = call(gemm, {&am, &bm, &cm, &no, &no, &alpha, &beta, &no});
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused;
  refused = call(qgemm, {&qam, &qbm, &sam, &sbm, &qcm, &no, &no});
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused;
}

// i8 products that cuBLAS does not take (here rows of a of 3 elements, and alpha != 1) run on the
// device as kiln_gemm_i8, without cuBLAS; qgemm's sums too, then its scales as kiln_qgemm_scale.
// The reference's results bit for bit; KILN_CUDA_GEMM=host runs them over mapped buffers instead.
TEST_F(CudaLibraryHostTest, I8ProductsCublasDoesNotTakeRunAsKilnsKernels) {
  if (!cublas().status.ok()) GTEST_SKIP() << "without cuBLAS, gemm on cuda runs on the host: " << cublas().status;
  const int64_t batch = 2, m = 5, n = 7, k = 3;
  std::vector<int8_t> a(batch * m * k), b(batch * k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int8_t>(i % 5 == 0 ? -128 : static_cast<int>(i * 37 % 256) - 128);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int8_t>(i % 4 == 0 ? 127 : static_cast<int>(i * 91 % 256) - 128);
  std::vector<int32_t> c0(batch * m * n);
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = static_cast<int32_t>(i * 7919 % 20000) - 10000;
  std::vector<int32_t> want = c0;
  // Integers, so that nothing rounds: the cpu device (oneDNN, KILN_CUDA_GEMM=host) rounds ties
  // away from zero where the reference and kiln_gemm_i8 round them to even (CudaKernelsTest).
  float alpha = 3, beta = -2;
  int64_t no = 0, one = 1;
  MemRef<int8_t, 3> ham{a.data(), {batch, m, k}}, hbm{b.data(), {batch, k, n}};
  MemRef<int32_t, 3> hcm{want.data(), {batch, m, n}};
  call_on("interp", "gemm___interp___pvoid_m3di8_m3di8_m3di32_i64_i64_f32_f32_i64___void",
          {&ham, &hbm, &hcm, &no, &no, &alpha, &beta, &one});
  for (const char* place : {"", "host"}) {
    std::optional<test::ScopedEnv> asked;
    if (*place) asked.emplace("KILN_CUDA_GEMM", place);
    hal::BufferRef ab = buffer(a), bb = buffer(b), cb = buffer(c0);
    MemRef<int8_t, 3> am{reinterpret_cast<int8_t*>(ab.get()), {batch, m, k}}, bm{reinterpret_cast<int8_t*>(bb.get()), {batch, k, n}};
    MemRef<int32_t, 3> cm{reinterpret_cast<int32_t*>(cb.get()), {batch, m, n}};
    const int launches_before = Fake::launches;
    Status done = call("gemm___cuda___pvoid_m3di8_m3di8_m3di32_i64_i64_f32_f32_i64___void",
                       {&am, &bm, &cm, &no, &no, &alpha, &beta, &one});
    ASSERT_TRUE(done.ok()) << done;
    EXPECT_EQ(Fake::launches - launches_before, *place ? 0 : 1) << place;
    EXPECT_EQ(contents<int32_t>(cb, c0.size()), want) << place;
  }

  // qgemm of the first product, transposed b.
  std::vector<int8_t> bt(static_cast<size_t>(n * k));
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) bt[static_cast<size_t>(j * k + p)] = b[static_cast<size_t>(p * n + j)];
  }
  std::vector<float> sa(m), sb(n), scaled(m * n);
  for (int64_t i = 0; i < m; ++i) sa[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i + 1);
  for (int64_t j = 0; j < n; ++j) sb[static_cast<size_t>(j)] = 1.0f / static_cast<float>(j + 3);
  MemRef<int8_t, 2> qam{a.data(), {m, k}}, qbm{bt.data(), {n, k}};
  MemRef<float, 1> sam{sa.data(), {m}}, sbm{sb.data(), {n}};
  MemRef<float, 2> qcm{scaled.data(), {m, n}};
  call_on("interp", "qgemm___interp___pvoid_m2di8_m2di8_m1df32_m1df32_m2df32_i64_i64___void",
          {&qam, &qbm, &sam, &sbm, &qcm, &no, &one});
  hal::BufferRef ab = buffer(a), bb = buffer(bt), sab = buffer(sa), sbb = buffer(sb), cb = buffer(std::vector<float>(m * n));
  MemRef<int8_t, 2> am{reinterpret_cast<int8_t*>(ab.get()), {m, k}}, bm{reinterpret_cast<int8_t*>(bb.get()), {n, k}};
  MemRef<float, 1> dsa{reinterpret_cast<float*>(sab.get()), {m}}, dsb{reinterpret_cast<float*>(sbb.get()), {n}};
  MemRef<float, 2> cm{reinterpret_cast<float*>(cb.get()), {m, n}};
  const int launches_before = Fake::launches;
  Status done = call("qgemm___cuda___pvoid_m2di8_m2di8_m1df32_m1df32_m2df32_i64_i64___void",
                     {&am, &bm, &dsa, &dsb, &cm, &no, &one});
  ASSERT_TRUE(done.ok()) << done;
  EXPECT_EQ(Fake::launches - launches_before, 2);  // the sums, the scales
  EXPECT_TRUE(same_bits(contents<float>(cb, scaled.size()), scaled));
}

TEST_F(CudaLibraryHostTest, SortArgsortAndTopkAreTheCpuDevicesBitForBit) {
  const int64_t rows = 3, n = 37, k = 5;
  std::vector<float> x(static_cast<size_t>(rows * n));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = i % 11 == 0 ? std::numeric_limits<float>::quiet_NaN() : i % 7 == 0 ? -0.0f : static_cast<float>((i * 13) % 9) - 4;
  }
  hal::BufferRef xb = buffer(x), yb = buffer(std::vector<float>(x.size())), ib = buffer(std::vector<int32_t>(x.size()));
  hal::BufferRef vb = buffer(std::vector<float>(rows * k)), kb = buffer(std::vector<int32_t>(rows * k));
  const auto as = [](const hal::BufferRef& b) { return reinterpret_cast<float*>(b.get()); };
  // Their scratch memory comes from the context's pool in stream order: no cuMemAlloc or
  // cuMemFree, which wait for the whole device.
  const int device_syncs = Fake::device_syncs;
  for (int64_t descending : {0, 1}) {
    MemRef<float, 2> xm{as(xb), {rows, n}}, ym{as(yb), {rows, n}};
    MemRef<int32_t, 2> im{reinterpret_cast<int32_t*>(ib.get()), {rows, n}};
    const int launches_before = Fake::launches;
    ASSERT_TRUE(call("sort___cuda___pvoid_m2df32_m2df32_i64___void", {&xm, &ym, &descending}).ok());
    // Load, the network's stages, store.
    EXPECT_EQ(Fake::launches - launches_before, static_cast<int>(2 + bitonic_stages(std::bit_ceil(uint64_t{n})).size()));
    ASSERT_TRUE(call("argsort___cuda___pvoid_m2df32_m2di32_i64___void", {&xm, &im, &descending}).ok());
    std::vector<float> want(x.size());
    std::vector<int32_t> order(x.size());
    MemRef<float, 2> xh{x.data(), {rows, n}}, wh{want.data(), {rows, n}};
    MemRef<int32_t, 2> oh{order.data(), {rows, n}};
    call_cpu("sort___cpu___pvoid_m2df32_m2df32_i64___void", {&xh, &wh, &descending});
    call_cpu("argsort___cpu___pvoid_m2df32_m2di32_i64___void", {&xh, &oh, &descending});
    EXPECT_TRUE(same_bits(contents<float>(yb, x.size()), want)) << "descending " << descending;
    EXPECT_EQ(contents<int32_t>(ib, x.size()), order) << "descending " << descending;
  }
  MemRef<float, 2> xm{as(xb), {rows, n}}, vm{as(vb), {rows, k}};
  MemRef<int32_t, 2> km{reinterpret_cast<int32_t*>(kb.get()), {rows, k}};
  ASSERT_TRUE(call("topk___cuda___pvoid_m2df32_m2df32_m2di32___void", {&xm, &vm, &km}).ok());
  std::vector<float> values(static_cast<size_t>(rows * k));
  std::vector<int32_t> indices(values.size());
  MemRef<float, 2> xh{x.data(), {rows, n}}, vh{values.data(), {rows, k}};
  MemRef<int32_t, 2> kh{indices.data(), {rows, k}};
  call_cpu("topk___cpu___pvoid_m2df32_m2df32_m2di32___void", {&xh, &vh, &kh});
  EXPECT_TRUE(same_bits(contents<float>(vb, values.size()), values));
  EXPECT_EQ(contents<int32_t>(kb, indices.size()), indices);
  EXPECT_EQ(Fake::device_syncs, device_syncs) << "scratch memory through cuMemAlloc or cuMemFree";
}

TEST_F(CudaLibraryHostTest, IntegerAndDoubleSortsOfOtherRanks) {
  std::vector<int32_t> xi = {5, INT32_MIN, 3, 3, INT32_MAX, -1, 0, 3, 2, 9, -7, 4};
  hal::BufferRef xb = buffer(xi), yb = buffer(std::vector<int32_t>(xi.size()));
  MemRef<int32_t, 3> xm{reinterpret_cast<int32_t*>(xb.get()), {2, 2, 3}}, ym{reinterpret_cast<int32_t*>(yb.get()), {2, 2, 3}};
  int64_t descending = 1;
  ASSERT_TRUE(call("sort___cuda___pvoid_m3di32_m3di32_i64___void", {&xm, &ym, &descending}).ok());
  std::vector<int32_t> want(xi.size());
  MemRef<int32_t, 3> xh{xi.data(), {2, 2, 3}}, wh{want.data(), {2, 2, 3}};
  call_cpu("sort___cpu___pvoid_m3di32_m3di32_i64___void", {&xh, &wh, &descending});
  EXPECT_EQ(contents<int32_t>(yb, xi.size()), want);

  std::vector<double> xd = {0.5, -0.0, 0.0, std::nan(""), -2, 0.5, 1e300, -1e-300};
  hal::BufferRef db = buffer(xd), ob = buffer(std::vector<int32_t>(xd.size()));
  MemRef<double, 1> dm{reinterpret_cast<double*>(db.get()), {8}};
  MemRef<int32_t, 1> om{reinterpret_cast<int32_t*>(ob.get()), {8}};
  int64_t ascending = 0;
  ASSERT_TRUE(call("argsort___cuda___pvoid_m1df64_m1di32_i64___void", {&dm, &om, &ascending}).ok());
  EXPECT_EQ(contents<int32_t>(ob, 8), (std::vector<int32_t>{4, 7, 1, 2, 0, 5, 6, 3}));
}

// Calls in one RAL context share its CudaLibrary, whose scratch memory is kept between them and
// grown for a longer row.
TEST_F(CudaLibraryHostTest, CallsOfOneContextShareTheLibrary) {
  Context context("cuda");
  for (int64_t n : {37, 300, 5, 300}) {
    std::vector<double> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<double>((i * 37 + n) % 23) - 11;
    hal::BufferRef xb = buffer(x), yb = buffer(std::vector<double>(x.size()));
    MemRef<double, 1> xm{reinterpret_cast<double*>(xb.get()), {n}}, ym{reinterpret_cast<double*>(yb.get()), {n}};
    int64_t descending = n % 2;
    ASSERT_TRUE(call("sort___cuda___pvoid_m1df64_m1df64_i64___void", {&xm, &ym, &descending}, 0, 0, &context).ok());
    std::vector<double> want = x;
    std::stable_sort(want.begin(), want.end(), [&](double a, double b) { return descending ? a > b : a < b; });
    EXPECT_EQ(contents<double>(yb, x.size()), want) << "n " << n;
  }
  context.finish();
}

// A fault inside a library call (here a kernel of the library's module that traps) marks the
// device lost, as a fault in a queue's kernel does: the call fails with it, and so does the next
// call, without running.
TEST_F(CudaLibraryHostTest, AFaultInALibraryCallMarksTheDeviceLost) {
  {
    CudaLibrary library(context_);
    Context ral_context("cuda");
    ExecutionContext execution(ral_context);
    std::vector<uint32_t> ring(size_t{256} * 8, 0);  // the status ring the stand-in's kernels check
    const CUdeviceptr ring_address = cuda::fake::device_address(ring.data());
    const uint32_t tag = 1, command = 0;
    Status trapped = library.run(execution, "a trapping call", [&] {
      return library.launch("trap_kernel", 1, {&ring_address, &tag, &command});
    });
    EXPECT_FALSE(trapped.ok());
    EXPECT_NE(trapped.message().find("cuda:0 is lost"), std::string::npos) << trapped;
    EXPECT_FALSE(context_->lost().ok());
    const int launches = Fake::launches;
    Status next = library.run(execution, "the next call", [&] { return library.launch("trap_kernel", 1, {&ring_address, &tag, &command}); });
    EXPECT_FALSE(next.ok());
    EXPECT_EQ(Fake::launches, launches) << "a call ran on a lost device";
  }
  Fake::clear_fault();
}

// A call the runtime runs in a queue's order (ExecutionContext::device_stream) puts its work on
// that queue's stream and returns without waiting for it: while the stream is held, the call has
// returned and its output is unwritten; once the stream runs, the output is the cpu device's.
// Calls on two streams keep scratch memory of their own (held, the first call's keys would be
// overwritten by the second's if they shared it), and a call that grows a stream's scratch frees
// the old block after the work already on the stream.
TEST_F(CudaLibraryHostTest, ACallInAQueuesOrderQueuesOnItsStreamWithoutWaiting) {
  Context context("cuda");
  CUstream streams[2] = {nullptr, nullptr};
  {
    cuda::ContextScope scope(context_->target());
    ASSERT_TRUE(scope.status("the test's streams").ok());
    for (CUstream& s : streams) {
      ASSERT_EQ(context_->api().StreamCreate(&s, cuda::CU_STREAM_NON_BLOCKING), cuda::CUDA_SUCCESS);
    }
  }
  struct Case {
    std::vector<double> x;
    hal::BufferRef xb, yb;
  };
  std::vector<Case> cases;
  // Held until `go`: a call that waited for its stream would never return.
  std::promise<void> go;
  std::shared_future<void> held = go.get_future().share();
  for (CUstream s : streams) cuda::fake::stream_of(s)->push([held] { held.wait(); });
  for (int64_t n : {37, 300, 1000}) {  // streams 0, 1, then 0 again with more scratch
    Case c;
    for (int64_t i = 0; i < n; ++i) c.x.push_back(static_cast<double>((i * 37 + n) % 101) - 50);
    c.xb = buffer(c.x);
    c.yb = buffer(std::vector<double>(c.x.size(), -1.0));
    MemRef<double, 1> xm{reinterpret_cast<double*>(c.xb.get()), {n}}, ym{reinterpret_cast<double*>(c.yb.get()), {n}};
    int64_t descending = 0;
    ExecutionContext execution(context);
    execution.set_device_stream(streams[cases.size() % 2]);
    std::vector<void*> args = {nullptr, &xm, &ym, &descending};
    execution.call("sort___cuda___pvoid_m1df64_m1df64_i64___void", args.data());
    ASSERT_TRUE(execution.finish().ok()) << execution.status();
    EXPECT_EQ(contents<double>(c.yb, c.x.size()), std::vector<double>(c.x.size(), -1.0))
        << "the call ran before the work ahead of it on the queue's stream";
    cases.push_back(std::move(c));
  }
  go.set_value();
  {
    cuda::ContextScope scope(context_->target());
    for (CUstream s : streams) {
      EXPECT_EQ(context_->api().StreamSynchronize(s), cuda::CUDA_SUCCESS);
      EXPECT_EQ(context_->api().StreamDestroy(s), cuda::CUDA_SUCCESS);
    }
  }
  for (const Case& c : cases) {
    std::vector<double> want = c.x;
    std::stable_sort(want.begin(), want.end());
    EXPECT_EQ(contents<double>(c.yb, c.x.size()), want) << "n " << c.x.size();
  }
  context.finish();
}

TEST_F(CudaLibraryHostTest, RandomNumbersAreTheCpuDevicesBitForBit) {
  const uint64_t seed = 0xFEEDFACE12345678ull, run = 7;
  int64_t site = 2;
  const int64_t count = 1001;
  hal::BufferRef fb = buffer(std::vector<float>(count)), db = buffer(std::vector<double>(count));
  MemRef<float, 1> fm{reinterpret_cast<float*>(fb.get()), {count}};
  MemRef<double, 1> dm{reinterpret_cast<double*>(db.get()), {count}};
  float lo = -1, hi = 2;
  double mean = 3, sd = 0.5;
  ASSERT_TRUE(call("random_uniform___cuda___pvoid_m1df32_f32_f32_i64___void", {&fm, &lo, &hi, &site}, seed, run).ok());
  ASSERT_TRUE(call("random_normal___cuda___pvoid_m1df64_f64_f64_i64___void", {&dm, &mean, &sd, &site}, seed, run).ok());
  std::vector<float> uniforms(count);
  std::vector<double> normals(count);
  MemRef<float, 1> fh{uniforms.data(), {count}};
  MemRef<double, 1> dh{normals.data(), {count}};
  call_cpu("random_uniform___cpu___pvoid_m1df32_f32_f32_i64___void", {&fh, &lo, &hi, &site}, seed, run);
  call_cpu("random_normal___cpu___pvoid_m1df64_f64_f64_i64___void", {&dh, &mean, &sd, &site}, seed, run);
  EXPECT_TRUE(same_bits(contents<float>(fb, count), uniforms));
  EXPECT_TRUE(same_bits(contents<double>(db, count), normals));
}

TEST_F(CudaLibraryHostTest, BadParametersAreRefusedBeforeTheDevice) {
  hal::BufferRef fb = buffer(std::vector<float>(4));
  MemRef<float, 1> fm{reinterpret_cast<float*>(fb.get()), {4}};
  float lo = 2, hi = 1;
  int64_t site = 0;
  const int launches_before = Fake::launches;
  Status refused = call("random_uniform___cuda___pvoid_m1df32_f32_f32_i64___void", {&fm, &lo, &hi, &site});
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("random_uniform: lo = 2"), std::string::npos) << refused;
  hal::BufferRef yb = buffer(std::vector<float>(6));
  MemRef<float, 2> xm{reinterpret_cast<float*>(fb.get()), {2, 2}}, ym{reinterpret_cast<float*>(yb.get()), {2, 3}};
  int64_t descending = 0;
  refused = call("sort___cuda___pvoid_m2df32_m2df32_i64___void", {&xm, &ym, &descending});
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("sort: y has shape [2, 3], x has shape [2, 2]"), std::string::npos) << refused;
  EXPECT_EQ(Fake::launches, launches_before);
}

}  // namespace
}  // namespace kiln::ral::library
