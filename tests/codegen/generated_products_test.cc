// The products kiln generates itself (no automatic gemm call), run end to end on the cpu device
// (register tiles over packed operands, kiln/loop/optimize.h) against a reference product in
// double: shapes whose rows, reduction and columns are no multiple of the 6 x 16 tile, several
// steps and blocks of ks, and programs with sizes (language version 2) where the rows, or the
// rows, the reduction and the columns, are known only when the program runs, at 0, 1 and odd
// sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "kiln/runtime/code.h"
#include "kiln/runtime/program_instance.h"

namespace kiln::codegen_test {
namespace {

struct Shape {
  int64_t m, k, n;  // c[m, n] = sum over k of a[m, k] * b[k, n]
};

std::vector<float> values(int64_t count, int seed) {
  std::vector<float> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + seed) % 23) * 0.125f - 1.25f;
  return v;
}

// `sized`: 0 the sizes written as numbers, 1 the rows a size, 2 every dimension a size.
std::string product_text(const Shape& s, int sized) {
  const std::string m = std::to_string(s.m), k = std::to_string(s.k), n = std::to_string(s.n);
  const std::string head = sized == 0   ? "input a : f32[" + m + ", " + k + "]\ninput b : f32[" + k + ", " + n +
                                              "]\noutput c : f32[" + m + ", " + n + "]\n"
                           : sized == 1 ? "size M\ninput a : f32[M, " + k + "]\ninput b : f32[" + k + ", " + n +
                                              "]\noutput c : f32[M, " + n + "]\n"
                                        : "size M\nsize K\nsize N\ninput a : f32[M, K]\ninput b : f32[K, N]\n"
                                          "output c : f32[M, N]\n";
  return head + "c[i, j] = sum(a[i, k] * b[k, j])\n";
}

void expect_product(const hal::DeviceRef& device, const Shape& s, int sized) {
  SCOPED_TRACE(std::to_string(s.m) + " x " + std::to_string(s.k) + " x " + std::to_string(s.n) + ", sized " +
               std::to_string(sized));
  Result<ir::Program> program = lang::parse_program(product_text(s, sized), "product.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  runtime::ProgramOptions options;
  options.lower.auto_calls = false;
  if (sized == 1) options.sizes = {s.m};
  if (sized == 2) options.sizes = {s.m, s.k, s.n};
  auto instance = runtime::ProgramInstance::create(device, *program, options);
  ASSERT_TRUE(instance.ok()) << instance.status();
  const std::vector<float> a = values(s.m * s.k, 1), b = values(s.k * s.n, 5);
  if (!a.empty()) {
    ASSERT_TRUE((*instance)->write("a", a.data(), a.size() * sizeof(float)).ok());
  }
  if (!b.empty()) {
    ASSERT_TRUE((*instance)->write("b", b.data(), b.size() * sizeof(float)).ok());
  }
  Status ran = (*instance)->run("main");
  ASSERT_TRUE(ran.ok()) << ran;
  std::vector<float> c(static_cast<size_t>(s.m * s.n), -7.0f);
  if (c.empty()) return;
  ASSERT_TRUE((*instance)->read("c", c.data(), c.size() * sizeof(float)).ok());
  int bad = 0;
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double want = 0;
      for (int64_t k = 0; k < s.k; ++k) want += double(a[size_t(i * s.k + k)]) * double(b[size_t(k * s.n + j)]);
      const double got = c[size_t(i * s.n + j)];
      if (!(std::abs(got - want) <= 1e-3 + 1e-5 * std::abs(want)) && bad++ < 5) {
        ADD_FAILURE() << "c[" << i << ", " << j << "] = " << got << ", want " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

hal::DeviceRef cpu_device() {
  hal::DeviceOptions options;
  options.worker_threads = 2;
  return drivers::builtin_registry().create_device("cpu", options).value();
}

// Static shapes: one step, several (rows over 264), tails of rows and columns, a reduction in
// several blocks of ks (over 256) with a shorter last one, fewer columns than a tile (not tiled).
TEST(GeneratedProducts, OddShapesMatchAReferenceProduct) {
  const hal::DeviceRef device = cpu_device();
  for (const Shape& s : {Shape{64, 1, 16}, Shape{100, 333, 77}, Shape{269, 257, 35}, Shape{531, 5, 17},
                         Shape{67, 520, 33}, Shape{70, 3, 10}}) {
    expect_product(device, s, 0);
  }
}

// Programs with sizes: one build per program, run at sizes 0, 1, odd and over a step.
TEST(GeneratedProducts, SizedProductsMatchAReferenceProductAtEverySize) {
  const hal::DeviceRef device = cpu_device();
  for (const Shape& s : {Shape{0, 33, 20}, Shape{1, 33, 20}, Shape{7, 33, 20}, Shape{133, 33, 20}, Shape{531, 300, 20}}) {
    expect_product(device, s, 1);
  }
  for (const Shape& s : {Shape{0, 0, 0}, Shape{1, 1, 1}, Shape{5, 0, 7}, Shape{7, 3, 0}, Shape{13, 7, 15},
                         Shape{133, 257, 37}, Shape{300, 513, 32}}) {
    expect_product(device, s, 2);
  }
}

// A kernel over sizes has two copies of its statements on cpu: one whose index arithmetic is
// plain C for sizes up to a bound, and one through the wrapping helpers for larger sizes. Both
// run here: the columns one past the bound take the second copy.
TEST(GeneratedProducts, SizesPastThePlainCopysBoundRunTheWrappingCopy) {
  const hal::DeviceRef device = cpu_device();
  Result<ir::Program> program = lang::parse_program(product_text({1, 1, 1}, 2), "product.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  ir::LowerOptions lower;
  lower.auto_calls = false;
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program, lower);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  std::string format;
  Result<std::string> source = runtime::generate_source(*lowered, device->info(), &format);
  ASSERT_TRUE(source.ok()) << source.status();
  const std::string test = "if (kiln_size0 <= ";
  const size_t at = source->find(test);
  ASSERT_NE(at, std::string::npos) << *source;
  const int64_t bound = std::stoll(source->substr(at + test.size()));
  const size_t other = source->find("} else {", at);
  ASSERT_NE(other, std::string::npos);
  EXPECT_EQ(source->substr(at, other - at).find("kiln_mul_i64("), std::string::npos) << "the plain copy wraps";
  EXPECT_NE(source->find("kiln_mul_i64(", other), std::string::npos) << "the copy for large sizes does not wrap";
  ASSERT_LT(bound, int64_t{1} << 24) << "a test past the bound would need too much memory";
  expect_product(device, Shape{2, 3, 37}, 2);
  expect_product(device, Shape{1, 2, bound + 1}, 2);
}

}  // namespace
}  // namespace kiln::codegen_test
