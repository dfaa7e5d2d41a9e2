// Every op of the loop IR on every element type it takes (language version 3: bool, i8 ... u64,
// f16, bf16, f32, f64), on the edge values of each type, in generated code, against op_eval (the
// semantics the interpreter runs): C on the cpu device, OpenCL C on the opencl device, and the
// same C compiled with the C compiler's undefined-behaviour sanitizer into a program of its own,
// which must run clean. Exact ops (integers, casts, comparisons, + - * / sqrt of floats, which f32
// computes for f16 and bf16 without a second rounding) must give the same bits; library math
// (exp, pow, ...) must be close.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/process.h"
#include "codegen/kernels.h"
#include "common/temp_dir.h"
#include "drivers/cpu/cpu_compiler.h"
#include "drivers/cuda/cuda_kernel_abi.h"
#include "kiln/base/time.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/drivers/drivers.h"
#include "kiln/hal/device.h"
#include "kiln/loop/op_eval.h"

#ifndef KILN_SOURCE_DIR
#error "KILN_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace kiln::codegen_test {
namespace {

using ir::Scalar;
using RawBytes = std::vector<unsigned char>;

constexpr double kDoubleInf = std::numeric_limits<double>::infinity();
constexpr int kTypeCount = static_cast<int>(std::size(ir::kAllDTypes));

int type_index(DType t) {
  for (int i = 0; i < kTypeCount; ++i) {
    if (ir::kAllDTypes[i] == t) return i;
  }
  return -1;
}

// ---- Inputs: the edge values of each type ---------------------------------------------------------

// Floats around every rounding edge: f16's halfway cases (1 + 2^-11), subnormals (2^-25 is
// halfway to 0, 3 * 2^-25 to 2^-23), its largest finite value and where it overflows (65520
// rounds to infinity), bf16's halfway case, values beyond every integer type, NaN, infinities
// and -0.
const double kFloats[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 3.5, 0.1, -7.75, 100.3, 255.9, -128.5,
                          65504.0, 65519.0, 65520.0, 1e-7, 0x1p-24, 0x1p-25, 0x3p-25, 1.0 + 0x1p-11,
                          1.0 + 0x3p-11, 1.0 + 0x1p-8, 1.0 + 0x3p-8, 3e9, -3e9, 0x1p63, -0x1p63, 0x1p64,
                          1e20, 1e-40, 3.4e38, kDoubleInf, -kDoubleInf, std::numeric_limits<double>::quiet_NaN()};

// Integers around every type's limits (each type keeps their values wrapped to it, distinct).
const int64_t kIntegers[] = {INT64_MIN, INT64_MIN + 1, -(int64_t{1} << 32), -2147483649LL, -2147483648LL,
                             -65536, -32769, -32768, -129, -128, -100, -7, -2, -1, 0, 1, 2, 3, 7, 100, 127,
                             128, 255, 256, 32767, 32768, 65535, 65536, 2147483647, 2147483648LL,
                             4294967295LL, 4294967296LL, (int64_t{1} << 53) + 1, INT64_MAX - 1, INT64_MAX};

// One element of `type` per edge value, as bytes in memory. bool also gets bytes 2 and 255,
// which a load reads as 1.
std::vector<RawBytes> edge_elements(DType type) {
  std::vector<RawBytes> out;
  const size_t size = ir::dtype_size(type);
  auto add = [&](Scalar v) {
    RawBytes b(size);
    ir::store_scalar(type, v, b.data());
    for (const RawBytes& seen : out) {
      if (seen == b) return;
    }
    out.push_back(b);
  };
  if (type == DType::kBool) {
    for (unsigned char byte : {0, 1, 2, 255}) out.push_back({byte});
  } else if (ir::is_float_type(type)) {
    for (double f : kFloats) add(Scalar{f, 0});
  } else {
    for (int64_t i : kIntegers) add(Scalar{0, i});
  }
  return out;
}

// Shift amounts, as i64 and as u8: negative, in range, at and past every width.
const int64_t kAmounts[] = {-1, 0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200, INT64_MIN};

// ---- Cases: op, operand type, result type -------------------------------------------------------

struct Case {
  Op op;
  DType in;
  DType out;
  DType amount = DType::kI64;  // a shift's amount
  bool approximate = false;    // library math: close, not the same bits
};

std::vector<Case> cases_of(DType t) {
  std::vector<Case> cases;
  const bool is_float = ir::is_float_type(t);
  for (DType to : ir::kAllDTypes) cases.push_back({ir::cast_op(to), t, to});
  for (Op op : {Op::kNeg, Op::kAbs, Op::kRelu, Op::kFloor, Op::kCeil, Op::kSqrt}) cases.push_back({op, t, t});
  for (Op op : {Op::kExp, Op::kLog, Op::kRsqrt, Op::kTanh, Op::kSigmoid, Op::kSin, Op::kCos, Op::kErf}) {
    // Of integers computed in f64 by the same library as the reference's (truncated to an
    // integer, so only exp is checked: it is exact at the integers' small values).
    if (is_float || op == Op::kExp) cases.push_back({op, t, t, DType::kI64, is_float});
  }
  for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMax, Op::kMin}) cases.push_back({op, t, t});
  cases.push_back({Op::kPow, t, t, DType::kI64, is_float});
  for (Op op : {Op::kLt, Op::kLe, Op::kGt, Op::kGe, Op::kEq, Op::kNe}) cases.push_back({op, t, t});
  cases.push_back({Op::kLt, t, DType::kBool});  // the result in another type
  cases.push_back({Op::kSelect, t, t});
  // One rounding or two (loop.h), so close for floats.
  cases.push_back({Op::kFma, t, t, DType::kI64, is_float});
  if (!is_float) {
    for (Op op : {Op::kBitNot, Op::kBitAnd, Op::kBitOr, Op::kBitXor}) cases.push_back({op, t, t});
  }
  if (ir::is_integer_type(t)) {
    for (Op op : {Op::kShl, Op::kShr}) {
      cases.push_back({op, t, t, DType::kI64});
      cases.push_back({op, t, t, DType::kU8});
    }
  }
  return cases;
}

// ---- The kernels: one per operand type, all its cases over every pair of edge values ------------

// Node ids: operands a, b, c of type k are 3k, 3k + 1, 3k + 2; the shift amounts (i64, u8) come
// next; then one result node per type.
constexpr int kAmountI64 = 3 * kTypeCount, kAmountU8 = kAmountI64 + 1, kFirstResult = kAmountU8 + 1;
int operand_node(DType t, int which) { return 3 * type_index(t) + which; }
int result_node(DType t) { return kFirstResult + type_index(t); }

struct Suite {
  std::vector<Kernel> kernels;
  std::vector<std::vector<Case>> cases;          // per kernel
  std::vector<std::vector<int64_t>> slots;       // per kernel and case: its slot in its result node
  std::map<int, std::pair<DType, int64_t>> nodes;  // id -> type, elements
  std::map<int, RawBytes> inputs;                   // the operands' and amounts' bytes
  int64_t points = 0;                            // elements each case computes
};

Suite make_suite() {
  Suite s;
  size_t most = 0;
  std::vector<std::vector<RawBytes>> edges;
  for (DType t : ir::kAllDTypes) {
    edges.push_back(edge_elements(t));
    most = std::max(most, edges.back().size());
  }
  // Every pair (i, j) of edge indices: a = edge i, b = edge j, c = edge (i + j); the amounts by j.
  s.points = static_cast<int64_t>(most * most);
  for (DType t : ir::kAllDTypes) {
    const std::vector<RawBytes>& e = edges[static_cast<size_t>(type_index(t))];
    for (int which = 0; which < 3; ++which) {
      RawBytes bytes;
      for (size_t i = 0; i < most; ++i) {
        for (size_t j = 0; j < most; ++j) {
          const size_t k = which == 0 ? i : which == 1 ? j : i + j;
          bytes.insert(bytes.end(), e[k % e.size()].begin(), e[k % e.size()].end());
        }
      }
      s.nodes[operand_node(t, which)] = {t, s.points};
      s.inputs[operand_node(t, which)] = bytes;
    }
  }
  for (auto [node, type] : {std::pair{kAmountI64, DType::kI64}, std::pair{kAmountU8, DType::kU8}}) {
    RawBytes bytes;
    for (int64_t p = 0; p < s.points; ++p) {
      RawBytes b(ir::dtype_size(type));
      ir::store_scalar(type, Scalar{0, kAmounts[static_cast<size_t>(p) % std::size(kAmounts)]}, b.data());
      bytes.insert(bytes.end(), b.begin(), b.end());
    }
    s.nodes[node] = {type, s.points};
    s.inputs[node] = bytes;
  }
  std::map<DType, int64_t> used;  // slots of each result type
  for (DType t : ir::kAllDTypes) {
    Kernel k;
    k.name = std::string("ops_") + std::string(ir::dtype_name(t));
    k.var_count = 1;
    std::set<int> nodes;
    std::vector<LStmtRef> body;
    std::vector<int64_t> slots;
    const std::vector<Case> cases = cases_of(t);
    auto in = [&](int which) {
      nodes.insert(operand_node(t, which));
      return ir::lload(operand_node(t, which), t, v(0));
    };
    for (const Case& c : cases) {
      std::vector<LExprRef> args;
      if (c.op == Op::kShl || c.op == Op::kShr) {
        const int amount = c.amount == DType::kI64 ? kAmountI64 : kAmountU8;
        nodes.insert(amount);
        args = {in(0), ir::lload(amount, c.amount, v(0))};
      } else {
        for (int w = 0; w < ir::op_arity(c.op); ++w) args.push_back(in(w));
      }
      const int64_t slot = used[c.out]++;
      slots.push_back(slot);
      nodes.insert(result_node(c.out));
      body.push_back(store(result_node(c.out), add64(i64(slot * s.points), v(0)), ir::lop(c.op, c.out, args)));
    }
    k.nodes.assign(nodes.begin(), nodes.end());
    k.body = ploop(0, s.points, std::move(body));
    s.kernels.push_back(std::move(k));
    s.cases.push_back(cases);
    s.slots.push_back(std::move(slots));
  }
  for (const auto& [type, count] : used) s.nodes[result_node(type)] = {type, count * s.points};
  return s;
}

// Every node's bytes before a run: the inputs, and results filled with 0xab.
std::map<int, RawBytes> initial_data(const Suite& s) {
  std::map<int, RawBytes> data = s.inputs;
  for (const auto& [node, shape] : s.nodes) {
    if (!data.count(node)) data[node] = RawBytes(static_cast<size_t>(shape.second) * ir::dtype_size(shape.first), 0xab);
  }
  return data;
}

// ---- The reference: op_eval on the loaded operands, stored as the interpreter stores ------------

RawBytes reference(const Suite& s, size_t kernel, size_t index, int64_t point) {
  const Case& c = s.cases[kernel][index];
  std::vector<DType> types;
  std::vector<Scalar> args;
  auto load = [&](int node, DType type) {
    types.push_back(type);
    args.push_back(ir::load_scalar(type, s.inputs.at(node).data() + static_cast<size_t>(point) * ir::dtype_size(type)));
  };
  if (c.op == Op::kShl || c.op == Op::kShr) {
    load(operand_node(c.in, 0), c.in);
    load(c.amount == DType::kI64 ? kAmountI64 : kAmountU8, c.amount);
  } else {
    for (int w = 0; w < ir::op_arity(c.op); ++w) load(operand_node(c.in, w), c.in);
  }
  Scalar r;
  if (c.op == Op::kSelect) {
    r = ir::scalar_truthy(types[0], args[0]) ? args[1] : args[2];
  } else {
    r = ir::eval_op(c.op, c.out, types, args);
  }
  RawBytes out(ir::dtype_size(c.out));
  ir::store_scalar(c.out, r, out.data());
  return out;
}

std::string describe(DType type, const unsigned char* p) {
  const Scalar v = ir::load_scalar(type, p);
  char text[64];
  if (ir::is_float_type(type)) {
    std::snprintf(text, sizeof text, "%.9g", v.f);
  } else if (type == DType::kU64) {
    std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(v.i));
  } else {
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(v.i));
  }
  return text;
}

// Library math within a few units of the type's last place (kiln's own f32 functions are within
// 2 ulp; OpenCL's within 4).
bool close(DType type, const unsigned char* got, const unsigned char* want) {
  const double g = ir::load_scalar(type, got).f, w = ir::load_scalar(type, want).f;
  if (std::isnan(g) || std::isnan(w)) return std::isnan(g) && std::isnan(w);
  if (g == w) return true;
  if (std::isinf(g) || std::isinf(w)) return false;
  const double eps = type == DType::kF64 ? 0x1p-48 : type == DType::kF32 ? 0x1p-20 : type == DType::kF16 ? 0x1p-9 : 0x1p-6;
  return std::fabs(g - w) <= eps * std::max(std::fabs(w), 1.0);
}

// Checks every case's results in `data` against the reference; returns the number of wrong
// elements (reporting the first few).
int check(const Suite& s, const std::map<int, RawBytes>& data, const std::string& where) {
  int wrong = 0;
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    for (size_t i = 0; i < s.cases[k].size(); ++i) {
      const Case& c = s.cases[k][i];
      const size_t size = ir::dtype_size(c.out);
      const RawBytes& result = data.at(result_node(c.out));
      for (int64_t p = 0; p < s.points; ++p) {
        const RawBytes want = reference(s, k, i, p);
        const unsigned char* got = result.data() + static_cast<size_t>(s.slots[k][i] * s.points + p) * size;
        bool ok = std::memcmp(got, want.data(), size) == 0;
        if (!ok && ir::is_float_type(c.out)) {
          // NaN is NaN whatever its bits; library math is close.
          ok = c.approximate ? close(c.out, got, want.data())
                             : std::isnan(ir::load_scalar(c.out, got).f) && std::isnan(ir::load_scalar(c.out, want.data()).f);
        }
        if (!ok && ++wrong <= 30) {
          std::string operands;
          const int arity = ir::op_arity(c.op);
          for (int w = 0; w < arity; ++w) {
            const bool amount = (c.op == Op::kShl || c.op == Op::kShr) && w == 1;
            const DType t = amount ? c.amount : c.in;
            const int node = amount ? (c.amount == DType::kI64 ? kAmountI64 : kAmountU8) : operand_node(c.in, w);
            operands += (w ? ", " : "") + describe(t, s.inputs.at(node).data() + static_cast<size_t>(p) * ir::dtype_size(t));
          }
          ADD_FAILURE() << where << ": " << ir::op_name(c.op) << " of " << ir::dtype_name(c.in) << " to "
                        << ir::dtype_name(c.out) << " (" << operands << "): got " << describe(c.out, got) << ", want "
                        << describe(c.out, want.data());
        }
      }
    }
  }
  return wrong;
}

// ---- Running on a device ---------------------------------------------------------------------

Result<hal::DeviceRef> device(const std::string& name) {
  hal::DeviceOptions options;
  options.cache_dir = "";  // every build compiles: the test is about the compiler's input
  return drivers::builtin_registry().create_device(name, options);
}

Status run_on(const hal::DeviceRef& dev, codegen::Dialect dialect, const Suite& s, std::map<int, RawBytes>* data) {
  hal::ExecutableSource source;
  source.format = std::string(codegen::dialect_format(dialect));
  codegen::EmitOptions options;
  options.dialect = dialect;
  KILN_ASSIGN_OR_RETURN(source.source, codegen::emit_kernels(s.kernels, nullptr, options));
  for (const Kernel& k : s.kernels) source.exports.push_back({k.name, static_cast<uint32_t>(k.nodes.size()), 0});
  source.label = "element_type_ops_test";
  KILN_ASSIGN_OR_RETURN(hal::ExecutableRef executable, dev->compile_executable(source));
  std::map<int, hal::BufferRef> buffers;
  for (auto& [node, bytes] : *data) {
    KILN_ASSIGN_OR_RETURN(hal::BufferRef buffer, dev->allocator().allocate({}, bytes.size()));
    KILN_RETURN_IF_ERROR(buffer->write_data(0, bytes.data(), bytes.size()));
    buffers[node] = buffer;
  }
  KILN_ASSIGN_OR_RETURN(hal::QueueRef queue, dev->create_queue("element-type-ops"));
  auto timeline = dev->create_semaphore();
  uint64_t value = 0;
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    hal::DispatchCommand dispatch;
    dispatch.executable = executable;
    dispatch.export_ordinal = static_cast<uint32_t>(i);
    dispatch.workgroups = {16, 1, 1};
    for (int node : s.kernels[i].nodes) dispatch.bindings.push_back({buffers.at(node)});
    hal::SemaphoreList waits;
    if (value > 0) waits.push_back({timeline, value});
    KILN_RETURN_IF_ERROR(queue->dispatch(waits, {{timeline, value + 1}}, std::move(dispatch)));
    ++value;
  }
  KILN_RETURN_IF_ERROR(timeline->wait(value, Timeout::after_ms(120000)));
  for (auto& [node, bytes] : *data) KILN_RETURN_IF_ERROR(buffers[node]->read_data(0, bytes.data(), bytes.size()));
  return Status();
}

TEST(ElementTypeOps, EveryOpOnEveryTypeInCMatchesTheReference) {
  const Suite s = make_suite();
  Result<hal::DeviceRef> cpu = device("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::map<int, RawBytes> data = initial_data(s);
  Status status = run_on(*cpu, codegen::Dialect::kC, s, &data);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(check(s, data, "cpu"), 0);
}

TEST(ElementTypeOps, EveryOpOnEveryTypeInOpenCLMatchesTheReference) {
  const Suite s = make_suite();
  Result<hal::DeviceRef> cl = device("opencl");
  if (!cl.ok()) GTEST_SKIP() << "no OpenCL device: " << cl.status();
  std::map<int, RawBytes> data = initial_data(s);
  Status status = run_on(*cl, codegen::Dialect::kOpenCL, s, &data);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(check(s, data, "opencl"), 0);
}

// The suite's generated C as the CPU driver compiles it: kernel_abi.h first.
Result<std::string> c_program(const Suite& s) {
  KILN_ASSIGN_OR_RETURN(std::string source, codegen::emit_kernels(s.kernels, nullptr, {}));
  std::ifstream abi(std::string(KILN_SOURCE_DIR) + "/include/kiln/kernel_abi.h");
  return std::string(std::istreambuf_iterator<char>(abi), {}) + "\n" + source;
}

// The generated C of every case compiles without a warning (-Wall -Wextra), as the golden
// kernels do (c_emitter_test.cc): no comparison always true of an unsigned value, no operator
// precedence a reader could misread.
TEST(ElementTypeOps, GeneratedCCompilesWithoutWarnings) {
  Result<std::string> cc = find_program("cc");
  if (!cc.ok()) GTEST_SKIP() << "no C compiler: " << cc.status();
  const Suite s = make_suite();
  test::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Result<std::string> program = c_program(s);
  ASSERT_TRUE(program.ok()) << program.status();
  std::ofstream(dir.file("ops.c"), std::ios::binary) << *program;
  Result<ProcessResult> built = run_process({*cc, "-std=gnu11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-c", "-o",
                                             dir.file("ops.o"), dir.file("ops.c")},
                                            300000);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->exit_code, 0) << built->output;
}

// Runs the suite's kernels in a program of their own: `source` (the kernels, with everything
// they need before them) and a main() that reads every node's bytes from a file, calls each
// kernel over 16 workgroups (`call`: the statements that call kernel `k` of workgroup `x`, given
// the C expressions of its bindings' pointers and lengths, returning 3 on a failure), and writes
// the bytes back. `compile`: the compiler's command, to which the source file, `-o` and the
// program are appended. The nodes' bytes come back in *data.
using CallText = std::function<std::string(const Kernel& k, const std::vector<std::string>& pointers,
                                           const std::vector<std::string>& lengths)>;
void run_standalone(const Suite& s, const std::string& source, const std::string& file_name,
                    std::vector<std::string> compile, const CallText& call, std::map<int, RawBytes>* data) {
  test::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  // One file of every node's bytes, in node order, each at an offset aligned for any element.
  size_t total = 0;
  std::map<int, size_t> offset_of;
  for (const auto& [node, bytes] : *data) {
    offset_of[node] = total;
    total += (bytes.size() + 63) / 64 * 64;
  }
  RawBytes all(total);
  for (const auto& [node, bytes] : *data) std::memcpy(all.data() + offset_of[node], bytes.data(), bytes.size());
  std::ofstream(dir.file("data.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(all.data()), static_cast<std::streamsize>(all.size()));
  std::string body;
  for (const Kernel& k : s.kernels) {
    std::vector<std::string> pointers, lengths;
    for (int node : k.nodes) {
      pointers.push_back("data + " + std::to_string(offset_of[node]) + "u");
      lengths.push_back(std::to_string(data->at(node).size()) + "u");
    }
    body += "  for (unsigned x = 0; x < 16; ++x) {\n" + call(k, pointers, lengths) + "  }\n";
  }
  const std::string program =
      source + "\n#include <stdio.h>\n#include <stdlib.h>\nint main(int argc, char** argv) {\n  (void)argc;\n" +
      "  static unsigned char data[" + std::to_string(total) + "] __attribute__((aligned(64)));\n" +
      "  FILE* in = fopen(argv[1], \"rb\");\n  if (!in || fread(data, 1, sizeof data, in) != sizeof data) return 2;\n"
      "  fclose(in);\n" + body +
      "  FILE* out = fopen(argv[1], \"wb\");\n  if (!out || fwrite(data, 1, sizeof data, out) != sizeof data) return 4;\n"
      "  fclose(out);\n  return 0;\n}\n";
  std::ofstream(dir.file(file_name), std::ios::binary) << program;
  compile.insert(compile.end(), {dir.file(file_name), "-o", dir.file("ops"), "-lm"});
  Result<ProcessResult> built = run_process(compile, 300000);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->exit_code, 0) << built->output;
  Result<ProcessResult> ran = run_process({dir.file("ops"), dir.file("data.bin")}, 120000);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_FALSE(ran->signalled);
  ASSERT_EQ(ran->exit_code, 0) << ran->output;
  EXPECT_EQ(ran->output.find("runtime error"), std::string::npos) << ran->output;
  std::ifstream back(dir.file("data.bin"), std::ios::binary);
  back.read(reinterpret_cast<char*>(all.data()), static_cast<std::streamsize>(all.size()));
  ASSERT_TRUE(back.good());
  for (auto& [node, bytes] : *data) std::memcpy(bytes.data(), all.data() + offset_of[node], bytes.size());
}

// The generated C of every case, compiled at the CPU driver's own code flags plus the undefined-
// behaviour sanitizer (float-to-integer overflow included; it is not part of `undefined` in GCC),
// into a program that runs each kernel over the same data and must finish without a report
// (-fno-sanitize-recover: the first one ends it), writing results that match the reference.
TEST(ElementTypeOps, GeneratedCHasNoUndefinedBehaviour) {
  Result<std::string> cc = find_program("cc");
  if (!cc.ok()) GTEST_SKIP() << "no C compiler: " << cc.status();
  const Suite s = make_suite();
  Result<std::string> source = c_program(s);
  ASSERT_TRUE(source.ok()) << source.status();
  std::vector<std::string> compile = {*cc};
  for (const std::string& flag : cpu::CpuCompiler::base_flags()) {
    if (flag != "-shared" && flag != "-fPIC") compile.push_back(flag);
  }
  compile.insert(compile.end(), {"-fsanitize=undefined,float-cast-overflow", "-fno-sanitize-recover=all"});
  std::map<int, RawBytes> data = initial_data(s);
  run_standalone(s, *source, "ops.c", compile,
                 [](const Kernel& k, const std::vector<std::string>& pointers, const std::vector<std::string>& lengths) {
                   std::string p, l;
                   for (size_t i = 0; i < pointers.size(); ++i) p += pointers[i] + ", ", l += lengths[i] + ", ";
                   return "    void* const bindings[] = {" + p + "};\n    const size_t lengths[] = {" + l +
                          "};\n    const kiln_dispatch_state_t s = {KILN_KERNEL_ABI_VERSION, {16, 1, 1}, " +
                          std::to_string(k.nodes.size()) + "u, 0, bindings, lengths, 0, 0};\n" +
                          "    const kiln_workgroup_id_t id = {x, 0, 0};\n    if (" + k.name + "(&s, &id) != 0) return 3;\n";
                 },
                 &data);
  EXPECT_EQ(check(s, data, "cc -fsanitize=undefined"), 0);
}

// What CUDA C needs from CUDA, in host C++: the launch indices as globals (a launch runs its
// blocks and threads one after another), the qualifiers, and the intrinsics the ABI and the
// dialect use.
constexpr const char* kCudaOnTheHost = R"(#include <math.h>
#include <string.h>
struct KilnDim { unsigned x, y, z; };
static KilnDim blockIdx, threadIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
static inline unsigned atomicExch(unsigned* p, unsigned v) { unsigned old = *p; *p = v; return old; }
static inline void __syncthreads() {}
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, sizeof f); return f; }
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, sizeof d); return d; }
)";

// The CUDA C of every case, built as C++ by the host's compiler with the kernel ABI the CUDA
// driver prepends, and run on the host (4 threads a block, so grid-stride loops stride), under
// the undefined-behaviour sanitizer: the CUDA dialect's types and helpers compute what op_eval
// does, where no GPU is at hand (NVRTC builds the same source: tests/runtime). Library math is
// the host's, so only the exact ops say anything about CUDA's (the close ones are close anyway).
TEST(ElementTypeOps, CudaCRunOnTheHostMatchesTheReference) {
  Result<std::string> cxx = find_program("c++");
  if (!cxx.ok()) GTEST_SKIP() << "no C++ compiler: " << cxx.status();
  const Suite s = make_suite();
  codegen::EmitOptions options;
  options.dialect = codegen::Dialect::kCuda;
  Result<std::string> source = codegen::emit_kernels(s.kernels, nullptr, options);
  ASSERT_TRUE(source.ok()) << source.status();
  // NVRTC builds with --fmad=false: no contraction on the host either.
  const std::vector<std::string> compile = {*cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-w",
                                            "-fsanitize=undefined,float-cast-overflow", "-fno-sanitize-recover=all"};
  std::map<int, RawBytes> data = initial_data(s);
  run_standalone(s, std::string(kCudaOnTheHost) + cuda::kKernelAbiText + *source, "ops.cc", compile,
                 [](const Kernel& k, const std::vector<std::string>& pointers, const std::vector<std::string>& lengths) {
                   std::string args = "ring, 1u, 0u";
                   for (size_t i = 0; i < pointers.size(); ++i) args += ", " + pointers[i] + ", 0ull, " + lengths[i];
                   return "    static unsigned ring[256 * 8];\n    gridDim = {16, 1, 1};\n    blockDim = {4, 1, 1};\n"
                          "    blockIdx = {x, 0, 0};\n    for (unsigned t = 0; t < 4; ++t) {\n      threadIdx = {t, 0, 0};\n"
                          "      " + k.name + "(" + args + ");\n    }\n    if (ring[8] == 1u) return 3;\n";
                 },
                 &data);
  EXPECT_EQ(check(s, data, "CUDA C on the host"), 0);
}

}  // namespace
}  // namespace kiln::codegen_test
