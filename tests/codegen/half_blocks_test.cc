// f16 loops in blocks converted by F16C's vector instructions (src/codegen/kernel_half_blocks.cc,
// the prelude's kiln_f16_*_x32): which loops the C dialect prints so and with which conversion
// (printed source), and that they give the bits the plain loops give, for every f16 bit pattern
// loaded (NaNs with payloads, signalling ones, subnormals, infinities) and for f32 values stored
// as f16 at every f16 value, every halfway point between two and next to it, past the largest
// (overflow to infinity), in f32's subnormals and at NaNs with payloads; over chunks of the
// parallel loop and an inner loop whose lengths are not multiples of the block. Run on the cpu
// device, whose compiler targets the processor (where it has no F16C, the plain loops run and
// must give the same), and built as a program of its own without AVX-512F, for the conversions
// of the processors that have F16C but not AVX-512F.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "base/process.h"
#include "codegen/kernels.h"
#include "codegen/run_kernels.h"
#include "common/temp_dir.h"
#include "drivers/cpu/cpu_compiler.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/loop/op_eval.h"

namespace kiln::codegen_test {
namespace {

#if defined(__x86_64__)
// CPUID leaf 1, ECX bit 29 (Clang 14's __builtin_cpu_supports has no "f16c").
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}
#endif

constexpr DType kF16 = DType::kF16;
constexpr DType kF32 = DType::kF32;

// Three rows of 65551 elements (65536 + 15): every f16 bit pattern three times over, in chunks
// and rows that are not multiples of the block of 32.
constexpr int64_t kRow = 65551;
constexpr int64_t kCount = 3 * kRow;

// Nodes: x f16 (element i holds bit pattern i mod 65536), w f32 (values to store as f16), zero
// f16 (zeros), and one result per kernel below.
enum Node { kX, kW, kZero, kCopy, kWiden, kNarrow, kPow, kShifted };

LExprRef load(int node, DType t, LExprRef at) { return ir::lload(node, t, std::move(at)); }
LExprRef op(Op o, DType t, std::vector<LExprRef> args) { return ir::lop(o, t, std::move(args)); }

Kernel kernel(std::string name, std::vector<int> nodes, LStmtRef body) {
  Kernel k;
  k.name = std::move(name);
  k.nodes = std::move(nodes);
  k.var_count = 2;
  k.body = std::move(body);
  return k;
}

// One kernel per kind of loop, each over the whole of its nodes.
std::vector<Kernel> kernels() {
  const LExprRef i = v(0);
  // copy[r * kRow + j] = x[r * kRow + j] (f16 in and out) and widen[r * kRow + j] = f32(x[...])
  // (f32 out, so a signalling NaN must stay one), the inner loop over j.
  const LExprRef at = add64(mul64(v(0), i64(kRow)), v(1));
  Kernel copy = kernel("copy", {kX, kCopy, kWiden},
                       ploop(0, 3, {loop(1, kRow, {store(kCopy, at, load(kX, kF16, at)),
                                                   store(kWiden, at, op(Op::kCastF32, kF32, {load(kX, kF16, at)}))})}));
  // narrow[i] = f16(w[i]): f32 in, f16 out.
  Kernel narrow = kernel("narrow", {kW, kNarrow},
                         ploop(0, kCount, {store(kNarrow, i, op(Op::kCastF16, kF16, {load(kW, kF32, i)}))}));
  // pow_[i] = pow(x[i], zero[i]): powf of a signalling NaN and 0 is NaN, of a quiet one 1.
  Kernel pow = kernel("pow_", {kX, kZero, kPow},
                      ploop(0, kCount, {store(kPow, i, op(Op::kPow, kF16, {load(kX, kF16, i), load(kZero, kF16, i)}))}));
  // shifted[i] = select(i + 1 < count, x[i + 1], x[0]): a guarded load, not loaded by blocks.
  const LExprRef next = add64(i, i64(1));
  Kernel shifted = kernel(
      "shifted", {kX, kShifted},
      ploop(0, kCount, {store(kShifted, i, op(Op::kSelect, kF16, {op(Op::kLt, DType::kBool, {next, i64(kCount)}),
                                                                   load(kX, kF16, next), load(kX, kF16, i64(0))}))}));
  return {copy, narrow, pow, shifted};
}

std::string source_of(const Kernel& k) {
  Result<std::string> source = codegen::emit_kernels(std::vector<Kernel>{k}, nullptr, {});
  EXPECT_TRUE(source.ok()) << source.status();
  return source.ok() ? *source : "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

uint32_t bits_of(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

// f16 bits -> the float kiln_f16_value gives: the value, or a NaN with the f16's payload (a
// signalling one stays signalling).
uint32_t f16_float_bits(uint16_t h) {
  if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
    return (static_cast<uint32_t>(h & 0x8000) << 16) | 0x7f800000u | (static_cast<uint32_t>(h & 0x3ff) << 13);
  }
  return bits_of(static_cast<float>(ir::f16_value(h)));
}
// The f16 store of a value loaded from f16 bits: itself, a NaN the quiet NaN of its sign.
uint16_t stored_f16(uint16_t h) {
  const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
  return nan ? static_cast<uint16_t>((h & 0x8000) | 0x7e00) : h;
}

// The f32 values stored as f16: each f16 value (NaNs as kiln_f16_value gives them), the points
// halfway between neighbours (and f32 NaNs with small payloads where there are none), those
// points one f32 step off (and values from 65504 up to 65536 instead), then special values.
std::vector<float> stored_values() {
  std::vector<float> w;
  for (uint32_t k = 0; k < 65536; ++k) w.push_back(float_of(f16_float_bits(static_cast<uint16_t>(k))));
  auto halfway = [](uint32_t k) -> std::optional<float> {
    if ((k & 0x7fff) >= 0x7c00) return std::nullopt;  // infinity or NaN: no next value
    const double a = ir::f16_value(static_cast<uint16_t>(k)), b = ir::f16_value(static_cast<uint16_t>(k + 1));
    return static_cast<float>((a + b) / 2);  // exact: 12 bits
  };
  for (uint32_t k = 0; k < 65536; ++k) {
    const uint32_t sign = (k & 0x8000) << 16;
    if (std::optional<float> h = halfway(k)) {
      w.push_back(*h);
    } else {
      w.push_back(float_of(sign | ((k & 1) ? 0x7fc00000u | (k & 0x3ff) << 5 : 0x7f800000u | ((k & 0x3ff) + 1))));
    }
  }
  for (uint32_t k = 0; k < 65536; ++k) {
    const uint32_t sign = (k & 0x8000) << 16;
    if (std::optional<float> h = halfway(k)) {
      w.push_back(float_of(bits_of(*h) + ((k & 1) ? 1 : -1)));  // one step out, or in
    } else {
      w.push_back(float_of(sign | (0x477fe000u + (k & 0x3ff) * 8)));  // 65504 to 65536
    }
  }
  const uint32_t specials[] = {
      0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00800000, 0x33000000,
      0x33000001, 0x33400000, 0x33c00000, 0xb3c00000, 0x387fc000, 0x387fe000, 0x38800000, 0xb87fe000,
      0x477fefff, 0x477ff000, 0x477ff001, 0xc77ff000, 0x477fffff, 0x47800000, 0x7f7fffff, 0xff7fffff,
      0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7fffffff,
      0xffffffff, 0x7fa00000, 0x3f800000, 0xbf800000, 0x3f801000, 0x3f802000, 0x3f803000, 0x3eaaaaab,
      0x4479ffff, 0x4f000000, 0x2f800000, 0x38000000, 0x38001000};
  for (uint32_t s : specials) w.push_back(float_of(s));
  return w;
}

TEST(HalfBlocks, F16LoopsAreConvertedInBlocksWhereF16CIs) {
  const std::vector<Kernel> k = kernels();
  const std::string copy = source_of(k[0]), narrow = source_of(k[1]), pow = source_of(k[2]), shifted = source_of(k[3]);
  for (const std::string* s : {&copy, &narrow, &pow, &shifted}) {
    EXPECT_TRUE(has(*s, "#if defined(__F16C__)\n")) << *s;
    EXPECT_TRUE(has(*s, "kiln_f16_bits_x32(")) << *s;
  }
  // The inner loop: the f16 copy's block loads without the check for signalling NaNs (its f16
  // store makes every NaN quiet), its value as in the plain loop; the conversion to f32 straight
  // into its target, keeping them.
  EXPECT_TRUE(has(copy, "for (; 65551 - v1 >= 32; v1 += 32) {")) << copy;
  EXPECT_TRUE(has(copy, "kiln_f16_quiet_x32(kiln_h0, &n0[v0 * 65551 + v1]);")) << copy;
  EXPECT_TRUE(has(copy, "kiln_s0[kiln_j] = kiln_h0[kiln_j];")) << copy;
  EXPECT_TRUE(has(copy, "kiln_f16_bits_x32(&n3[v0 * 65551 + v1], kiln_s0);")) << copy;
  EXPECT_TRUE(has(copy, "kiln_f16_value_x32(&n4[v0 * 65551 + v1], &n0[v0 * 65551 + v1]);")) << copy;
  EXPECT_TRUE(has(copy, "for (; v1 < 65551; ++v1) {")) << copy;
  // powf can tell a signalling NaN from a quiet one: the exact conversion.
  EXPECT_TRUE(has(pow, "for (; end - v0 >= 32; v0 += 32) {")) << pow;
  EXPECT_TRUE(has(pow, "kiln_f16_value_x32(kiln_h0, &n0[v0]);")) << pow;
  EXPECT_FALSE(has(narrow, "kiln_f16_value_x32(") || has(narrow, "kiln_f16_quiet_x32(")) << narrow;
  // Guarded loads stay in the statement; the store still goes by blocks.
  EXPECT_FALSE(has(shifted, "kiln_h0")) << shifted;
  EXPECT_TRUE(has(shifted, "(v0 + kiln_j) + 1 < 196653 ? kiln_f16_value(n0[(v0 + kiln_j) + 1])")) << shifted;
}

// Every node's bytes before a run: the inputs, and the results filled with 0xab.
NodeData inputs() {
  std::vector<uint16_t> x(kCount), zero(kCount, 0);
  for (int64_t i = 0; i < kCount; ++i) x[i] = static_cast<uint16_t>(i % 65536);
  NodeData data = {{kX, bytes_of(x)}, {kW, bytes_of(stored_values())}, {kZero, bytes_of(zero)}};
  for (int node : {kCopy, kNarrow, kPow, kShifted}) data[node] = Bytes(kCount * 2, std::byte{0xab});
  data[kWiden] = Bytes(kCount * 4, std::byte{0xab});
  return data;
}

// Checks every result against the plain loops' bits; returns the number of wrong elements
// (reporting the first few).
int check(const NodeData& data, const std::string& where) {
  const std::vector<uint16_t> x = values_of<uint16_t>(data.at(kX)), zero = values_of<uint16_t>(data.at(kZero));
  const std::vector<float> w = values_of<float>(data.at(kW));
  const std::vector<uint16_t> copy = values_of<uint16_t>(data.at(kCopy)), narrow = values_of<uint16_t>(data.at(kNarrow)),
                              pow = values_of<uint16_t>(data.at(kPow)), shifted = values_of<uint16_t>(data.at(kShifted));
  const std::vector<uint32_t> widen = values_of<uint32_t>(data.at(kWiden));
  int wrong = 0;
  auto expect = [&](const char* what, int64_t i, uint32_t in, uint32_t got, uint32_t want) {
    if (got != want && ++wrong <= 20) {
      ADD_FAILURE() << where << ": " << what << "[" << i << "] of 0x" << std::hex << in << ": got 0x" << got
                    << ", want 0x" << want;
    }
  };
  for (int64_t i = 0; i < kCount; ++i) {
    expect("copy", i, x[i], copy[i], stored_f16(x[i]));
    expect("widen", i, x[i], widen[i], f16_float_bits(x[i]));
    expect("narrow", i, bits_of(w[i]), narrow[i], ir::f16_bits(static_cast<double>(w[i])));
    // powf as the kernels call it (the same library), of the floats kiln_f16_value gives.
    const float p = std::pow(float_of(f16_float_bits(x[i])), float_of(f16_float_bits(zero[i])));
    expect("pow", i, x[i], pow[i], ir::f16_bits(static_cast<double>(p)));
    expect("shifted", i, x[i], shifted[i], stored_f16(i + 1 < kCount ? x[i + 1] : x[0]));
  }
  return wrong;
}

TEST(HalfBlocks, BlocksGiveThePlainLoopsBits) {
#if defined(__x86_64__)
  if (!has_f16c()) std::printf("no F16C here: the plain loops run\n");
#endif
  NodeData data = inputs();
  const std::vector<Kernel> k = kernels();
  Status status = compile_and_run(k, nullptr, &data, 3);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(check(data, "cpu"), 0);
}

// The kernels in a program of their own, built by the C compiler with the CPU driver's code
// flags and `more` (and no warnings: -Wall -Wextra -Werror), each run over 3 workgroups on
// `data` (every node's bytes, which come back in place).
void run_standalone(const std::vector<Kernel>& kernels, const std::vector<std::string>& more, NodeData* data) {
  Result<std::string> cc = find_program("cc");
  if (!cc.ok()) GTEST_SKIP() << "no C compiler: " << cc.status();
  Result<std::string> source = codegen::emit_kernels(kernels, nullptr, {});
  ASSERT_TRUE(source.ok()) << source.status();
  std::ifstream abi(std::string(KILN_SOURCE_DIR) + "/include/kiln/kernel_abi.h");
  std::string program = std::string(std::istreambuf_iterator<char>(abi), {}) + "\n" + *source;
  // One file of every node's bytes, in node order, each at an offset aligned for any element.
  std::map<int, size_t> offset_of;
  size_t total = 0;
  for (const auto& [node, bytes] : *data) {
    offset_of[node] = total;
    total += (bytes.size() + 63) / 64 * 64;
  }
  Bytes all(total);
  for (const auto& [node, bytes] : *data) std::memcpy(all.data() + offset_of[node], bytes.data(), bytes.size());
  program += "#include <stdio.h>\nint main(int argc, char** argv) {\n  (void)argc;\n"
             "  static unsigned char data[" + std::to_string(total) + "] __attribute__((aligned(64)));\n"
             "  FILE* f = fopen(argv[1], \"rb\");\n  if (!f || fread(data, 1, sizeof data, f) != sizeof data) return 2;\n"
             "  fclose(f);\n";
  for (const Kernel& k : kernels) {
    std::string pointers, lengths;
    for (int node : k.nodes) {
      pointers += "data + " + std::to_string(offset_of[node]) + "u, ";
      lengths += std::to_string(data->at(node).size()) + "u, ";
    }
    program += "  for (unsigned x = 0; x < 3; ++x) {\n    void* const bindings[] = {" + pointers +
               "};\n    const size_t lengths[] = {" + lengths +
               "};\n    const kiln_dispatch_state_t s = {KILN_KERNEL_ABI_VERSION, {3, 1, 1}, " +
               std::to_string(k.nodes.size()) + "u, 0, bindings, lengths, 0, 0};\n" +
               "    const kiln_workgroup_id_t id = {x, 0, 0};\n    if (" + k.name + "(&s, &id) != 0) return 3;\n  }\n";
  }
  program += "  f = fopen(argv[1], \"wb\");\n  if (!f || fwrite(data, 1, sizeof data, f) != sizeof data) return 4;\n"
             "  fclose(f);\n  return 0;\n}\n";
  test::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::ofstream(dir.file("blocks.c"), std::ios::binary) << program;
  std::ofstream(dir.file("data.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(all.data()), static_cast<std::streamsize>(all.size()));
  std::vector<std::string> compile = {*cc};
  for (const std::string& flag : cpu::CpuCompiler::base_flags()) {
    if (flag != "-shared" && flag != "-fPIC") compile.push_back(flag);
  }
  compile.insert(compile.end(), more.begin(), more.end());
  compile.insert(compile.end(), {"-Wall", "-Wextra", "-Werror", dir.file("blocks.c"), "-o", dir.file("blocks"), "-lm"});
  Result<ProcessResult> built = run_process(compile, 120000);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->exit_code, 0) << built->output;
  Result<ProcessResult> ran = run_process({dir.file("blocks"), dir.file("data.bin")}, 60000);
  ASSERT_TRUE(ran.ok()) << ran.status();
  ASSERT_EQ(ran->exit_code, 0) << ran->output;
  std::ifstream back(dir.file("data.bin"), std::ios::binary);
  back.read(reinterpret_cast<char*>(all.data()), static_cast<std::streamsize>(all.size()));
  ASSERT_TRUE(back.good());
  for (auto& [node, bytes] : *data) std::memcpy(bytes.data(), all.data() + offset_of[node], bytes.size());
}

// The conversions of processors with F16C but not AVX-512F (8 elements an instruction, where
// this one converts 16), and the generated C without a warning.
TEST(HalfBlocks, EightWideBlocksGiveThePlainLoopsBits) {
#if defined(__x86_64__)
  if (!has_f16c()) GTEST_SKIP() << "no F16C here";
  NodeData data = inputs();
  run_standalone(kernels(), {"-mno-avx512f"}, &data);
  if (HasFatalFailure() || IsSkipped()) return;
  EXPECT_EQ(check(data, "cc -mno-avx512f"), 0);
#else
  GTEST_SKIP() << "F16C is x86's";
#endif
}

}  // namespace
}  // namespace kiln::codegen_test
