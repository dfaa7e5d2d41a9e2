// The language's meaning, checked end to end on every device (interp, cpu, and opencl where a
// platform is present), each with the default lowering and with the plain one (no inlining,
// fusion, local arrays or optimization passes): small `.kiln` programs whose outputs the spec
// fixes exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "kiln/ir/printer.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/program_instance.h"
#include "runtime/cuda_build.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

using Outputs = std::map<std::string, std::vector<double>>;

// Runs the default routines of `text` with `inputs` (every other input zero) and returns every
// output and param.
Result<Outputs> run_program(const std::string& device_name, const std::string& text,
                            const ir::LowerOptions& lower, const Outputs& inputs = {}) {
  KILN_ASSIGN_OR_RETURN(ir::Program program, lang::parse_program(text, "semantics.kiln"));
  TempDir cache;
  KILN_ASSIGN_OR_RETURN(hal::DeviceRef device, open_device(device_name, cache.path()));
  runtime::ProgramOptions options;
  options.lower = lower;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<runtime::ProgramInstance> instance,
                        runtime::ProgramInstance::create(device, program, options));
  for (const auto& [name, values] : inputs) {
    const ir::TensorNode* node = program.find_node(name);
    if (!node) return invalid_argument_error("no input " + name);
    HostTensor t = empty_tensor(*node);
    for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
    KILN_RETURN_IF_ERROR(write_tensor(*instance, name, t));
  }
  for (const std::string& routine : default_routines(program)) KILN_RETURN_IF_ERROR(instance->run(routine));
  Outputs out;
  for (const ir::TensorNode* node : result_nodes(program)) {
    KILN_ASSIGN_OR_RETURN(HostTensor t, read_tensor(*instance, *node));
    out[node->name] = t.values();
  }
  return out;
}

// Calls `check` for every device with the default and the plain lowering, traced.
void each_device_and_lowering(const std::function<void(const std::string&, const ir::LowerOptions&)>& check) {
  for (const std::string& device : present_devices()) {
    for (const ir::LowerOptions& lower : {ir::LowerOptions{}, plain_lowering()}) {
      SCOPED_TRACE(device + (lower.optimize ? ", default lowering" : ", plain lowering"));
      check(device, lower);
    }
  }
}

// No GPU runs it here, but its CUDA C must build (cuda_build.h), with either lowering.
void expect_cuda_builds(const std::string& text) {
  static const Status cuda = cuda_toolchain_available();
  if (!cuda.ok()) return;
  for (const ir::LowerOptions& lower : {ir::LowerOptions{}, plain_lowering()}) {
    Result<ir::Program> program = lang::parse_program(text, "semantics.kiln");
    ASSERT_TRUE(program.ok()) << program.status();
    Result<ir::LoweredProgram> lowered = ir::lower_program(*program, lower);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    Status built = check_cuda_builds(*lowered, "semantics.kiln");
    EXPECT_TRUE(built.ok()) << built;
  }
}

// Whether `got` is exactly `want`, zeros' signs included; any NaN meets any NaN.
bool same_values(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!both_nan && (got[i] != want[i] || std::signbit(got[i]) != std::signbit(want[i]))) return false;
  }
  return true;
}

std::string values_text(const std::vector<double>& v) {
  std::string out;
  for (double d : v) out += (out.empty() ? "" : " ") + ir::format_number(d, true);
  return out;
}

// Expects `expected` (exactly) on every device, with default and plain lowering.
void expect_everywhere(const std::string& text, const Outputs& expected, const Outputs& inputs = {}) {
  each_device_and_lowering([&](const std::string& device, const ir::LowerOptions& lower) {
    Result<Outputs> got = run_program(device, text, lower, inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    for (const auto& [name, values] : expected) {
      EXPECT_TRUE(same_values(got->at(name), values))
          << name << ": " << values_text(got->at(name)) << ", expected " << values_text(values);
    }
  });
  expect_cuda_builds(text);
}

// "Iteration points where a compound subscript falls outside its dimension contribute nothing
// to a reduction, and read as 0 in an elementwise expression" holds for consts too, although
// lowering folds a const's value into the code.
TEST(LanguageSemanticsTest, OutOfRangeReadsOfAConstArePadding) {
  expect_everywhere(R"(
const one : f32[3] = 1
output e : f32[4]
output s : f32[4]
e[i] = one[i - 1]
s[i] = sum(one[i + k - 1]) where k < 3
)",
                    {{"e", {0, 1, 1, 1}}, {"s", {2, 3, 2, 1}}});
}

// The same through an inlined intermediate (its reads are elementwise: 0 out of range) and in
// a max reduction (skipped points, not zeros: the maximum of the in-range terms, -inf for
// none).
TEST(LanguageSemanticsTest, OutOfRangeConstReadsInsideInlinedDefinitionsAndMax) {
  expect_everywhere(R"(
const two : f32[4] = 2
input x : f32[4]
tensor t : f32[4]
output y : f32[4]
output m : f32[4]
t[i] = two[i + 1] + x[i]
y[i] = t[i] * 3
m[i] = max(two[i + k - 2] - 5) where k < 2
)",
                    {{"y", {12, 12, 12, 3}}, {"m", {-INFINITY, -3, -3, -3}}}, {{"x", {2, 2, 2, 1}}});
}

// Average pooling with zero padding written the natural way: a window of ones (a const) tells
// how many points are inside, so the padded edge averages over the points it has.
TEST(LanguageSemanticsTest, PaddedAveragePoolingWithAConstWindowCount) {
  expect_everywhere(R"(
input x : f32[4]
const ones : f32[4] = 1
tensor total : f32[4]
tensor count : f32[4]
output avg : f32[4]
total[i] = sum(x[i + k - 1]) where k < 3
count[i] = sum(ones[i + k - 1]) where k < 3
avg[i] = total[i] / count[i]
)",
                    {{"avg", {3, 4, 6, 7}}}, {{"x", {2, 4, 6, 8}}});
}

// A product large enough for register tiles (70 rows: 11 tiles of 6 and 4 rows as before; 20
// columns: one tile of 16 and 4 as before), with integer values so that every order of
// summation gives the exact result on every device.
TEST(LanguageSemanticsTest, ProductInRegisterTilesIsExactEverywhere) {
  const int rows = 70, inner = 5, cols = 20;
  std::vector<double> a(rows * inner), b(inner * cols), c(rows * cols, 0);
  for (int i = 0; i < rows * inner; ++i) a[i] = (i * 7) % 11 - 5;
  for (int i = 0; i < inner * cols; ++i) b[i] = (i * 5) % 9 - 4;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      for (int k = 0; k < inner; ++k) c[i * cols + j] += a[i * inner + k] * b[k * cols + j];
    }
  }
  expect_everywhere(R"(
input a : f32[70, 5]
input b : f32[5, 20]
output c : f32[70, 20]
c[i, j] = sum(a[i, k] * b[k, j])
)",
                    {{"c", c}}, {{"a", a}, {"b", b}});
}

}  // namespace
}  // namespace kiln::e2e

namespace kiln::e2e {
namespace {

// argmax / argmin (language version 2), as NumPy gives them: the first of equal values, the first
// NaN beyond every number, points a compound subscript leaves (skipped, never winning), -1 for no
// point, and the position stored in the target's type.
TEST(LanguageSemanticsTest, ArgmaxAndArgminAsNumPy) {
  const double nan = std::nan("");
  const std::string text =
      "input x : f32[4, 5]\n"
      "output hi : i32[4]\noutput lo : i32[4]\noutput head : i32[4]\noutput none : i32[4]\noutput as_float : f32[4]\n"
      "hi[r] = argmax(x[r, c])\n"
      "lo[r] = argmin(x[r, c])\n"
      "head[r] = argmin(x[r, c + 2]) where c < 5\n"
      "none[r] = argmax(x[r, c + 9]) where c < 5\n"
      "as_float[r] = argmin(x[r, c] * 2)\n";
  const Outputs inputs = {{"x", {3, 7, 7, 1, 1,       // ties: the first 7, the first 1
                                 nan, 2, nan, 9, -1,  // the first NaN, for both
                                 -0.0, 0.0, 5, 5, -4, //
                                 8, 8, 8, 8, 8}}};    // all equal: position 0
  expect_everywhere(text,
                    {{"hi", {1, 0, 2, 0}},
                     {"lo", {3, 0, 4, 0}},
                     {"head", {1, 0, 2, 0}},
                     {"none", {-1, -1, -1, -1}},
                     {"as_float", {3, 0, 4, 0}}},
                    inputs);
}

TEST(LanguageSemanticsTest, ArgmaxNeedsExactlyOneReducedIndex) {
  Result<ir::Program> two = lang::parse_program("input x : f32[2, 3]\noutput y : i32\ny = argmax(x[r, c])\n", "two.kiln");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("two.kiln:3:5: error: argmax(...) gives a position along one index, but it "
                                        "reduces over 2 ('r', 'c')"),
            std::string::npos)
      << two.status();
}

// Reductions inside expressions (language version 2) mean computing each into a temporary
// first: the same program written with the temporaries gives the same values, bit for bit, on
// every device and with either lowering.
void expect_same_as_temporaries(const std::string& inner, const std::string& temporaries, const Outputs& inputs) {
  each_device_and_lowering([&](const std::string& device, const ir::LowerOptions& lower) {
    Result<Outputs> got = run_program(device, inner, lower, inputs);
    Result<Outputs> want = run_program(device, temporaries, lower, inputs);
    ASSERT_TRUE(got.ok() && want.ok()) << got.status() << "; " << want.status();
    for (const auto& [name, values] : *want) {
      if (got->count(name)) {
        EXPECT_EQ(got->at(name), values) << name;
      }
    }
  });
  expect_cuda_builds(inner);
}

constexpr const char* kDenseDeclarations =
    "input h : f32[3, 4]\ninput w : f32[4, 5]\ninput b : f32[5]\ninput x : f32[3, 5]\ninput lab : i32[3]\n"
    "output o : f32[3, 5]\noutput y : f32[3, 5]\noutput s : f32[3]\noutput hits : f32\noutput loss : f32\n";

Outputs dense_inputs() {
  Outputs in;
  for (int i = 0; i < 12; ++i) in["h"].push_back((i * 7 % 11) * 0.25 - 1);
  for (int i = 0; i < 20; ++i) in["w"].push_back((i * 5 % 13) * 0.125 - 0.75);
  for (int i = 0; i < 5; ++i) in["b"].push_back(i * 0.5 - 1);
  for (int i = 0; i < 15; ++i) in["x"].push_back((i * 3 % 7) * 0.5 - 1.25);
  in["lab"] = {2, 0, 4};
  return in;
}

TEST(LanguageSemanticsTest, ReductionsInsideExpressionsAreTheirTemporaries) {
  const std::string inner = std::string(kDenseDeclarations) +
      "o[n, k] = sum(h[n, j] * w[j, k]) + b[k]\n"
      "y[i, j] = exp(x[i, j] - max(x[i, m])) / sum(exp(x[i, k] - max(x[i, m])))\n"
      // nested: the max keeps n, which its scope (the sum's argument) uses
      "s[n] = 2 * sum(x[n, k] - max(h[n, j] * 4)) + mean(x[n, k])\n"
      "hits = sum(select(argmax(o[n, k]) == lab[n], 1, 0))\n"
      "loss += sum(log(sum(exp(y[n, k]))) - y[n, 0])\n";
  const std::string temporaries = std::string(kDenseDeclarations) +
      "tensor p : f32[3, 5]\ntensor mx : f32[3]\ntensor se : f32[3]\ntensor mh : f32[3]\ntensor sx : f32[3]\n"
      "tensor mn : f32[3]\ntensor am : i32[3]\ntensor ls : f32[3]\ntensor ex : f32[3, 5]\n"
      "p[n, k] = sum(h[n, j] * w[j, k])\no[n, k] = p[n, k] + b[k]\n"
      // the sum's argument, computed outside it too, is a temporary of its own (language.md)
      "mx[i] = max(x[i, m])\nex[i, k] = exp(x[i, k] - mx[i])\nse[i] = sum(ex[i, k])\ny[i, j] = ex[i, j] / se[i]\n"
      "mh[n] = max(h[n, j] * 4)\nsx[n] = sum(x[n, k] - mh[n])\nmn[n] = mean(x[n, k])\ns[n] = 2 * sx[n] + mn[n]\n"
      "am[n] = argmax(o[n, k])\nhits = sum(select(am[n] == lab[n], 1, 0))\n"
      "ls[n] = sum(exp(y[n, k]))\nloss += sum(log(ls[n]) - y[n, 0])\n";
  expect_same_as_temporaries(inner, temporaries, dense_inputs());
}

TEST(LanguageSemanticsTest, ReductionsInsideExpressionsGiveExactValues) {
  // Row sums minus row maxima plus the position of the maximum, and a count per row.
  expect_everywhere("input x : f32[2, 4]\noutput o : f32[2]\noutput cnt : i32[2]\n"
                    "o[r] = sum(x[r, c]) - max(x[r, c]) + argmax(x[r, c])\n"
                    "cnt[r] = sum(select(x[r, k] > mean(x[r, j]), 1, 0))\n",
                    {{"o", {5 - 4 + 2, -10 + 1 + 0}}, {"cnt", {1, 1}}}, {{"x", {1, 0, 4, 0, -1, -3, -3, -3}}});
}

// Gathers (language version 2): a subscript that reads an i32 tensor reads at the position it
// reads, as NumPy's take does, except that a position outside its dimension reads 0 (and, in a
// reduction, contributes nothing). Gathers nest, combine with indices, read inlined
// intermediates and inner reductions' results, and a statement that gathers from its own target
// reads the values from before it.
TEST(LanguageSemanticsTest, GathersReadAtThePositionTheyRead) {
  expect_everywhere(R"(
input  z : f32[3, 4]
input  lab : i32[3]
input  e : f32[5, 2]
input  t : i32[4]
input  perm : i32[4]
param  q : f32[4]
tensor h : f32[3, 4]
output pick : f32[3]
output flip : f32[3]
output pair : f32[3]
output emb : f32[4, 2]
output nest : f32[4]
output loss : f32
output hv : f32[3]
output top : f32[3]
pick[n] = z[n, lab[n]]
flip[n] = z[n, 3 - lab[n]]
pair[n] = sum(z[n, lab[n] + k]) where k < 2
emb[i, j] = e[t[i], j]
nest[i] = f32(t[t[i]])
loss = sum(-z[n, lab[n]])
h[n, c] = z[n, c] * 2
hv[n] = h[n, lab[n]]
top[n] = z[n, argmax(z[n, c])]
q[i] = q[perm[i]]
)",
                    {{"pick", {2, 0, 0}},
                     {"flip", {1, 0, 0}},
                     {"pair", {5, 4, 0}},
                     {"emb", {30, 31, 0, 1, 0, 0, 0, 0}},
                     {"nest", {-2, 3, 0, 0}},
                     {"loss", {-2}},
                     {"hv", {4, 0, 0}},
                     {"top", {3, 7, 11}},
                     {"q", {20, 30, 40, 10}}},
                    {{"z", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
                     {"lab", {2, -1, 4}},
                     {"e", {0, 1, 10, 11, 20, 21, 30, 31, 40, 41}},
                     {"t", {3, 0, 7, -2}},
                     {"perm", {1, 2, 3, 0}},
                     {"q", {10, 20, 30, 40}}});
}

// A gathered subscript reads i32 values; a target's subscripts never gather.
// Language version 3: a gather reads any integer type (i64 indices, u8 labels), never a float.
TEST(LanguageSemanticsTest, GathersReadIntegerValuesOnly) {
  Result<ir::Program> f32_position =
      lang::parse_program("input x : f32[4, 5]\ninput v : f32[5]\noutput z : f32[4, 5]\nz[i, j] = x[i, v[j]]\n", "g.kiln");
  ASSERT_FALSE(f32_position.ok());
  EXPECT_NE(f32_position.status().message().find("g.kiln:4:16: error: a subscript of 'x' reads a f32 value; a gathered "
                                                 "subscript reads integer values (convert with i32(...))"),
            std::string::npos)
      << f32_position.status();
  for (const char* type : {"i64", "u8", "i16", "u64"}) {
    Result<ir::Program> integer = lang::parse_program(
        std::string("input x : f32[4, 5]\ninput v : ") + type + "[5]\noutput z : f32[4, 5]\nz[i, j] = x[i, v[j]]\n",
        "g.kiln");
    EXPECT_TRUE(integer.ok()) << type << ": " << integer.status();
  }
  Result<ir::Program> target = lang::parse_program("input t : i32[4]\noutput z : f32[4]\nz[t[i]] = 1\n", "g.kiln");
  ASSERT_FALSE(target.ok());
  EXPECT_NE(target.status().message().find("g.kiln:3:3: error: target subscripts must be bare index names"), std::string::npos)
      << target.status();
}

// `inf` and `nan` (predeclared float literals) as a masked softmax uses them: -inf for masked
// positions, exp(-inf) = 0, a max that meets NaN, NaN kept, and i32 conversions that saturate.
TEST(LanguageSemanticsTest, InfAndNanLiteralsEverywhere) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  expect_everywhere(R"(
const neg : f32 = -inf
const hole : f64 = nan
param low : f32[2] = -inf
input x : f32[4]
input m : i32[4]
output y : f32[4]
output z : f64[4]
output e : f32[4]
output top : f32
output sat : i32[4]
output isnan : f64[4]
output lows : f32[2]
y[i] = select(m[i], x[i], -inf)
z[i] = select(m[i], f64(x[i]), hole)
e[i] = select(m[i], 0, exp(y[i]))
top = max(select(m[i], x[i], neg))
sat[i] = i32(select(m[i], inf, neg))
isnan[i] = z[i] != z[i]
lows[k] = low[k]
)",
                    {{"y", {1, -kInf, 3, -kInf}},
                     {"z", {1, kNaN, 3, kNaN}},
                     {"e", {0, 0, 0, 0}},
                     {"top", {3}},
                     {"sat", {2147483647, -2147483648.0, 2147483647, -2147483648.0}},
                     {"isnan", {0, 1, 0, 1}},
                     {"lows", {-kInf, -kInf}}},
                    {{"x", {1, 2, 3, 4}}, {"m", {1, 0, 1, 0}}});
}

// Integer consts as dimensions, alone and in affine expressions, agree with bounds that use them.
TEST(LanguageSemanticsTest, ConstsAsDimensionsEverywhere) {
  expect_everywhere(R"(
const D : i32 = 3
const H : i32 = D - 1
input x : f32[2, D]
output y : f32[D + 1]
output c : f32[H, 2*D]
y[j] = sum(x[i, j - 1]) where j < D + 1
c[a, b] = a * 10 + b
)",
                    {{"y", {0, 5, 7, 9}}, {"c", {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}}},
                    {{"x", {1, 2, 3, 4, 5, 6}}});
}

// erf: exact where it is exact (the signed zeros, +-1 from where it rounds to 1, the infinities,
// NaN), and exact GELU within f32 rounding of the double reference (cpu's f32 erf is kiln's own,
// within 1 ulp; opencl's the device's; interp's the C library's in double, rounded once). Where
// erf nears -1, 1 + erf cancels: f32 devices keep an absolute error of a few ulps of 1 times x
// there, which is GELU's own conditioning in f32 (a correctly rounded erf has it too), so the
// check is relative to the result's scale, |x|.
TEST(LanguageSemanticsTest, ErfAndExactGeluEverywhere) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> special = {0, -0.0, 6, -6, 50, kInf, -kInf, kNaN};
  expect_everywhere(R"(
input s : f32[8]
input d : f64[8]
output es : f32[8]
output ed : f64[8]
es[i] = erf(s[i])
ed[i] = erf(d[i])
)",
                    {{"es", {0, -0.0, 1, -1, 1, 1, -1, kNaN}}, {"ed", {0, -0.0, 1, -1, 1, 1, -1, kNaN}}},
                    {{"s", special}, {"d", special}});
  std::vector<double> x;
  for (int i = 0; i < 64; ++i) x.push_back(static_cast<float>(-4.0 + 8.0 * i / 63.0));
  const std::string gelu = R"(
input x : f32[64]
output g : f32[64]
output g64 : f64[64]
g[i] = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0)))
g64[i] = 0.5 * f64(x[i]) * (1 + erf(f64(x[i]) / sqrt(2.0)))
)";
  each_device_and_lowering([&](const std::string& device, const ir::LowerOptions& lower) {
    Result<Outputs> got = run_program(device, gelu, lower, {{"x", x}});
    ASSERT_TRUE(got.ok()) << got.status();
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = 0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0)));
      EXPECT_NEAR(got->at("g")[i], want, 4e-7 * std::max(1.0, std::fabs(x[i]))) << "gelu(" << x[i] << ")";
      EXPECT_NEAR(got->at("g64")[i], want, 1e-15 * std::max(1.0, std::fabs(x[i]))) << "gelu(" << x[i] << ") in f64";
    }
  });
  expect_cuda_builds(gelu);
}

}  // namespace
}  // namespace kiln::e2e
