// The RAL with every element type: the codes of the mangled names (the ones a call statement's
// nodes give agree with the ones a registered function's C++ types give), sort / argsort / topk of
// every type on cpu and on interp (the reference), f16 and bf16 ordered by their f32 values with
// NaNs last, random numbers into f16 and bf16 (the f32 numbers of the same stream, rounded),
// collectives of every type in a world of one, and the call checks of each built-in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/base/random.h"
#include "kiln/ir/call.h"
#include "kiln/loop/op_eval.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/mangle.h"
#include "ral/library_call.h"

namespace kiln::ral {
namespace {

// The code a call statement's node of type D gets (dtype_code) is the one a function registered
// with MemRef<Element<D>, N> has (mangle.h), so that every type binds.
template <ir::DType D>
void expect_codes_agree() {
  constexpr auto code = type_code<MemRef<Element<D>, 2>>();
  EXPECT_EQ(code.view(), "m2d" + std::string(dtype_code(D))) << ir::dtype_name(D);
  EXPECT_EQ(dtype_of<Element<D>>(), D) << ir::dtype_name(D);
  EXPECT_EQ(dtype_from_code(dtype_code(D)), D) << ir::dtype_name(D);
}

TEST(ElementTypesRalTest, CodesOfEveryType) {
  expect_codes_agree<ir::DType::kBool>();
  expect_codes_agree<ir::DType::kI8>();
  expect_codes_agree<ir::DType::kU8>();
  expect_codes_agree<ir::DType::kI16>();
  expect_codes_agree<ir::DType::kU16>();
  expect_codes_agree<ir::DType::kI32>();
  expect_codes_agree<ir::DType::kU32>();
  expect_codes_agree<ir::DType::kI64>();
  expect_codes_agree<ir::DType::kU64>();
  expect_codes_agree<ir::DType::kF16>();
  expect_codes_agree<ir::DType::kBF16>();
  expect_codes_agree<ir::DType::kF32>();
  expect_codes_agree<ir::DType::kF64>();
  const char* codes[] = {"i1", "i8", "ui8", "i16", "ui16", "i32", "ui32", "i64", "ui64", "f16", "bf16", "f32", "f64"};
  for (size_t i = 0; i < std::size(codes); ++i) EXPECT_EQ(dtype_code(ir::kAllDTypes[i]), codes[i]);
  EXPECT_FALSE(dtype_from_code("u8").has_value());
  EXPECT_EQ((type_code<Half*>().view()), "pf16");
}

// Sorting one type on both devices against std::stable_sort of the values (`key` gives the order;
// NaNs, where `is_nan` says so, last).
template <typename T, typename Key, typename IsNan>
void expect_sorts(const std::string& code, const std::vector<T>& x, int64_t rows, int64_t n, Key key, IsNan is_nan) {
  for (bool descending : {false, true}) {
    // The reference: positions stably ordered, NaNs after every number.
    std::vector<T> want(x.size());
    std::vector<int32_t> want_idx(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int32_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      const T* row = x.data() + r * n;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        if (is_nan(row[a]) || is_nan(row[b])) return !is_nan(row[a]);
        return descending ? key(row[b]) < key(row[a]) : key(row[a]) < key(row[b]);
      });
      for (int64_t i = 0; i < n; ++i) {
        want[static_cast<size_t>(r * n + i)] = row[order[static_cast<size_t>(i)]];
        want_idx[static_cast<size_t>(r * n + i)] = order[static_cast<size_t>(i)];
      }
    }
    for (const char* device : kLibraryDevices) {
      const std::string where = code + " on " + device + (descending ? " descending" : "");
      std::vector<T> y(x.size());
      std::vector<int32_t> idx(x.size(), -1);
      MemRef<T, 2> xm{const_cast<T*>(x.data()), {rows, n}}, ym{y.data(), {rows, n}};
      MemRef<int32_t, 2> im{idx.data(), {rows, n}};
      int64_t desc = descending;
      ASSERT_TRUE(call(device, full_name("sort", device, "m2d" + code + "_m2d" + code + "_i64"), {&xm, &ym, &desc}).ok())
          << where;
      EXPECT_TRUE(same_bits(y, want)) << where;
      ASSERT_TRUE(call(device, full_name("argsort", device, "m2d" + code + "_m2di32_i64"), {&xm, &im, &desc}).ok())
          << where;
      EXPECT_EQ(idx, want_idx) << where;
      if (!descending) continue;
      // topk: the k largest, descending, the lower position first among equals; NaNs last.
      const int64_t k = std::min<int64_t>(n, 3);
      std::vector<T> values(static_cast<size_t>(rows * k));
      std::vector<int32_t> at(values.size(), -1);
      MemRef<T, 2> vm{values.data(), {rows, k}};
      MemRef<int32_t, 2> am{at.data(), {rows, k}};
      ASSERT_TRUE(call(device, full_name("topk", device, "m2d" + code + "_m2d" + code + "_m2di32"), {&xm, &vm, &am}).ok())
          << where;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < k; ++i) {
          EXPECT_EQ(at[static_cast<size_t>(r * k + i)], want_idx[static_cast<size_t>(r * n + i)]) << where;
        }
      }
    }
  }
}

template <typename T>
void expect_integer_sorts(const std::string& code) {
  Random random(code.size() * 977 + 1);
  const int64_t rows = 3, n = 37;
  std::vector<T> x(static_cast<size_t>(rows * n));
  for (T& v : x) {
    // Values across the whole range, with ties.
    const uint64_t bits = random.next_u64();
    v = static_cast<T>(bits % 5 == 0 ? bits % 7 : bits);
  }
  expect_sorts<T>(code, x, rows, n, [](T v) { return v; }, [](T) { return false; });
}

TEST(ElementTypesRalTest, SortsEveryIntegerType) {
  expect_integer_sorts<int8_t>("i8");
  expect_integer_sorts<uint8_t>("ui8");
  expect_integer_sorts<int16_t>("i16");
  expect_integer_sorts<uint16_t>("ui16");
  expect_integer_sorts<int32_t>("i32");
  expect_integer_sorts<uint32_t>("ui32");
  expect_integer_sorts<int64_t>("i64");
  expect_integer_sorts<uint64_t>("ui64");
  // bool, a byte each: false before true, stably.
  bool flags[7] = {true, false, true, true, false, false, true};
  std::vector<int32_t> idx(7);
  MemRef<bool, 1> xm{flags, {7}};
  MemRef<int32_t, 1> im{idx.data(), {7}};
  int64_t desc = 0;
  for (const char* device : kLibraryDevices) {
    ASSERT_TRUE(call(device, full_name("argsort", device, "m1di1_m1di32_i64"), {&xm, &im, &desc}).ok());
    EXPECT_EQ(idx, (std::vector<int32_t>{1, 4, 5, 0, 2, 3, 6})) << device;
  }
}

// f16 and bf16 sort by their values in f32 (not their bits: -1 before -0 before 0 before 1),
// NaNs last, stably (0 and -0 keep their order).
template <typename T>
void expect_narrow_sorts(const std::string& code, uint16_t (*bits)(double), double (*value)(uint16_t)) {
  const double values[] = {1.5, -0.0, 0.0, -1.0, NAN, INFINITY, -INFINITY, 65504, 1e-7, -2.5, 0.0, 1.5, -NAN, 3, 0.1};
  const int64_t rows = 2, n = 15;
  std::vector<T> x;
  for (int64_t r = 0; r < rows; ++r) {
    for (double v : values) x.push_back(T{bits(r == 0 ? v : -v)});
  }
  expect_sorts<T>(
      code, x, rows, n, [&](T v) { return static_cast<float>(value(v.bits)); },
      [&](T v) { return std::isnan(value(v.bits)); });
}

TEST(ElementTypesRalTest, SortsF16AndBf16ByTheirValues) {
  expect_narrow_sorts<Half>("f16", &ir::f16_bits, &ir::f16_value);
  expect_narrow_sorts<BFloat16>("bf16", &ir::bf16_bits, &ir::bf16_value);
}

// random_uniform and random_normal into f16 and bf16: the f32 numbers of the same stream (same
// seed, call site and run), each rounded to nearest even; the same on every device.
template <typename T>
void expect_narrow_random(const std::string& code, uint16_t (*bits)(double)) {
  const int64_t count = 4099;  // past one chunk of 4096, not a multiple of 4
  int64_t site = 3;
  for (const char* function : {"random_uniform", "random_normal"}) {
    std::vector<float> f32(static_cast<size_t>(count));
    MemRef<float, 1> fm{f32.data(), {count}};
    float p = std::string(function) == "random_uniform" ? -2.0f : 1.0f, q = 3.0f;
    ASSERT_TRUE(call("cpu", full_name(function, "cpu", "m1df32_f32_f32_i64"), {&fm, &p, &q, &site}, 42, 7).ok());
    for (const char* device : kLibraryDevices) {
      std::vector<T> r(static_cast<size_t>(count));
      MemRef<T, 1> rm{r.data(), {count}};
      ASSERT_TRUE(
          call(device, full_name(function, device, "m1d" + code + "_f32_f32_i64"), {&rm, &p, &q, &site}, 42, 7).ok())
          << function << " " << code << " on " << device;
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(r[static_cast<size_t>(i)].bits, bits(f32[static_cast<size_t>(i)]))
            << function << " " << code << " on " << device << ", element " << i;
      }
    }
  }
  std::vector<T> r(4);
  MemRef<T, 1> rm{r.data(), {4}};
  float lo = 2, hi = 1;
  Status bad = call("cpu", full_name("random_uniform", "cpu", "m1d" + code + "_f32_f32_i64"), {&rm, &lo, &hi, &site});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad;
}

TEST(ElementTypesRalTest, RandomNumbersIntoF16AndBf16) {
  expect_narrow_random<Half>("f16", &ir::f16_bits);
  expect_narrow_random<BFloat16>("bf16", &ir::bf16_bits);
}

// Collectives of every type in a world of one: a reduction of one rank is its input, except
// where the combination goes through another type (a mean of integers through f64).
TEST(ElementTypesRalTest, CollectivesOfEveryTypeInAWorldOfOne) {
  const uint16_t half[] = {0x3c00, 0x7bff, 0xfc00};  // 1, 65504, -inf
  for (const char* device : kLibraryDevices) {
    for (int64_t op : {0, 1, 2, 3}) {
      std::vector<Half> x = {Half{half[0]}, Half{half[1]}, Half{half[2]}}, y(3);
      MemRef<Half, 1> xm{x.data(), {3}}, ym{y.data(), {3}};
      ASSERT_TRUE(call(device, full_name("allreduce", device, "m1df16_m1df16_i64"), {&xm, &ym, &op}).ok()) << device;
      EXPECT_EQ(y, x) << device << " op " << op;
    }
    bool b[3] = {false, true, true}, bo[3] = {true, false, false};
    MemRef<bool, 1> bm{b, {3}}, bom{bo, {3}};
    int64_t sum = 0;
    ASSERT_TRUE(call(device, full_name("allreduce", device, "m1di1_m1di1_i64"), {&bm, &bom, &sum}).ok());
    EXPECT_TRUE(std::equal(b, b + 3, bo));
    std::vector<int64_t> big = {(int64_t{1} << 53) + 1, -7, 5}, mean(3);
    MemRef<int64_t, 1> gm{big.data(), {3}}, mm{mean.data(), {3}};
    int64_t op_mean = 1;
    ASSERT_TRUE(call(device, full_name("allreduce", device, "m1di64_m1di64_i64"), {&gm, &mm, &op_mean}).ok());
    EXPECT_EQ(mean, (std::vector<int64_t>{int64_t{1} << 53, -7, 5})) << "a mean of integers is computed in f64";
    std::vector<uint64_t> u = {UINT64_MAX, 1}, ug(2);
    MemRef<uint64_t, 1> um{u.data(), {2}}, ugm{ug.data(), {2}};
    ASSERT_TRUE(call(device, full_name("allgather", device, "m1dui64_m1dui64"), {&um, &ugm}).ok());
    EXPECT_EQ(ug, u);
  }
}

// The built-ins' element types: sorting takes every type, random numbers the floats, gemm f32 and
// f64 only (for now), each refusal naming the call, the tensor and its type.
TEST(ElementTypesRalTest, CallChecksOfEveryType) {
  auto node = [](int id, const char* name, ir::DType type, ir::Role role) {
    ir::TensorNode n;
    n.id = id;
    n.name = name;
    n.dtype = type;
    n.role = role;
    n.dims = {4, 4};
    return n;
  };
  // FUNCTION(nodes `args`) -> nodes `outputs`.
  auto call_of = [](std::string function, std::vector<int> args, std::vector<int> outputs) {
    ir::Call call;
    call.function = std::move(function);
    for (int a : args) call.args.emplace_back().node = a;
    call.outputs = std::move(outputs);
    return call;
  };
  for (ir::DType type : ir::kAllDTypes) {
    const std::vector<ir::TensorNode> nodes = {node(0, "x", type, ir::Role::kInput), node(1, "y", type, ir::Role::kOutput),
                                               node(2, "idx", ir::DType::kI32, ir::Role::kOutput)};
    const std::string name(ir::dtype_name(type));
    ir::Call sort = call_of("sort", {0}, {1});
    EXPECT_TRUE(ir::check_call(sort, nodes).empty()) << name;
    ir::Call topk = call_of("topk", {0}, {1, 2});
    EXPECT_TRUE(ir::check_call(topk, nodes).empty()) << name;
    ir::Call random = call_of("random_uniform", {}, {1});
    const std::vector<ir::Diagnostic> r = ir::check_call(random, nodes);
    EXPECT_EQ(r.empty(), ir::is_float_type(type)) << name;
    if (!r.empty()) {
      EXPECT_NE(r[0].message.find("'y' is " + name + "; it must be f32 or f64 or f16 or bf16"), std::string::npos)
          << r[0].message;
    }
    ir::Call gemm = call_of("gemm", {0, 0}, {1});
    const std::vector<ir::Diagnostic> g = ir::check_call(gemm, nodes);
    // A product keeps its operands' type for f32, f64, f16 and bf16; i8 gives i32 (below).
    EXPECT_EQ(g.empty(), type == ir::DType::kF32 || type == ir::DType::kF64 || ir::is_narrow_float(type)) << name;
    const std::string refusal = type == ir::DType::kI8 ? "gemm: 'y' is i8; a product of i8 operands gives i32"
                                                       : "gemm: 'x' is " + name + "; gemm takes f32, f64, bf16, f16 or i8";
    if (!g.empty()) {
      EXPECT_NE(g[0].message.find(refusal), std::string::npos) << g[0].message;
    }
    ir::Call allreduce = call_of("allreduce", {0}, {1});
    EXPECT_TRUE(ir::check_call(allreduce, nodes).empty()) << name;
  }
}

}  // namespace
}  // namespace kiln::ral
