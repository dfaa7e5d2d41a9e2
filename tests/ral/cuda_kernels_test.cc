// The CUDA library kernels (ral/library/cuda_kernels.h) run on the host: their source is compiled
// as C++ by the host's compiler with the launch indices as globals, and each launch runs its grid
// of blocks and threads one after another (correct for these kernels, whose threads never share
// an element within a launch). What they compute is checked bit for bit against the cpu device's
// functions: the Philox uniforms and normals, and sort, argsort and topk with NaNs, signed zeros
// and ties, on every element type. This is how the kernels' logic is tested on machines without
// a GPU; tests/runtime/cuda_codegen_test.cc builds the same text with NVRTC and ptxas.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/cuda_host_kernels.h"
#include "common/same_bits.h"
#include "kiln/base/random.h"
#include "kiln/loop/op_eval.h"
#include "kiln/ral/element_types.h"
#include "kiln/ral/execution_context.h"
#include "ral/library/cuda_kernels.h"

namespace kiln::ral::library {
namespace {

using test::HostKernels;
using u64 = unsigned long long;

class CudaKernelsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kernels_ = new HostKernels();
    status_ = new Status(kernels_->build());
  }
  static void TearDownTestSuite() {
    delete kernels_;
    delete status_;
  }
  void SetUp() override { ASSERT_TRUE(status_->ok()) << *status_; }

  static HostKernels* kernels_;
  static Status* status_;
};
HostKernels* CudaKernelsTest::kernels_ = nullptr;
Status* CudaKernelsTest::status_ = nullptr;

// T's RAL code: the suffix of its kernels and the element code of the cpu functions' names.
template <typename T>
std::string code() {
  return std::string(dtype_code(*dtype_of<T>()));
}

// One call of `device`'s function `name` in an execution with this seed and run.
void call_on(const char* device, const std::string& name, std::vector<void*> args, uint64_t seed = 0,
             uint64_t run = 0) {
  Context context(device);
  ExecutionContext execution(context, seed, run);
  args.insert(args.begin(), nullptr);
  execution.call(name.c_str(), args.data());
  const Status finished = execution.finish();
  ASSERT_TRUE(finished.ok()) << name << ": " << finished;
}

void call_cpu(const std::string& name, std::vector<void*> args, uint64_t seed = 0, uint64_t run = 0) {
  call_on("cpu", name, std::move(args), seed, run);
}

using test::same_bits;

// T: the element type (f16 and bf16 as Half and BFloat16, passed to the kernel as their bits); P:
// the type of the parameters (f32 for f16 and bf16).
template <typename T, typename P = T>
void check_random(HostKernels& kernels, const char* function, u64 count, P p, P q) {
  const uint64_t seed = 0x0123456789ABCDEFull, run = 3;
  const int64_t site = 5;
  std::vector<T> expected(count), got(count);
  std::memset(static_cast<void*>(expected.data()), 0xa5, count * sizeof(T));  // bytes no kernel writes
  std::memset(static_cast<void*>(got.data()), 0x5a, count * sizeof(T));
  MemRef<T, 1> r{expected.data(), {static_cast<int64_t>(count)}};
  const std::string pc = code<P>();
  call_cpu(std::string(function) + "___cpu___pvoid_m1d" + code<T>() + "_" + pc + "_" + pc + "_i64___void",
           {&r, &p, &q, const_cast<int64_t*>(&site)}, seed, run);
  kernels.launch(std::string("kiln_") + function + "_" + code<T>(), static_cast<void*>(got.data()), count,
                 static_cast<unsigned>(seed), static_cast<unsigned>(seed >> 32), static_cast<unsigned>(site),
                 static_cast<unsigned>(run), p, q);
  EXPECT_TRUE(same_bits(got, expected)) << function << " " << code<T>() << " of " << count << " elements";
}

TEST_F(CudaKernelsTest, RandomNumbersAreTheCpuDevicesBitForBit) {
  for (u64 count : {1ull, 2ull, 3ull, 4ull, 5ull, 1001ull, 1002ull}) {
    check_random<float>(*kernels_, "random_uniform", count, -2.5f, 4.0f);
    check_random<double>(*kernels_, "random_uniform", count, -2.5, 4.0);
    check_random<float>(*kernels_, "random_normal", count, 1.5f, 0.25f);
    check_random<double>(*kernels_, "random_normal", count, 1.5, 0.25);
    check_random<Half, float>(*kernels_, "random_uniform", count, -2.5f, 4.0f);
    check_random<BFloat16, float>(*kernels_, "random_uniform", count, -2.5f, 4.0f);
    check_random<Half, float>(*kernels_, "random_normal", count, 1.5f, 0.25f);
    check_random<BFloat16, float>(*kernels_, "random_normal", count, 1.5f, 0.25f);
  }
  // f16's range ends at 65504: beyond it, inf; small numbers become subnormals.
  check_random<Half, float>(*kernels_, "random_uniform", 1001, 60000.0f, 70000.0f);
  check_random<Half, float>(*kernels_, "random_uniform", 1001, -1e-5f, 1e-5f);
  check_random<BFloat16, float>(*kernels_, "random_normal", 1001, 0.0f, 3e38f);
  // A range so narrow that rounding reaches hi: the largest value below it instead.
  check_random<float>(*kernels_, "random_uniform", 64, 1.0f, std::nextafter(1.0f, 2.0f));
}

struct Sorted {
  std::vector<char> values;  // the bytes of the sorted values
  std::vector<int32_t> indices;
};

// The launches of the cuda device's sort: load, the bitonic stages, store of the first `count`.
template <typename T>
void emulate_sort(HostKernels& kernels, const std::vector<T>& x, u64 rows, u64 n, u64 count, int descending,
                  std::vector<T>* values, std::vector<int32_t>* indices) {
  const u64 padded = std::bit_ceil(n);
  std::vector<T> keys(rows * padded);
  std::vector<unsigned> idx(rows * padded);
  values->assign(rows * count, T{});
  indices->assign(rows * count, -7);
  const std::string s = code<T>();
  const void* in = x.data();
  void* k_data = keys.data();
  kernels.launch("kiln_sort_load_" + s, in, k_data, idx.data(), rows, n, padded);
  for (const auto& [k, j] : bitonic_stages(padded)) {
    kernels.launch("kiln_sort_step_" + s, k_data, idx.data(), rows, n, padded, static_cast<u64>(k),
                   static_cast<u64>(j), descending);
  }
  kernels.launch("kiln_sort_store_" + s, static_cast<const void*>(keys.data()), static_cast<const unsigned*>(idx.data()),
                 static_cast<void*>(values->data()), indices->data(), rows, padded, count);
}

// Rows with NaNs, both zeros, ties, and for integers the extremes.
template <typename T>
std::vector<T> sample(int64_t count, uint64_t seed) {
  Random random(seed);
  std::vector<T> x(static_cast<size_t>(count));
  for (T& v : x) {
    const double u = random.uniform(0, 1);
    const double tie = std::round(random.normal(0, 3));
    if constexpr (std::is_floating_point_v<T>) {
      v = u < 0.1 ? std::numeric_limits<T>::quiet_NaN() : u < 0.15 ? T(-0.0) : u < 0.2 ? T(0) : static_cast<T>(tie);
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      uint16_t (*bits)(double) = std::is_same_v<T, Half> ? &ir::f16_bits : &ir::bf16_bits;
      // NaNs of both signs and payloads, both zeros, both infinities, ties.
      v.bits = u < 0.05 ? 0x7e01 : u < 0.1 ? 0xffc1 : u < 0.15 ? 0x8000 : u < 0.2 ? 0 : u < 0.25 ? 0xfc00 :
               u < 0.3 ? bits(INFINITY) : bits(tie / 4);
      if (u < 0.1 && std::is_same_v<T, BFloat16>) v.bits = u < 0.05 ? 0x7fc1 : 0xffc1;
    } else {
      // Through i64: a negative tie wraps into an unsigned T (a double would be out of its range).
      v = u < 0.05  ? std::numeric_limits<T>::min()
          : u < 0.1 ? std::numeric_limits<T>::max()
                    : static_cast<T>(static_cast<int64_t>(tie));
    }
  }
  return x;
}

template <typename T>
void check_sorting(HostKernels& kernels, int64_t rows, int64_t n) {
  const std::vector<T> x = sample<T>(rows * n, static_cast<uint64_t>(rows * 131 + n));
  const std::string t = code<T>();
  MemRef<T, 2> xm{const_cast<T*>(x.data()), {rows, n}};
  for (int64_t descending : {0, 1}) {
    std::vector<T> sorted(x.size()), got_values;
    std::vector<int32_t> order(x.size()), got_indices;
    MemRef<T, 2> ym{sorted.data(), {rows, n}};
    MemRef<int32_t, 2> im{order.data(), {rows, n}};
    call_cpu("sort___cpu___pvoid_m2d" + t + "_m2d" + t + "_i64___void", {&xm, &ym, &descending});
    call_cpu("argsort___cpu___pvoid_m2d" + t + "_m2di32_i64___void", {&xm, &im, &descending});
    emulate_sort<T>(kernels, x, rows, n, n, static_cast<int>(descending), &got_values, &got_indices);
    EXPECT_TRUE(same_bits(got_values, sorted)) << "sort " << t << " " << rows << "x" << n << " descending " << descending;
    EXPECT_EQ(got_indices, order) << "argsort " << t << " " << rows << "x" << n << " descending " << descending;
  }
  for (int64_t k : {int64_t{1}, (n + 1) / 2, n}) {
    std::vector<T> values(static_cast<size_t>(rows * k)), got_values;
    std::vector<int32_t> indices(static_cast<size_t>(rows * k)), got_indices;
    MemRef<T, 2> vm{values.data(), {rows, k}};
    MemRef<int32_t, 2> km{indices.data(), {rows, k}};
    call_cpu("topk___cpu___pvoid_m2d" + t + "_m2d" + t + "_m2di32___void", {&xm, &vm, &km});
    emulate_sort<T>(kernels, x, rows, n, k, 1, &got_values, &got_indices);
    EXPECT_TRUE(same_bits(got_values, values)) << "topk " << t << " " << rows << "x" << n << " k " << k;
    EXPECT_EQ(got_indices, indices) << "topk " << t << " " << rows << "x" << n << " k " << k;
  }
}

TEST_F(CudaKernelsTest, SortArgsortAndTopkAreTheCpuDevicesBitForBit) {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {3, 1}, {7, 13}, {1, 97}, {5, 64}, {2, 300}};
  for (const auto& [rows, n] : shapes) {
    check_sorting<float>(*kernels_, rows, n);
    check_sorting<double>(*kernels_, rows, n);
    check_sorting<int32_t>(*kernels_, rows, n);
    check_sorting<int8_t>(*kernels_, rows, n);
    check_sorting<uint8_t>(*kernels_, rows, n);
    check_sorting<int16_t>(*kernels_, rows, n);
    check_sorting<uint16_t>(*kernels_, rows, n);
    check_sorting<uint32_t>(*kernels_, rows, n);
    check_sorting<int64_t>(*kernels_, rows, n);
    check_sorting<uint64_t>(*kernels_, rows, n);
    check_sorting<Half>(*kernels_, rows, n);
    check_sorting<BFloat16>(*kernels_, rows, n);
  }
}

// The i8 values of a test product: every eighth one at i8's ends, the rest spread over its range.
std::vector<int8_t> i8_values(size_t count, unsigned salt) {
  std::vector<int8_t> v(count);
  for (size_t i = 0; i < count; ++i) {
    v[i] = static_cast<int8_t>(i % 8 == 0 ? (i % 16 == 0 ? -128 : 127) : static_cast<int>((i * 37 + salt) % 256) - 128);
  }
  return v;
}

// kiln_gemm_i8 (the i8 products cuBLAS does not take) and kiln_qgemm_scale against the reference,
// the interp device's gemm and qgemm, bit for bit: every transpose, a batch of two, f32 alpha and
// beta whose products round, NaN, and results beyond i32 that saturate.
TEST_F(CudaKernelsTest, I8ProductsAndQgemmScalesAreTheReferences) {
  const int64_t batch = 2, m = 5, n = 7, k = 3;
  const std::vector<int8_t> a = i8_values(batch * m * k, 11), b = i8_values(batch * k * n, 5);
  std::vector<int32_t> c0(static_cast<size_t>(batch * m * n));
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = i % 9 == 0 ? INT32_MAX : static_cast<int32_t>(i * 7919 % 100000) - 50000;
  const std::pair<float, float> scalars[] = {{1, 0}, {2.5f, 0.5f}, {-1.75f, 1}, {3e5f, 0}, {1, -3e4f}, {NAN, 0}};
  for (int64_t ta : {0, 1}) {
    for (int64_t tb : {0, 1}) {
      for (auto [alpha, beta] : scalars) {
        std::vector<int32_t> want = c0, got = c0;
        MemRef<int8_t, 3> am{const_cast<int8_t*>(a.data()), {batch, ta ? k : m, ta ? m : k}};
        MemRef<int8_t, 3> bm{const_cast<int8_t*>(b.data()), {batch, tb ? n : k, tb ? k : n}};
        MemRef<int32_t, 3> cm{want.data(), {batch, m, n}};
        int64_t one = 1;
        call_on("interp", "gemm___interp___pvoid_m3di8_m3di8_m3di32_i64_i64_f32_f32_i64___void",
                {&am, &bm, &cm, &ta, &tb, &alpha, &beta, &one});
        kernels_->launch("kiln_gemm_i8", static_cast<const signed char*>(static_cast<const void*>(a.data())),
                         static_cast<const signed char*>(static_cast<const void*>(b.data())), got.data(),
                         static_cast<u64>(batch), static_cast<u64>(m), static_cast<u64>(n), static_cast<u64>(k),
                         static_cast<int>(ta), static_cast<int>(tb), alpha, beta);
        EXPECT_EQ(got, want) << "transpose " << ta << tb << ", alpha " << alpha << ", beta " << beta;
      }
      // qgemm of the first product: its sums from kiln_gemm_i8, then the scales.
      std::vector<float> scale_a(m), scale_b(n), want(static_cast<size_t>(m * n)), got(want.size());
      for (int64_t i = 0; i < m; ++i) scale_a[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i + 1);
      for (int64_t j = 0; j < n; ++j) scale_b[static_cast<size_t>(j)] = 1.0f / static_cast<float>(j + 3);
      MemRef<int8_t, 2> am{const_cast<int8_t*>(a.data()), {ta ? k : m, ta ? m : k}};
      MemRef<int8_t, 2> bm{const_cast<int8_t*>(b.data()), {tb ? n : k, tb ? k : n}};
      MemRef<float, 1> sam{scale_a.data(), {m}}, sbm{scale_b.data(), {n}};
      MemRef<float, 2> cm{want.data(), {m, n}};
      call_on("interp", "qgemm___interp___pvoid_m2di8_m2di8_m1df32_m1df32_m2df32_i64_i64___void",
              {&am, &bm, &sam, &sbm, &cm, &ta, &tb});
      std::vector<int32_t> sums(want.size());
      kernels_->launch("kiln_gemm_i8", static_cast<const signed char*>(static_cast<const void*>(a.data())),
                       static_cast<const signed char*>(static_cast<const void*>(b.data())), sums.data(), u64{1},
                       static_cast<u64>(m), static_cast<u64>(n), static_cast<u64>(k), static_cast<int>(ta),
                       static_cast<int>(tb), 1.0f, 0.0f);
      kernels_->launch("kiln_qgemm_scale", static_cast<const int*>(sums.data()), static_cast<const float*>(scale_a.data()),
                       static_cast<const float*>(scale_b.data()), got.data(), static_cast<u64>(m), static_cast<u64>(n));
      EXPECT_TRUE(same_bits(got, want)) << "qgemm, transpose " << ta << tb;
    }
  }
}

// The kernels' f16 and bf16 conversions (no cuda_fp16.h) against the reference's (op_eval.h): every
// f16 and bf16 value to f32, and f32 to f16 and bf16 at every tie between two neighbours (and one
// f32 step either side), at the limits, and over a spread of every f32 exponent.
TEST(CudaKernelConversionsTest, F16AndBf16AreTheReferences) {
  test::TempDir dir("kiln-cuda-conversions");
  const std::string source = dir.file("conversions.cc"), object = dir.file("conversions.so");
  std::ofstream(source) << test::kHostPrelude << cuda_library_source() << R"(
extern "C" float test_f16_value(unsigned short h) { return kiln_f16_value(h); }
extern "C" float test_bf16_value(unsigned short h) { return kiln_bf16_value(h); }
extern "C" unsigned short test_f16_bits(float f) { return kiln_f16_bits(f); }
extern "C" unsigned short test_bf16_bits(float f) { return kiln_bf16_bits(f); }
)";
  Result<ProcessResult> built = run_process(
      {KILN_CXX_COMPILER, "-std=c++17", "-O1", "-fPIC", "-shared", "-ffp-contract=off", "-w", source, "-o", object},
      120000);
  ASSERT_TRUE(built.ok() && built->exit_code == 0) << (built.ok() ? built->output : built.status().to_string());
  void* handle = ::dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  using Value = float (*)(unsigned short);
  using Bits = unsigned short (*)(float);
  const auto f16_value = reinterpret_cast<Value>(::dlsym(handle, "test_f16_value"));
  const auto bf16_value = reinterpret_cast<Value>(::dlsym(handle, "test_bf16_value"));
  const auto f16_bits = reinterpret_cast<Bits>(::dlsym(handle, "test_f16_bits"));
  const auto bf16_bits = reinterpret_cast<Bits>(::dlsym(handle, "test_bf16_bits"));
  ASSERT_TRUE(f16_value && bf16_value && f16_bits && bf16_bits);
  auto same = [](double a, double b) { return std::isnan(a) ? std::isnan(b) : std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); };
  int wrong = 0;
  auto expect_bits = [&](float f) {
    if (f16_bits(f) != ir::f16_bits(f) && ++wrong < 10) ADD_FAILURE() << "f16 of " << f << " (" << std::bit_cast<uint32_t>(f) << ")";
    if (bf16_bits(f) != ir::bf16_bits(f) && ++wrong < 10) ADD_FAILURE() << "bf16 of " << f;
  };
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<unsigned short>(h);
    if (!same(f16_value(bits), ir::f16_value(bits)) && ++wrong < 10) ADD_FAILURE() << "f16 bits " << h;
    if (!same(bf16_value(bits), ir::bf16_value(bits)) && ++wrong < 10) ADD_FAILURE() << "bf16 bits " << h;
    // The ties between this value and the next, in f16 and in bf16, and one f32 step either side.
    for (double (*value)(uint16_t) : {&ir::f16_value, &ir::bf16_value}) {
      const double a = value(bits), b = value(static_cast<uint16_t>(h + 1));
      if (!std::isfinite(a) || !std::isfinite(b) || h == 0x7fff || h == 0xffff) continue;
      const float tie = static_cast<float>((a + b) / 2);
      expect_bits(tie);
      expect_bits(std::nextafter(tie, INFINITY));
      expect_bits(std::nextafter(tie, -INFINITY));
    }
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f, 2.9802322e-8f, 5.9604645e-8f, 3.4028235e38f,
                  -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f}) {
    expect_bits(f);
  }
  for (uint64_t b = 0; b < 0x100000000ull; b += 65521) expect_bits(std::bit_cast<float>(static_cast<uint32_t>(b)));
  EXPECT_EQ(wrong, 0);
  ::dlclose(handle);
}

TEST(BitonicStagesTest, CoverTheNetwork) {
  EXPECT_TRUE(bitonic_stages(1).empty());
  const std::vector<std::pair<uint64_t, uint64_t>> eight = {{2, 1}, {4, 2}, {4, 1}, {8, 4}, {8, 2}, {8, 1}};
  EXPECT_EQ(bitonic_stages(8), eight);
  EXPECT_EQ(bitonic_stages(uint64_t{1} << 20).size(), 20u * 21u / 2u);
}

}  // namespace
}  // namespace kiln::ral::library
