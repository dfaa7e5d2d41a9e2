// Name mangling: the full name of a function comes from its C++ type at compile time, in the
// form NAME___DEVICE___ARGCODES___RETCODES.
#include <gtest/gtest.h>

#include <string>

#include "kiln/ral/execution_context.h"
#include "kiln/ral/mangle.h"

namespace kiln::ral {
namespace {

using Ctx = ExecutionContext*;

template <FixedString Name, FixedString Device, auto Fn>
std::string name_of() {
  return std::string(mangled_name<Name, Device, decltype(Fn)>().view());
}

void f_void(Ctx) {}
Status f_gemm(Ctx, MemRef<float, 2>, MemRef<float, 2>, MemRef<float, 2>, bool, bool, float, float) { return Status(); }
Status f_gemm64(Ctx, MemRef<double, 2>, MemRef<double, 2>, MemRef<double, 2>, bool, bool, double, double) { return Status(); }
Status f_sort(Ctx, MemRef<float, 2>, MemRef<float, 2>, int64_t) { return Status(); }
Status f_argsort(Ctx, MemRef<int32_t, 3>, MemRef<int32_t, 3>, int64_t) { return Status(); }
Status f_topk(Ctx, MemRef<double, 1>, MemRef<double, 1>, MemRef<int32_t, 1>) { return Status(); }
Status f_scalar_memref(Ctx, MemRef<float, 0>) { return Status(); }
Result<kiln_ral_buffer_t> f_recv(Ctx, int64_t) { return kiln_ral_buffer_t{}; }
Status f_send(Ctx, int64_t, kiln_ral_buffer_t) { return Status(); }
int32_t f_ints(Ctx, int8_t, int16_t, int32_t, int64_t) { return 0; }
uint64_t f_uints(Ctx, uint8_t, uint16_t, uint32_t, uint64_t) { return 0; }
double f_pointers(Ctx, float*, const double*, void*, const char*) { return 0; }
MemRef<float, 4> f_returns_memref(Ctx, MemRef<float, 8>) { return {}; }
void f_context_pointer(Ctx, kiln_ral_context_t*, ExecutionContext*) {}

TEST(MangleTest, NamesFromSignatures) {
  struct Row {
    std::string actual, expected;
  };
  const Row table[] = {
      {name_of<"noop", "cpu", &f_void>(), "noop___cpu___pvoid___void"},
      {name_of<"gemm", "cpu", &f_gemm>(), "gemm___cpu___pvoid_m2df32_m2df32_m2df32_i1_i1_f32_f32___void"},
      {name_of<"gemm", "opencl", &f_gemm64>(), "gemm___opencl___pvoid_m2df64_m2df64_m2df64_i1_i1_f64_f64___void"},
      {name_of<"sort", "cpu", &f_sort>(), "sort___cpu___pvoid_m2df32_m2df32_i64___void"},
      {name_of<"argsort", "interp", &f_argsort>(), "argsort___interp___pvoid_m3di32_m3di32_i64___void"},
      {name_of<"topk", "cpu", &f_topk>(), "topk___cpu___pvoid_m1df64_m1df64_m1di32___void"},
      {name_of<"fill", "cpu", &f_scalar_memref>(), "fill___cpu___pvoid_m0df32___void"},
      {name_of<"recv_input", "cpu", &f_recv>(), "recv_input___cpu___pvoid_i64___buf"},
      {name_of<"send_output", "cpu", &f_send>(), "send_output___cpu___pvoid_i64_buf___void"},
      {name_of<"ints", "cpu", &f_ints>(), "ints___cpu___pvoid_i8_i16_i32_i64___i32"},
      {name_of<"uints", "cpu", &f_uints>(), "uints___cpu___pvoid_ui8_ui16_ui32_ui64___ui64"},
      {name_of<"ptrs", "cpu", &f_pointers>(), "ptrs___cpu___pvoid_pf32_pf64_pvoid_pi8___f64"},
      {name_of<"reshape", "cuda", &f_returns_memref>(), "reshape___cuda___pvoid_m8df32___m4df32"},
      {name_of<"raw", "cpu", &f_context_pointer>(), "raw___cpu___pvoid_pvoid_pvoid___void"},
  };
  for (const Row& row : table) EXPECT_EQ(row.actual, row.expected);
  // The name is a compile-time constant.
  static_assert(mangled_name<"sort", "cpu", decltype(&f_sort)>().view() ==
                "sort___cpu___pvoid_m2df32_m2df32_i64___void");
}

TEST(MangleTest, SplitsFullNames) {
  NameParts parts;
  ASSERT_TRUE(split_mangled_name("random_uniform___cpu___pvoid_m2df32_f32_f32___void", &parts));
  EXPECT_EQ(parts.nickname, "random_uniform");
  EXPECT_EQ(parts.device, "cpu");
  EXPECT_EQ(parts.arguments, "pvoid_m2df32_f32_f32");
  EXPECT_EQ(parts.results, "void");
  for (const char* bad : {"", "sort", "sort___cpu", "sort___cpu___pvoid", "___cpu___pvoid___void",
                          "sort______pvoid___void", "sort___cpu___pvoid___", "sort_____cpu___pvoid___void",
                          "sort___cpu___pvoid___void___extra", "_sort___cpu___pvoid___void",
                          "sort___cpu___pvoid__i64___void"}) {
    EXPECT_FALSE(split_mangled_name(bad, &parts)) << bad;
  }
}

}  // namespace
}  // namespace kiln::ral
