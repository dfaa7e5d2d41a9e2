// The `kiln` binary, run as a separate process (docs/cli.md): commands, options, .npy
// input and output, exit statuses and messages. Every process gets an explicit environment
// (`env -i`), with its own KILN_CACHE_DIR.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <regex>
#include <set>

#include "cli_test_util.h"
#include "kiln/drivers/drivers.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/sizes.h"
#include "kiln/lang/parser.h"

namespace kiln::tools {
namespace {

// --- devices -------------------------------------------------------------------------------------

TEST_F(CliTest, DevicesListsCpuAndInterp) {
  ProcessResult r = run({"devices"});
  ASSERT_EQ(r.exit_code, 0) << describe_run({"devices"}, r);
  EXPECT_TRUE(std::regex_search(r.output, std::regex("(^|\n)cpu(:0)?[: ]"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("(^|\n)interp(:0)?[: ]"))) << r.output;
  EXPECT_EQ(run({"devices", "extra"}).exit_code, 2);
}

TEST_F(CliTest, DevicesSaysWhyCudaIsUnavailable) {
  // The cuda driver is listed everywhere; until its device is written it says why it cannot be
  // used (no libcuda, no device, no NVRTC, or the devices found and that the device is not built).
  ProcessResult r = run({"devices"});
  ASSERT_EQ(r.exit_code, 0) << describe_run({"devices"}, r);
  EXPECT_TRUE(std::regex_search(r.output, std::regex("(^|\n)cuda: unavailable: \\S"))) << r.output;
}

// --- run -----------------------------------------------------------------------------------------

// An example with sizes runs with each of them 37 (random inputs need every size bound): the
// --size options for that, appended to `args`, and the program at those sizes.
ir::Program with_example_sizes(const std::string& path, std::vector<std::string>& args) {
  Result<std::string> text = read_file(path);
  EXPECT_TRUE(text.ok());
  Result<ir::Program> program = lang::parse_program(text.ok() ? *text : "", path);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  for (const ir::SizeDecl& s : program->sizes) args.insert(args.end(), {"--size", s.name + "=37"});
  if (!program->has_sizes()) return *program;
  Result<ir::Program> at = ir::specialize_sizes(*program, std::vector<int64_t>(program->sizes.size(), 37));
  EXPECT_TRUE(at.ok()) << at.status();
  return at.ok() ? *at : ir::Program{};
}

TEST_F(CliTest, RunsEveryExampleWithPrint) {
  std::vector<std::string> names = example_names();
  ASSERT_GE(names.size(), 6u);
  for (const std::string& name : names) {
    for (const char* device : {"cpu", "interp"}) {
      std::vector<std::string> args = {"run", example(name), "--print", "--device", device};
      const ir::Program at_sizes = with_example_sizes(example(name), args);
      ProcessResult r = run(args);
      ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
      // Every output is printed with its type.
      const ir::Program* program = &at_sizes;
      for (const ir::TensorNode& node : program->nodes) {
        if (node.role != ir::Role::kOutput) continue;
        EXPECT_NE(r.output.find(node.name + " : " + describe(node.dtype, node.dims)), std::string::npos)
            << node.name << "\n" << describe_run(args, r);
      }
      EXPECT_EQ(r.output.find("nan"), std::string::npos) << describe_run(args, r);
    }
  }
}

// Every number in a text, in order.
std::vector<double> numbers_in(const std::string& text) {
  std::vector<double> out;
  std::regex number(R"([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it) {
    out.push_back(std::stod(it->str()));
  }
  return out;
}

TEST_F(CliTest, SameSeedSameOutputsOtherSeedOtherOutputs) {
  auto printed = [&](const std::string& seed, const std::string& device) {
    std::vector<std::string> args = {"run", example("softmax"), "--print", "--seed", seed, "--device", device};
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << describe_run(args, r);
    return r.output;
  };
  const std::string a = printed("1", "cpu");
  EXPECT_EQ(a, printed("1", "cpu"));
  EXPECT_NE(a, printed("2", "cpu"));
  // The interpreter prints the same values (up to rounding in the last printed digit).
  const std::string b = printed("1", "interp");
  std::vector<double> va = numbers_in(a), vb = numbers_in(b);
  ASSERT_EQ(va.size(), vb.size()) << a << "\n" << b;
  EXPECT_GE(va.size(), 40u) << a;
  for (size_t i = 0; i < va.size(); ++i) {
    EXPECT_NEAR(va[i], vb[i], 1e-5 * std::fabs(va[i]) + 1e-6) << "value " << i << "\ncpu:\n" << a << "interp:\n" << b;
  }
}

TEST_F(CliTest, NpyInputsAndOutputsRoundTrip) {
  // softmax: x f32[4, 10] in, y f32[4, 10] out.
  std::vector<float> x(40);
  for (int i = 0; i < 40; ++i) x[i] = std::sin(0.7f * float(i)) * 2.0f;
  ASSERT_TRUE(write_bytes(dir_.file("x.npy"), format_npy(f32_array({4, 10}, x))).ok());
  for (const char* device : {"cpu", "interp"}) {
    const std::string out = dir_.file(std::string("y_") + device + ".npy");
    std::vector<std::string> args = {"run", example("softmax"), "--device", device,
                                     "--input", "x=" + dir_.file("x.npy"), "--output", "y=" + out};
    ProcessResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
    Result<NpyArray> y = read_npy(out);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->dtype, ir::DType::kF32);
    EXPECT_EQ(y->shape, (std::vector<int64_t>{4, 10}));
    std::vector<float> v = f32_values(*y);
    ASSERT_EQ(v.size(), 40u);
    for (int i = 0; i < 4; ++i) {
      double m = -INFINITY, s = 0;
      for (int j = 0; j < 10; ++j) m = std::max(m, double(x[i * 10 + j]));
      for (int j = 0; j < 10; ++j) s += std::exp(double(x[i * 10 + j]) - m);
      for (int j = 0; j < 10; ++j) {
        EXPECT_NEAR(v[i * 10 + j], std::exp(double(x[i * 10 + j]) - m) / s, 1e-6) << device << " y[" << i << ", " << j << "]";
      }
    }
  }

  // A param given as input comes back as output; the `=` form of the option works too.
  std::vector<float> b2 = {1.5f, -2.0f, 0.25f, 8.0f};
  ASSERT_TRUE(write_bytes(dir_.file("b2.npy"), format_npy(f32_array({4}, b2))).ok());
  std::vector<std::string> args = {"run", example("mlp"), "--input=b2=" + dir_.file("b2.npy"),
                                   "--output", "b2=" + dir_.file("b2_out.npy"), "--output",
                                   "logits=" + dir_.file("logits.npy"), "--output", "w1=" + dir_.file("w1.npy")};
  ProcessResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  Result<NpyArray> back = read_npy(dir_.file("b2_out.npy"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(f32_values(*back), b2);
  Result<NpyArray> logits = read_npy(dir_.file("logits.npy"));
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{8, 4}));
  Result<NpyArray> w1 = read_npy(dir_.file("w1.npy"));
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_EQ(w1->shape, (std::vector<int64_t>{16, 32}));

  // The output is exactly what was given as input, through an input that is copied unchanged:
  // maxpool of a constant image is that constant.
  std::vector<float> img(2 * 4 * 16 * 16, 0.75f);
  ASSERT_TRUE(write_bytes(dir_.file("img.npy"), format_npy(f32_array({2, 4, 16, 16}, img))).ok());
  args = {"run", example("maxpool"), "--input", "img=" + dir_.file("img.npy"), "--output", "p=" + dir_.file("p.npy")};
  r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  Result<NpyArray> p = read_npy(dir_.file("p.npy"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(f32_values(*p), std::vector<float>(2 * 4 * 8 * 8, 0.75f));
}

TEST_F(CliTest, MismatchedNpyFilesAreRefused) {
  struct Case {
    std::string what;
    std::string bytes;
    std::vector<std::string> expected_in_message;
  };
  NpyArray f64{ir::DType::kF64, {4, 10}, std::string(40 * 8, '\0')};
  NpyArray shape = f32_array({4, 9}, std::vector<float>(36, 0.5f));
  NpyArray i32{ir::DType::kI32, {4, 10}, std::string(40 * 4, '\0')};
  // A Fortran-order array, as numpy writes one.
  std::string dict = "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 10), }";
  std::string header = dict;
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string fortran = std::string("\x93NUMPY\x01\x00", 8);
  fortran += static_cast<char>(header.size() & 0xff);
  fortran += static_cast<char>(header.size() >> 8);
  fortran += header + std::string(40 * 4, '\0');
  const std::vector<Case> cases = {
      {"wrong dtype", format_npy(f64), {"f64", "f32 [4, 10]"}},
      {"wrong dtype (i32)", format_npy(i32), {"i32", "f32 [4, 10]"}},
      {"wrong shape", format_npy(shape), {"[4, 9]", "f32 [4, 10]"}},
      {"Fortran order", fortran, {"Fortran", "C order"}},
      {"not an npy file", "hello, world\n", {}},
      {"truncated", format_npy(shape).substr(0, 100), {}},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string file = dir_.file("bad" + std::to_string(n++) + ".npy");
    ASSERT_TRUE(write_bytes(file, c.bytes).ok());
    std::vector<std::string> args = {"run", example("softmax"), "--input", "x=" + file};
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << c.what << "\n" << describe_run(args, r);
    EXPECT_NE(r.output.find(file), std::string::npos) << c.what << ": the message does not name the file\n" << r.output;
    for (const std::string& expected : c.expected_in_message) {
      EXPECT_NE(r.output.find(expected), std::string::npos) << c.what << ": no '" << expected << "' in\n" << r.output;
    }
  }
  // A file that does not exist: an I/O failure, naming the file.
  std::vector<std::string> args = {"run", example("softmax"), "--input", "x=" + dir_.file("missing.npy")};
  ProcessResult r = run(args);
  EXPECT_NE(r.exit_code, 0) << describe_run(args, r);
  EXPECT_NE(r.output.find("missing.npy"), std::string::npos) << r.output;
  // A name that is not an input or param, and an output that is not an output or param.
  ASSERT_TRUE(write_bytes(dir_.file("ok.npy"), format_npy(f32_array({4, 10}, std::vector<float>(40, 0)))).ok());
  EXPECT_EQ(run({"run", example("softmax"), "--input", "nope=" + dir_.file("ok.npy")}).exit_code, 2);
  EXPECT_EQ(run({"run", example("softmax"), "--input", "y=" + dir_.file("ok.npy")}).exit_code, 2);
  EXPECT_EQ(run({"run", example("softmax"), "--output", "x=" + dir_.file("o.npy")}).exit_code, 2);
  EXPECT_EQ(run({"run", example("softmax"), "--input", "x"}).exit_code, 2);
}

// --- errors --------------------------------------------------------------------------------------

TEST_F(CliTest, ProgramErrorsAreReportedWithLocationQuoteAndCaret) {
  const std::string file = dir_.file("bad.kiln");
  ASSERT_TRUE(write_bytes(file,
                          "input  x : f32[4]\n"
                          "output y : f32[4]\n"
                          "y[i] = x[i] +* 2\n"
                          "y[i] = undeclared[i]\n"
                          "y[i] = sum(x[j])\n"
                          "y[i] = x[i] + 1\n")
                  .ok());
  for (const char* command : {"run", "compile"}) {
    std::vector<std::string> args = {command, file};
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    // FILE:LINE:COLUMN: error: MESSAGE, for several errors.
    std::regex located(std::regex_replace(file, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                       R"(:(\d+):(\d+): error: .+)");
    std::set<int> lines;
    for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), located); it != std::sregex_iterator(); ++it) {
      lines.insert(std::stoi((*it)[1].str()));
      EXPECT_GE(std::stoi((*it)[2].str()), 1);
    }
    EXPECT_GE(lines.size(), 2u) << "expected errors on several lines\n" << describe_run(args, r);
    EXPECT_TRUE(lines.count(3)) << r.output;
    EXPECT_TRUE(lines.count(4)) << r.output;
    EXPECT_FALSE(lines.count(6)) << "line 6 is fine\n" << r.output;
    // The line is quoted, with a caret under the column.
    EXPECT_NE(r.output.find("y[i] = x[i] +* 2"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("y[i] = undeclared[i]"), std::string::npos) << r.output;
    EXPECT_TRUE(std::regex_search(r.output, std::regex(R"((^|\n) *\^)"))) << r.output;
    EXPECT_EQ(r.output.find("usage:"), std::string::npos) << "a program error is not a usage message\n" << r.output;
  }
  // An empty file and a binary one are not crashes.
  ASSERT_TRUE(write_bytes(dir_.file("binary.kiln"), std::string("\0\xff\x01", 3) + "routine {{{\n\x80").ok());
  ProcessResult r = run({"run", dir_.file("binary.kiln")});
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate"},
      {"run"},
      {"compile"},
      {"run", example("softmax"), "--bogus"},
      {"run", example("softmax"), "-x"},
      {"run", example("softmax"), "--repeat", "0"},
      {"run", example("softmax"), "--repeat", "abc"},
      {"run", example("softmax"), "--repeat", "-1"},
      {"run", example("softmax"), "--repeat", "3x"},
      {"run", example("softmax"), "--repeat"},
      {"run", example("softmax"), "--seed", "minus"},
      {"run", example("softmax"), "--routine", "nope"},
      {"run", example("softmax"), "--device", "no_such_device"},
      {"run", example("softmax"), example("softmax")},
      {"run", example("softmax"), "--emit", "ir"},
      {"compile", example("softmax"), "--emit", "assembly"},
      {"compile", example("softmax"), "--print"},
  };
  for (const auto& args : cases) {
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    EXPECT_FALSE(r.output.empty()) << describe_run(args, r);
  }
  ProcessResult r = run({"run", example("softmax"), "--bogus"});
  EXPECT_NE(r.output.find("--bogus"), std::string::npos) << r.output;
  r = run({"run", example("softmax"), "--repeat", "abc"});
  EXPECT_NE(r.output.find("--repeat"), std::string::npos) << r.output;
  // A program file that does not exist: an I/O failure.
  r = run({"run", dir_.file("nonexistent.kiln")});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("nonexistent.kiln"), std::string::npos) << r.output;
  // Help is not an error.
  EXPECT_EQ(run({"--help"}).exit_code, 0);
}

TEST_F(CliTest, RepeatPrintsMinMedianMax) {
  for (const char* device : {"cpu", "interp"}) {
    std::vector<std::string> args = {"run", example("matmul_bias_relu"), "--repeat", "3", "--device", device};
    ProcessResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(min ([0-9.]+) ?ms.*median ([0-9.]+) ?ms.*max ([0-9.]+) ?ms)")))
        << describe_run(args, r);
    const double lo = std::stod(m[1].str()), mid = std::stod(m[2].str()), hi = std::stod(m[3].str());
    for (int i = 1; i <= 3; ++i) {
      // At least three significant digits (docs/cli.md): 0.000812, not 0.001.
      const std::string digits = std::regex_replace(m[i].str(), std::regex(R"(^[0.]*|\.)"), "");
      EXPECT_GE(digits.size(), 3u) << m[i].str() << " in " << r.output;
    }
    EXPECT_LE(lo, mid);
    EXPECT_LE(mid, hi);
    EXPECT_NE(r.output.find("3 runs"), std::string::npos) << r.output;
  }
  // Without --repeat nothing about timing is printed.
  ProcessResult r = run({"run", example("matmul_bias_relu")});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("median"), std::string::npos) << r.output;
}

// --- compile -------------------------------------------------------------------------------------

TEST_F(CliTest, CompileEmitsIrThatReparsesToTheSameProgram) {
  for (const std::string& name : example_names()) {
    const std::string out = dir_.file(name + ".ir.kiln");
    // Without automatic calls, the program as written (with them, a product may be a gemm call).
    std::vector<std::string> args = {"compile", example(name), "--emit", "ir", "--no-auto-calls", "-o", out};
    ProcessResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
    Result<std::string> emitted = read_file(out);
    ASSERT_TRUE(emitted.ok()) << emitted.status();
    // The same text on stdout without -o (and `ir` is the default).
    ProcessResult printed = run({"compile", example(name), "--no-auto-calls"});
    ASSERT_EQ(printed.exit_code, 0) << printed.output;
    EXPECT_EQ(printed.output, *emitted);

    Result<ir::Program> reparsed = lang::parse_program(*emitted, out);
    ASSERT_TRUE(reparsed.ok()) << name << ": the emitted IR does not parse: " << reparsed.status() << "\n" << *emitted;
    EXPECT_EQ(ir::print_program(*reparsed), *emitted) << name;
    Result<std::string> source = read_file(example(name));
    ASSERT_TRUE(source.ok());
    Result<ir::Program> original = lang::parse_program(*source, example(name));
    ASSERT_TRUE(original.ok()) << original.status();
    EXPECT_EQ(ir::print_program(*original), *emitted) << name;
    // And the emitted program runs like the original.
    std::vector<std::string> run_a = {"run", example(name), "--print", "--seed", "3"};
    std::vector<std::string> run_b = {"run", out, "--print", "--seed", "3"};
    with_example_sizes(example(name), run_a);
    with_example_sizes(example(name), run_b);
    ProcessResult a = run(run_a);
    ProcessResult b = run(run_b);
    EXPECT_EQ(a.exit_code, 0) << a.output;
    EXPECT_EQ(a.output, b.output) << name;
  }
}

// The compiler's automatic calls show in --emit ir (and the printed program runs like the
// original); --no-auto-calls keeps the statement, in compile and in run.
TEST_F(CliTest, AutomaticGemmShowsInTheIrAndCanBeTurnedOff) {
  ProcessResult with_calls = run({"compile", example("matmul_bias_relu")});
  ASSERT_EQ(with_calls.exit_code, 0) << with_calls.output;
  EXPECT_NE(with_calls.output.find("call gemm(a, b) -> c\n"), std::string::npos) << with_calls.output;
  ProcessResult lowered = run({"compile", example("matmul_bias_relu"), "--emit", "lowered"});
  EXPECT_NE(lowered.output.find("; call gemm(a, b) -> c"), std::string::npos) << lowered.output;
  // On cpu the call is a kernel of the source that calls the runtime through its RAL context.
  ProcessResult source = run({"compile", example("matmul_bias_relu"), "--emit", "source", "--device", "cpu"});
  ASSERT_EQ(source.exit_code, 0) << source.output;
  EXPECT_NE(source.output.find("return ctx->call(ctx, \"gemm___cpu___pvoid_m2df32_m2df32_m2df32_"), std::string::npos)
      << source.output;
  ProcessResult without = run({"compile", example("matmul_bias_relu"), "--no-auto-calls", "--emit", "lowered"});
  ASSERT_EQ(without.exit_code, 0) << without.output;
  EXPECT_EQ(without.output.find("call"), std::string::npos) << without.output;
  ProcessResult a = run({"run", example("matmul_bias_relu"), "--print", "--seed", "5"});
  ProcessResult b = run({"run", example("matmul_bias_relu"), "--print", "--seed", "5", "--no-auto-calls"});
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  // A contraction over several dimensions and a batched product show as calls too.
  const std::string dense = dir_.file("dense.kiln");
  ASSERT_TRUE(write_bytes(dense, "input h : f32[64, 32, 4, 4]\ninput wd : f32[32, 4, 4, 10]\noutput z : f32[64, 10]\n"
                                 "input p : f32[8, 32, 32]\noutput r : f32[8, 32, 32]\n"
                                 "z[n, k] = sum(h[n, c, y, x] * wd[c, y, x, k])\nr[n, i, j] = sum(p[n, i, k] * p[n, k, j])\n")
                  .ok());
  ProcessResult contractions = run({"compile", dense, "--emit", "ir"});
  ASSERT_EQ(contractions.exit_code, 0) << contractions.output;
  EXPECT_NE(contractions.output.find("call gemm(h, wd) -> z\ncall gemm(p, p, batch=1) -> r\n"), std::string::npos)
      << contractions.output;
}

// `kiln run` of a program with calls, on every device, writes its outputs; an unknown function
// exits 1 naming the function and the device.
TEST_F(CliTest, RunsCallStatementsAndReportsUnknownFunctions) {
  const std::string program = dir_.file("calls.kiln");
  ASSERT_TRUE(write_bytes(program, "input x : f32[3, 5]\noutput y : f32[3, 5]\noutput idx : i32[3, 5]\n"
                                  "tensor t : f32[3, 5]\nt[i, j] = x[i, j] * -1\n"
                                  "call sort(t) -> y\ncall argsort(t, descending=1) -> idx\n").ok());
  for (const char* device : {"cpu", "interp", "opencl"}) {
    if (!device_present(device)) continue;
    const std::string out = dir_.file(std::string("y_") + device + ".npy");
    ProcessResult r = run({"run", program, "--device", device, "--output", "y=" + out, "--print"});
    ASSERT_EQ(r.exit_code, 0) << device << ": " << r.output;
    EXPECT_NE(r.output.find("idx : i32 [3, 5]"), std::string::npos) << r.output;
    EXPECT_TRUE(std::filesystem::exists(out)) << device;
  }
  const std::string unknown = dir_.file("unknown.kiln");
  ASSERT_TRUE(write_bytes(unknown, "input x : f32[4]\noutput y : f32[4]\ncall fancy_kernel(x) -> y\n").ok());
  ProcessResult r = run({"run", unknown, "--device", "interp"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no function 'fancy_kernel' is registered for device 'interp'"), std::string::npos) << r.output;
  // A misspelt built-in: did you mean; a reduction of expressions: not a function to call.
  ASSERT_TRUE(write_bytes(unknown, "output r : f32[4]\ncall random_eniform() -> r\n").ok());
  r = run({"run", unknown, "--device", "interp"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("did you mean 'random_uniform'?"), std::string::npos) << r.output;
  ASSERT_TRUE(write_bytes(unknown, "input x : f32[4]\noutput r : f32[4]\ncall sum(x) -> r\n").ok());
  r = run({"run", unknown, "--device", "interp"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("sum is a function or reduction of expressions"), std::string::npos) << r.output;
}

TEST_F(CliTest, CompileEmitsLoweredAndSource) {
  const std::string golden = std::string(KILN_SOURCE_DIR) + "/tests/codegen/golden_programs/";
  for (const std::string& name : example_names()) {
    ProcessResult lowered = run({"compile", example(name), "--emit", "lowered"});
    ASSERT_EQ(lowered.exit_code, 0) << lowered.output;
    EXPECT_NE(lowered.output.find("(kernel "), std::string::npos) << lowered.output;
    ProcessResult source = run({"compile", example(name), "--emit", "source"});
    ASSERT_EQ(source.exit_code, 0) << source.output;
    EXPECT_NE(source.output.find("kiln_dispatch_state_t"), std::string::npos) << source.output;
    ProcessResult interp = run({"compile", example(name), "--emit", "source", "--device", "interp"});
    ASSERT_EQ(interp.exit_code, 0) << interp.output;
    EXPECT_NE(interp.output.find("(kernel "), std::string::npos) << interp.output;
    // Where golden files exist (tests/runtime/golden_test.cc), the binary prints exactly them.
    if (Result<std::string> g = read_file(golden + name + ".lowered"); g.ok()) {
      EXPECT_TRUE(lowered.output == *g) << name << ": `kiln compile --emit lowered` differs from its golden file "
                                        << "(see GoldenTest in kiln_runtime_test)";
    }
    if (Result<std::string> g = read_file(golden + name + ".c"); g.ok()) {
      EXPECT_TRUE(source.output == *g) << name << ": `kiln compile --emit source` differs from its golden file "
                                       << "(see GoldenTest in kiln_runtime_test)";
    }
  }
  // -o writes the file and prints nothing.
  const std::string out = dir_.file("softmax.c");
  ProcessResult r = run({"compile", example("softmax"), "--emit=source", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(r.output.empty()) << r.output;
  Result<std::string> written = read_file(out);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_NE(written->find("kiln_dispatch_state_t"), std::string::npos);
}

// --target generates code for a device that is not present: the source needs nothing (here, no
// OpenCL platform is visible), the PTX only NVRTC.
TEST_F(CliTest, CompileForATargetWithoutItsDevice) {
  Env no_devices = env();
  no_devices["OCL_ICD_VENDORS"] = dir_.file("no-vendors");
  no_devices["KILN_CUDA_LIBRARY"] = dir_.file("no-libcuda.so");
  auto compile = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"compile", example("softmax")});
    return kiln(args, no_devices);
  };
  ProcessResult cpu = compile({"--target", "cpu", "--emit", "source"});
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_EQ(cpu.output, run({"compile", example("softmax"), "--device", "cpu", "--emit", "source"}).output);
  ProcessResult opencl = compile({"--target", "opencl", "--emit", "source"});
  ASSERT_EQ(opencl.exit_code, 0) << opencl.output;
  EXPECT_NE(opencl.output.find("__kernel void main_0("), std::string::npos) << opencl.output;
  ProcessResult interp = compile({"--target", "interp", "--emit", "source"});
  ASSERT_EQ(interp.exit_code, 0) << interp.output;
  EXPECT_NE(interp.output.find("(kernel "), std::string::npos) << interp.output;
  ProcessResult cuda = compile({"--target", "cuda:sm_90", "--emit", "source"});
  ASSERT_EQ(cuda.exit_code, 0) << cuda.output;
  EXPECT_NE(cuda.output.find("extern \"C\" __global__ void main_0("), std::string::npos) << cuda.output;
  EXPECT_EQ(compile({"--target", "cuda", "--emit", "source"}).output, cuda.output);

  // Usage errors: exit 2, whatever is installed.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--target", "gpu"}, {"--target", "cuda:sm_"}, {"--target", "cuda:90"}, {"--target", "cuda:sm_09"},
           {"--target", "cuda", "--emit", "ptx"}, {"--emit", "ptx"}, {"--device", "cpu", "--target", "cpu"}}) {
    ProcessResult r = compile(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    EXPECT_NE(r.output.find("usage: kiln compile"), std::string::npos) << describe_run(args, r);
  }

  const std::string ptx_file = dir_.file("softmax.ptx");
  ProcessResult ptx = compile({"--target", "cuda:sm_80", "--emit", "ptx", "-o", ptx_file});
  if (!drivers::check_cuda_arch(80).ok()) {
    EXPECT_EQ(ptx.exit_code, 1) << ptx.output;
    EXPECT_NE(ptx.output.find("NVRTC"), std::string::npos) << ptx.output;
    GTEST_SKIP() << "the PTX half needs NVRTC: " << drivers::check_cuda_arch(80);
  }
  ASSERT_EQ(ptx.exit_code, 0) << ptx.output;
  EXPECT_TRUE(ptx.output.empty()) << ptx.output;
  Result<std::string> text = read_file(ptx_file);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find(".target sm_80"), std::string::npos) << *text;
  EXPECT_NE(text->find(".entry main_0("), std::string::npos) << *text;
  ProcessResult old = compile({"--target", "cuda:sm_10", "--emit", "ptx"});
  EXPECT_EQ(old.exit_code, 2) << old.output;
  EXPECT_NE(old.output.find("cannot build for sm_10; it supports"), std::string::npos) << old.output;
}

// --- the C compiler and the cache ----------------------------------------------------------------

TEST_F(CliTest, FailingCCompilerExitsOneWithAClearMessage) {
  Env e = {{"KILN_CACHE_DIR", dir_.file("fresh-cache")}, {"KILN_CC", "/bin/false"}};
  std::vector<std::string> args = {"run", example("softmax")};
  ProcessResult r = kiln(args, e);
  EXPECT_EQ(r.exit_code, 1) << describe_run(args, r);
  EXPECT_NE(r.output.find("/bin/false"), std::string::npos) << "the message names the compiler\n" << r.output;
  EXPECT_NE(r.output.find("fail"), std::string::npos) << r.output;
  // A compiler that does not exist.
  e = {{"KILN_CACHE_DIR", dir_.file("fresh-cache-2")}, {"KILN_CC", dir_.file("no-such-cc")}};
  r = kiln(args, e);
  EXPECT_EQ(r.exit_code, 1) << describe_run(args, r);
  EXPECT_NE(r.output.find("no-such-cc"), std::string::npos) << r.output;
  // The interpreter needs no C compiler.
  r = kiln({"run", example("softmax"), "--device", "interp"}, e);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(CliTest, UnwritableCacheDirStillRuns) {
  const std::string file = dir_.file("regular-file");
  ASSERT_TRUE(write_bytes(file, "not a directory\n").ok());
  std::vector<std::string> args = {"run", example("softmax"), "--print"};
  ProcessResult r = kiln(args, {{"KILN_CACHE_DIR", file + "/sub"}});
  EXPECT_EQ(r.exit_code, 0) << describe_run(args, r);
  EXPECT_NE(r.output.find("y : f32 [4, 10]"), std::string::npos) << r.output;
  Result<std::string> still = read_file(file);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(*still, "not a directory\n");
}

TEST_F(CliTest, WarmRunNeverStartsTheCCompiler) {
  Result<std::string> cc = find_program("cc");
  ASSERT_TRUE(cc.ok()) << cc.status();
  // A wrapper that records each call, then runs the real compiler.
  const std::string wrapper = dir_.file("cc-wrapper");
  const std::string log = dir_.file("cc-calls.log");
  ASSERT_TRUE(write_bytes(wrapper, "#!/bin/sh\necho called >> '" + log + "'\nexec '" + *cc + "' \"$@\"\n").ok());
  ASSERT_EQ(::chmod(wrapper.c_str(), 0755), 0);
  const Env e = {{"KILN_CACHE_DIR", dir_.file("warm-cache")}, {"KILN_CC", wrapper}};
  const std::vector<std::string> args = {"run", example("conv2d"), "--print"};

  ProcessResult cold = kiln(args, e);
  ASSERT_EQ(cold.exit_code, 0) << describe_run(args, cold);
  Result<std::string> calls = read_file(log);
  ASSERT_TRUE(calls.ok()) << "the cold run did not run the wrapper: " << calls.status();
  const std::string calls_after_cold = *calls;
  EXPECT_FALSE(calls_after_cold.empty());

  // The wrapper can no longer be executed (mode 000: not even root may exec a file without any
  // x bit), so a run that tried to compile would fail.
  ASSERT_EQ(::chmod(wrapper.c_str(), 0), 0);
  ProcessResult warm = kiln(args, e);
  EXPECT_EQ(warm.exit_code, 0) << "the warm run needed the C compiler\n" << describe_run(args, warm);
  EXPECT_EQ(warm.output, cold.output);
  calls = read_file(log);
  ASSERT_TRUE(calls.ok());
  EXPECT_EQ(*calls, calls_after_cold);

  // Sanity check of the setup: a program not in the cache does fail with that wrapper.
  ProcessResult other = kiln({"run", example("maxpool")}, e);
  EXPECT_EQ(other.exit_code, 1) << describe_run({"run", example("maxpool")}, other);
}

}  // namespace
}  // namespace kiln::tools
