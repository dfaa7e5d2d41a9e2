// The forms a GPT-style block needs (language version 2), end to end on every device (interp,
// cpu, and opencl where a platform is present), each with the default lowering and the plain
// one, against values computed here: a fixed tensor read at an index that ranges over a size
// (learned positions: the read is range-checked), triangular `where` bounds (the causal mask) in
// every kind of reduction and through the passes that vectorize, tile and call gemm, and checked
// gathers (LowerOptions::check_bounds), whose failure names the statement, the tensor and the
// index. The CUDA C of each must build too (cuda_build.h), where the toolchain is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/code.h"
#include "kiln/runtime/program_instance.h"
#include "runtime/cuda_build.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

using Values = std::map<std::string, std::vector<double>>;

// Runs the default routines of `text` at `sizes` with `inputs` (every other input zero) and
// returns every output and param.
Result<Values> run_program(const std::string& device_name, const std::string& text, const ir::LowerOptions& lower,
                           const std::vector<int64_t>& sizes, const Values& inputs) {
  KILN_ASSIGN_OR_RETURN(ir::Program program, lang::parse_program(text, "block.kiln"));
  TempDir cache;
  KILN_ASSIGN_OR_RETURN(hal::DeviceRef device, open_device(device_name, cache.path()));
  runtime::ProgramOptions options;
  options.lower = lower;
  options.sizes = sizes;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<runtime::ProgramInstance> instance,
                        runtime::ProgramInstance::create(device, program, options));
  const ir::Program& shaped = instance->lowered().program;  // the nodes at the sizes
  for (const auto& [name, values] : inputs) {
    const ir::TensorNode* node = shaped.find_node(name);
    if (!node) return invalid_argument_error("no input " + name);
    HostTensor t = empty_tensor(*node);
    if (static_cast<size_t>(t.size()) != values.size()) return invalid_argument_error("input " + name + " has another size");
    for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
    KILN_RETURN_IF_ERROR(write_tensor(*instance, name, t));
  }
  for (const std::string& routine : default_routines(program)) KILN_RETURN_IF_ERROR(instance->run(routine));
  Values out;
  for (const ir::TensorNode* node : result_nodes(program)) {
    KILN_ASSIGN_OR_RETURN(HostTensor t, read_tensor(*instance, *shaped.find_node(node->name)));
    out[node->name] = t.values();
  }
  return out;
}

// Its CUDA C must build (no GPU runs it here), with either lowering.
void expect_cuda_builds(const std::string& text, bool check_bounds = false) {
  static const Status cuda = cuda_toolchain_available();
  if (!cuda.ok()) return;
  for (ir::LowerOptions lower : {ir::LowerOptions{}, plain_lowering()}) {
    lower.check_bounds = check_bounds;
    Result<ir::Program> program = lang::parse_program(text, "block.kiln");
    ASSERT_TRUE(program.ok()) << program.status();
    Result<ir::LoweredProgram> lowered = ir::lower_program(*program, lower);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    Status built = check_cuda_builds(*lowered, "block.kiln");
    EXPECT_TRUE(built.ok()) << built;
  }
}

// Expects `expected` exactly on every device with either lowering (`check_bounds` on).
void expect_everywhere(const std::string& text, const std::vector<int64_t>& sizes, const Values& inputs,
                       const Values& expected, bool check_bounds = false) {
  for (const std::string& device : present_devices()) {
    for (ir::LowerOptions lower : {ir::LowerOptions{}, plain_lowering()}) {
      lower.check_bounds = check_bounds;
      SCOPED_TRACE(device + (lower.optimize ? ", default lowering" : ", plain lowering"));
      Result<Values> got = run_program(device, text, lower, sizes, inputs);
      ASSERT_TRUE(got.ok()) << got.status();
      for (const auto& [name, values] : expected) EXPECT_EQ(got->at(name), values) << name;
    }
  }
}

// Row-major values of a tensor of `dims` from `f` of its multi-index.
std::vector<double> tensor_of(const std::vector<int64_t>& dims, const std::function<double(const std::vector<int64_t>&)>& f) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::vector<double> out;
  std::vector<int64_t> at(dims.size(), 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t rest = n;
    for (size_t d = dims.size(); d-- > 0;) {
      at[d] = rest % dims[d];
      rest /= dims[d];
    }
    out.push_back(f(at));
  }
  return out;
}

double as_f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// Learned positions: pos is a param of 6 rows read at t, which ranges over the size T. Rows past
// pos's read 0 (and contribute nothing to a reduction), as a compound subscript out of range does;
// a `where` bound that is a size gives the range of an index that stands alone only in pos.
TEST(TransformerFormsTest, AFixedTensorReadAtASizedIndex) {
  const std::string text = R"(size B
size T
input  tok : f32[B, T, 4]
param  pos : f32[6, 4]
output x : f32[B, T, 4]
output s : f32[B, 4]
output q : f32[4]
x[b, t, d] = tok[b, t, d] + pos[t, d]
s[b, d] = sum(tok[b, t, d] * pos[t, d])
q[d] = sum(pos[u, d]) where u < T
)";
  auto pos = [](int64_t t, int64_t d) { return t < 6 ? static_cast<double>(t * 4 + d + 1) : 0.0; };
  auto tok = [](int64_t b, int64_t t, int64_t d) { return static_cast<double>((b * 7 + t * 3 + d) % 5 - 2); };
  for (int64_t T : {0, 3, 6, 9}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    const int64_t B = 2;
    Values in = {{"tok", tensor_of({B, T, 4}, [&](const auto& i) { return tok(i[0], i[1], i[2]); })},
                 {"pos", tensor_of({6, 4}, [&](const auto& i) { return pos(i[0], i[1]); })}};
    Values want;
    want["x"] = tensor_of({B, T, 4}, [&](const auto& i) { return tok(i[0], i[1], i[2]) + pos(i[1], i[2]); });
    want["s"] = tensor_of({B, 4}, [&](const auto& i) {
      double sum = 0;
      for (int64_t t = 0; t < T; ++t) sum += tok(i[0], t, i[1]) * pos(t, i[1]);
      return sum;
    });
    want["q"] = tensor_of({4}, [&](const auto& i) {
      double sum = 0;
      for (int64_t u = 0; u < T; ++u) sum += pos(u, i[0]);
      return sum;
    });
    expect_everywhere(text, {B, T}, in, want);
  }
  expect_cuda_builds(text);
}

// Triangular bounds in every kind of reduction, over small fixed shapes: a limit past the
// index's range, an empty range (the neutral element), both indices reduced, a negative
// coefficient, an index that stands alone nowhere, an inner reduction, and a product whose limit
// names the parallel index or an inner target index.
TEST(TransformerFormsTest, TriangularBoundsInEveryReduction) {
  const std::string text = R"(input  a : f32[5, 7]
input  w : f32[4]
input  p : f32[5, 5]
input  v : f32[5, 3]
output s : f32[5]
output m : f32[5]
output n : f32[5]
output am : i32[5]
output e : f32[5]
output mn : f32[5]
output tri : f32
output rev : f32[5]
output nw : f32[5]
output sh : f32[5]
output inner : f32[5]
output att : f32[5, 3]
output low : f32[5, 3]
s[t] = sum(a[t, u]) where u < t + 1
m[t] = max(a[t, u]) where u < t + 1
n[t] = mean(a[t, u]) where u < t + 1
am[t] = argmax(a[t, u]) where u < t + 1
e[t] = sum(a[t, u]) where u < t - 1
mn[t] = min(a[t, u]) where u < t - 1
tri = sum(a[t, u]) where u < t + 1
rev[t] = sum(a[t, u]) where u < 7 - t
nw[t] = sum(w[u]) where u < 2*t + 1
sh[t] = sum(a[t, t - u]) where u < t + 1
inner[t] = 2 * sum(a[t, u]) + 1 where u < t + 1
att[t, d] = sum(p[t, u] * v[u, d]) where u < t + 1
low[t, d] = sum(p[t, u] * v[u, d]) where u < d + 1
)";
  auto a = [](int64_t t, int64_t u) { return static_cast<double>((t * 7 + u * 3) % 11 - 5); };
  auto w = [](int64_t u) { return static_cast<double>(u * 2 - 3); };
  auto p = [](int64_t t, int64_t u) { return static_cast<double>((t + 2 * u) % 4 - 1); };
  auto v = [](int64_t u, int64_t d) { return static_cast<double>((u * 3 + d) % 5 - 2); };
  Values in = {{"a", tensor_of({5, 7}, [&](const auto& i) { return a(i[0], i[1]); })},
               {"w", tensor_of({4}, [&](const auto& i) { return w(i[0]); })},
               {"p", tensor_of({5, 5}, [&](const auto& i) { return p(i[0], i[1]); })},
               {"v", tensor_of({5, 3}, [&](const auto& i) { return v(i[0], i[1]); })}};
  auto row_sum = [&](int64_t t, int64_t below) {
    double sum = 0;
    for (int64_t u = 0; u < std::min<int64_t>(7, below); ++u) sum += a(t, u);
    return sum;
  };
  const double inf = std::numeric_limits<double>::infinity();
  Values want;
  want["s"] = tensor_of({5}, [&](const auto& i) { return row_sum(i[0], i[0] + 1); });
  want["m"] = tensor_of({5}, [&](const auto& i) {
    double best = -inf;
    for (int64_t u = 0; u <= i[0]; ++u) best = std::max(best, a(i[0], u));
    return best;
  });
  want["n"] = tensor_of({5}, [&](const auto& i) { return as_f32(row_sum(i[0], i[0] + 1) / static_cast<double>(i[0] + 1)); });
  want["am"] = tensor_of({5}, [&](const auto& i) {
    int64_t at = 0;
    for (int64_t u = 1; u <= i[0]; ++u) at = a(i[0], u) > a(i[0], at) ? u : at;
    return static_cast<double>(at);
  });
  want["e"] = tensor_of({5}, [&](const auto& i) { return row_sum(i[0], i[0] - 1); });
  want["mn"] = tensor_of({5}, [&](const auto& i) {
    double least = inf;
    for (int64_t u = 0; u < i[0] - 1; ++u) least = std::min(least, a(i[0], u));
    return least;
  });
  double tri = 0;
  for (int64_t t = 0; t < 5; ++t) tri += row_sum(t, t + 1);
  want["tri"] = {tri};
  want["rev"] = tensor_of({5}, [&](const auto& i) { return row_sum(i[0], 7 - i[0]); });
  want["nw"] = tensor_of({5}, [&](const auto& i) {
    double sum = 0;
    for (int64_t u = 0; u < std::min<int64_t>(4, 2 * i[0] + 1); ++u) sum += w(u);
    return sum;
  });
  want["sh"] = want["s"];
  want["inner"] = tensor_of({5}, [&](const auto& i) { return 2 * row_sum(i[0], i[0] + 1) + 1; });
  want["att"] = tensor_of({5, 3}, [&](const auto& i) {
    double sum = 0;
    for (int64_t u = 0; u <= i[0]; ++u) sum += p(i[0], u) * v(u, i[1]);
    return sum;
  });
  want["low"] = tensor_of({5, 3}, [&](const auto& i) {
    double sum = 0;
    for (int64_t u = 0; u <= i[1]; ++u) sum += p(i[0], u) * v(u, i[1]);
    return sum;
  });
  expect_everywhere(text, {}, in, want);
  expect_cuda_builds(text);
}

// Shapes that take the passes' fast paths: a row long enough to split into lanes, a product
// with 64 rows (a gemm call and register tiles, were it not triangular), and an attention-like
// product folded in place over an inner target loop.
TEST(TransformerFormsTest, TriangularBoundsThroughTheFastPaths) {
  const std::string text = R"(input  a : f32[70, 100]
input  x : f32[64, 64]
input  y : f32[64, 64]
input  v : f32[100, 8]
output s : f32[70]
output c : f32[64, 64]
output att : f32[70, 8]
s[t] = sum(a[t, u]) where u < t + 31
c[i, j] = sum(x[i, k] * y[k, j]) where k < i + 1
att[t, d] = sum(a[t, u] * v[u, d]) where u < t + 1
)";
  auto a = [](int64_t t, int64_t u) { return static_cast<double>((t * 5 + u * 3) % 9 - 4); };
  auto x = [](int64_t i, int64_t k) { return static_cast<double>((i + 3 * k) % 5 - 2); };
  auto y = [](int64_t k, int64_t j) { return static_cast<double>((2 * k + j) % 7 - 3); };
  auto v = [](int64_t u, int64_t d) { return static_cast<double>((u + d) % 3 - 1); };
  Values in = {{"a", tensor_of({70, 100}, [&](const auto& i) { return a(i[0], i[1]); })},
               {"x", tensor_of({64, 64}, [&](const auto& i) { return x(i[0], i[1]); })},
               {"y", tensor_of({64, 64}, [&](const auto& i) { return y(i[0], i[1]); })},
               {"v", tensor_of({100, 8}, [&](const auto& i) { return v(i[0], i[1]); })}};
  Values want;
  want["s"] = tensor_of({70}, [&](const auto& i) {
    double sum = 0;
    for (int64_t u = 0; u < std::min<int64_t>(100, i[0] + 31); ++u) sum += a(i[0], u);
    return sum;
  });
  want["c"] = tensor_of({64, 64}, [&](const auto& i) {
    double sum = 0;
    for (int64_t k = 0; k <= i[0]; ++k) sum += x(i[0], k) * y(k, i[1]);
    return sum;
  });
  want["att"] = tensor_of({70, 8}, [&](const auto& i) {
    double sum = 0;
    for (int64_t u = 0; u <= i[0]; ++u) sum += a(i[0], u) * v(u, i[1]);
    return sum;
  });
  expect_everywhere(text, {}, in, want);
  expect_cuda_builds(text);
  // The product stays a statement: gemm would sum every k.
  Result<ir::Program> program = lang::parse_program(text, "block.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(lowered->routines[0].calls.empty());
}

// The causal mask over a size: one build at T = 0, 1, 5 and 70, with an index that stands alone
// nowhere whose range (T - 1) is below 0 at T = 0.
TEST(TransformerFormsTest, TriangularBoundsOverASize) {
  const std::string text = R"(size T
input  a : f32[T, T]
output s : f32[T]
output m : f32[T]
output n : f32[T]
output st : f32[T]
s[t] = sum(a[t, u]) where u < t + 1
m[t] = max(a[t, u]) where u < t + 1
n[t] = mean(a[t, u]) where u < t + 1
st[t] = sum(a[t, t - 1 - u]) where u < t
)";
  auto a = [](int64_t t, int64_t u) { return static_cast<double>((t * 3 + u * 5) % 7 - 3); };
  for (int64_t T : {0, 1, 5, 70}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    Values in = {{"a", tensor_of({T, T}, [&](const auto& i) { return a(i[0], i[1]); })}};
    auto below = [&](int64_t t, int64_t limit) {
      double sum = 0;
      for (int64_t u = 0; u < limit; ++u) sum += a(t, u);
      return sum;
    };
    Values want;
    want["s"] = tensor_of({T}, [&](const auto& i) { return below(i[0], i[0] + 1); });
    want["m"] = tensor_of({T}, [&](const auto& i) {
      double best = -std::numeric_limits<double>::infinity();
      for (int64_t u = 0; u <= i[0]; ++u) best = std::max(best, a(i[0], u));
      return best;
    });
    want["n"] = tensor_of({T}, [&](const auto& i) { return as_f32(below(i[0], i[0] + 1) / static_cast<double>(i[0] + 1)); });
    want["st"] = tensor_of({T}, [&](const auto& i) { return below(i[0], i[0]); });
    expect_everywhere(text, {T}, in, want);
  }
  expect_cuda_builds(text);
}

// Runs `text` with check_bounds on every device and either lowering, and expects the run to fail
// with OUT_OF_RANGE and a message holding each of `fragments`.
void expect_check_failure(const std::string& text, const std::vector<int64_t>& sizes, const Values& inputs,
                          const std::vector<std::string>& fragments) {
  for (const std::string& device : present_devices()) {
    for (ir::LowerOptions lower : {ir::LowerOptions{}, plain_lowering()}) {
      lower.check_bounds = true;
      SCOPED_TRACE(device + (lower.optimize ? ", default lowering" : ", plain lowering"));
      Result<Values> got = run_program(device, text, lower, sizes, inputs);
      ASSERT_FALSE(got.ok());
      EXPECT_EQ(got.status().code(), StatusCode::kOutOfRange) << got.status();
      for (const std::string& f : fragments) EXPECT_NE(got.status().message().find(f), std::string::npos) << got.status();
    }
  }
}

// check_bounds: a gathered subscript outside its dimension fails the run, naming the statement's
// FILE:LINE, the tensor, its dimension and size, and the index, as PyTorch's IndexError; in range
// it computes what the unchecked build does, and without it the read is 0.
// What the runtime tells a driver of each kernel it builds (hal::ExportInfo): the bytes its entry
// check asks of each binding, and that only a kernel with checks may fail otherwise, so that the
// cuda device runs the others without a status slot to read back.
TEST(TransformerFormsTest, KernelsWithoutChecksAreToldNotToFail) {
  Result<ir::Program> program = lang::parse_program(R"(input  e : f32[5, 3]
input  t : i32[4]
tensor h : f32[4, 3]
output y : f32[4, 3]
h[i, j] = e[t[i], j]
routine scale {
  y[i, j] = h[i, j] * 2
}
)", "block.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  ir::LowerOptions lower = plain_lowering();
  lower.check_bounds = true;
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program, lower);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  TempDir cache;
  Result<hal::DeviceRef> device = open_device("interp", cache.path());
  ASSERT_TRUE(device.ok()) << device.status();
  Result<hal::ExecutableRef> built = runtime::build_executable(*lowered, *device);
  ASSERT_TRUE(built.ok()) << built.status();
  std::map<std::string, bool> may_fail;
  for (const hal::ExportInfo& info : (*built)->exports()) {
    may_fail[info.name] = info.may_fail;
    ASSERT_EQ(info.binding_min_bytes.size(), info.binding_count) << info.name;
  }
  ASSERT_EQ(may_fail.size(), 2u);
  for (const ir::LoweredRoutine& r : lowered->routines) {
    for (const ir::Kernel& k : r.kernels) {
      EXPECT_EQ(may_fail.at(k.name), r.name == "main") << k.name << " of routine '" << r.name << "'";
    }
  }
  const hal::ExportInfo& first = (*built)->exports()[0];
  for (size_t i = 0; i < first.binding_min_bytes.size(); ++i) {
    const ir::TensorNode& node = lowered->program.nodes[lowered->routines[0].kernels[0].nodes[i]];
    EXPECT_EQ(first.binding_min_bytes[i], byte_size(node)) << node.name;
  }
}

TEST(TransformerFormsTest, CheckedGathersFailNamingTheStatementTheTensorAndTheIndex) {
  const std::string embed = R"(input  e : f32[5, 3]
input  t : i32[4]
output y : f32[4, 3]
y[i, j] = e[t[i], j]
)";
  auto e = [](int64_t r, int64_t c) { return static_cast<double>(r * 3 + c + 1); };
  const std::vector<double> table = tensor_of({5, 3}, [&](const auto& i) { return e(i[0], i[1]); });
  const std::vector<double> rows = {0, 4, 2, 1};
  expect_everywhere(embed, {}, {{"e", table}, {"t", rows}},
                    {{"y", tensor_of({4, 3}, [&](const auto& i) { return e(static_cast<int64_t>(rows[i[0]]), i[1]); })}},
                    /*check_bounds=*/true);
  expect_check_failure(embed, {}, {{"e", table}, {"t", {0, 4, 7, 1}}},
                       {"block.kiln:4: index out of range: dimension 0 of 'e' has size 5, but e[t[i], j] in routine "
                        "'main' (y[i, j] = e[t[i], j]) reads index 7"});
  expect_check_failure(embed, {}, {{"e", table}, {"t", {0, -1, 2, 1}}}, {"reads index -1"});
  // Unchecked, the row out of range reads 0.
  expect_everywhere(embed, {}, {{"e", table}, {"t", {0, 4, 7, 1}}},
                    {{"y", tensor_of({4, 3}, [&](const auto& i) { return i[0] == 2 ? 0.0 : e(i[0] == 0 ? 0 : i[0] == 1 ? 4 : 1, i[1]); })}});
  expect_cuda_builds(embed, /*check_bounds=*/true);

  // In a reduction (a label per row), and through an inlined intermediate, whose statement is named.
  expect_check_failure("input  z : f32[4, 5]\ninput  lab : i32[4]\noutput loss : f32\nloss = sum(z[n, lab[n]])\n", {},
                       {{"lab", {0, 5, 2, 1}}},
                       {"block.kiln:4: index out of range: dimension 1 of 'z' has size 5", "reads index 5"});
  const std::string inlined = R"(input  e : f32[5, 3]
input  t : i32[4]
tensor h : f32[4, 3]
output g : f32[4, 3]
h[i, j] = e[t[3 - i], j] * 2
g[i, j] = h[i, j] + 1
)";
  expect_check_failure(inlined, {}, {{"e", table}, {"t", {0, 9, 2, 1}}},
                       {"block.kiln:5: index out of range: dimension 0 of 'e' has size 5", "(h[i, j] = ", "reads index 9"});
  // Over a size: the dimension is named as written.
  expect_check_failure("size N\ninput  e : f32[N, 3]\ninput  t : i32[4]\noutput y : f32[4, 3]\ny[i, j] = e[t[i], j]\n", {2},
                       {{"e", tensor_of({2, 3}, [&](const auto& i) { return e(i[0], i[1]); })}, {"t", {0, 1, 2, 1}}},
                       {"block.kiln:5: index out of range: dimension 0 of 'e' has size N", "reads index 2"});
}

}  // namespace
}  // namespace kiln::e2e
