// Language version 3's element types end to end: small `.kiln` programs over bool, i8 ... u64,
// f16, bf16, f32 and f64 run on every device (interp, cpu, and opencl where a platform is
// present), each with the default lowering and the plain one, and checked against values this
// test computes from the rules of docs/language.md ("Version 3") on its own — wrap-around at each
// width, x / 0, MIN / -1, unsigned u64, shifts by any amount, saturating casts, accumulation
// types — so that a device agreeing with the interpreter on a wrong rule still fails; f16 / bf16
// rounding is checked against op_eval's f16_bits / bf16_bits and against hand-worked halfway,
// subnormal and overflow cases. The CUDA C of every program must build (NVRTC and ptxas).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/lang/parser.h"
#include "kiln/loop/op_eval.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/node_table.h"
#include "kiln/runtime/program_instance.h"
#include "kiln/runtime/value_trace.h"
#include "runtime/cuda_build.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

using ir::DType;
using Tensors = std::map<std::string, HostTensor>;

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- The rules, written out ---------------------------------------------------------------

int bits_of(DType t) { return t == DType::kBool ? 1 : static_cast<int>(ir::dtype_size(t)) * 8; }
bool is_signed(DType t) { return ir::is_integer_type(t) && !ir::is_unsigned_type(t); }

// The type's least and greatest value.
__int128 least(DType t) { return is_signed(t) ? -(static_cast<__int128>(1) << (bits_of(t) - 1)) : 0; }
__int128 greatest(DType t) {
  if (t == DType::kBool) return 1;
  return is_signed(t) ? (static_cast<__int128>(1) << (bits_of(t) - 1)) - 1 : (static_cast<__int128>(1) << bits_of(t)) - 1;
}

// Two's complement wrap-around of any integer into the type: the value it has there.
__int128 wrap(DType t, __int128 v) {
  if (t == DType::kBool) return v != 0;
  const __int128 modulus = static_cast<__int128>(1) << bits_of(t);
  __int128 r = v % modulus;
  if (r < 0) r += modulus;
  if (is_signed(t) && r > greatest(t)) r -= modulus;
  return r;
}

// A float to an integer type: truncated toward zero, saturated, NaN 0 (bool: != 0).
__int128 saturate(DType t, double d) {
  if (t == DType::kBool) return d != 0;
  if (std::isnan(d)) return 0;
  if (d <= static_cast<double>(least(t))) return least(t);
  if (d >= std::ldexp(1.0, is_signed(t) ? bits_of(t) - 1 : bits_of(t))) return greatest(t);
  return static_cast<__int128>(std::trunc(d));
}

// The value of a float of type `t` nearest `d` (f16 / bf16 by op_eval's own bits).
double round_to(DType t, double d) {
  switch (t) {
    case DType::kF16: return ir::f16_value(ir::f16_bits(d));
    case DType::kBF16: return ir::bf16_value(ir::bf16_bits(d));
    case DType::kF32: return static_cast<float>(d);
    default: return d;
  }
}

// A value of any type: integers exactly (u64 and i64 in full), floats as doubles.
struct Value {
  bool is_float = false;
  __int128 i = 0;
  double f = 0;
};
Value integer(__int128 i) { return Value{false, i, 0}; }
Value number(double f) { return Value{true, 0, f}; }

// `v` (of type `from`) cast to `to`, by the rules of docs/language.md ("Casts").
Value cast(const Value& v, DType to) {
  if (ir::is_float_type(to)) {
    if (!v.is_float) {
      // Integers reach f16 and bf16 through f32.
      const double f32 = static_cast<float>(static_cast<long double>(v.i));
      return number(to == DType::kF64 ? static_cast<double>(static_cast<long double>(v.i)) : round_to(to, f32));
    }
    return number(round_to(to, v.f));
  }
  if (v.is_float) return integer(saturate(to, v.f));
  return integer(wrap(to, v.i));
}

// ---- Tensors from values and back -----------------------------------------------------------

HostTensor tensor_of(DType type, const std::vector<Value>& values) {
  HostTensor t{type, {static_cast<int64_t>(values.size())}, std::string(values.size() * ir::dtype_size(type), '\0')};
  for (size_t i = 0; i < values.size(); ++i) {
    ir::Scalar s;
    if (ir::is_float_type(type)) {
      s.f = values[i].is_float ? values[i].f : static_cast<double>(values[i].i);
    } else {
      s.i = static_cast<int64_t>(values[i].i);  // the low 64 bits: what the type stores
    }
    ir::store_scalar(type, s, t.bytes.data() + i * ir::dtype_size(type));
  }
  return t;
}

Value element(const HostTensor& t, int64_t i) {
  const ir::Scalar s = ir::load_scalar(t.dtype, t.bytes.data() + static_cast<size_t>(i) * ir::dtype_size(t.dtype));
  if (ir::is_float_type(t.dtype)) return number(s.f);
  return integer(t.dtype == DType::kU64 ? static_cast<__int128>(static_cast<uint64_t>(s.i)) : s.i);
}

std::vector<Value> ints(const std::vector<int>& v) {
  std::vector<Value> out;
  for (int x : v) out.push_back(integer(x));
  return out;
}

std::string text_of(const Value& v) {
  if (v.is_float) {
    char text[64];
    std::snprintf(text, sizeof text, "%.9g", v.f);
    return text;
  }
  return v.i < 0 ? std::to_string(static_cast<int64_t>(v.i)) : std::to_string(static_cast<uint64_t>(v.i));
}

// Exactly `want` (a float's sign of zero included; any NaN meets any NaN).
bool same(const Value& got, const Value& want) {
  if (got.is_float != want.is_float) return false;
  if (!got.is_float) return got.i == want.i;
  if (std::isnan(got.f) || std::isnan(want.f)) return std::isnan(got.f) && std::isnan(want.f);
  return got.f == want.f && std::signbit(got.f) == std::signbit(want.f);
}

// ---- Running ------------------------------------------------------------------------------

Result<Tensors> run_program(const std::string& device_name, const std::string& text, const ir::LowerOptions& lower,
                            const Tensors& inputs) {
  KILN_ASSIGN_OR_RETURN(ir::Program program, lang::parse_program(text, "types.kiln"));
  TempDir cache;
  KILN_ASSIGN_OR_RETURN(hal::DeviceRef device, open_device(device_name, cache.path()));
  runtime::ProgramOptions options;
  options.lower = lower;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<runtime::ProgramInstance> instance,
                        runtime::ProgramInstance::create(device, program, options));
  for (const auto& [name, t] : inputs) KILN_RETURN_IF_ERROR(write_tensor(*instance, name, t));
  for (const std::string& routine : default_routines(program)) KILN_RETURN_IF_ERROR(instance->run(routine));
  Tensors out;
  for (const ir::TensorNode* node : result_nodes(program)) {
    KILN_ASSIGN_OR_RETURN(out[node->name], read_tensor(*instance, *node));
  }
  return out;
}

// Runs `text` on every device with both lowerings and expects every output of `expected`
// exactly (reporting the first few wrong elements of each); its CUDA C must build for sm_80 and
// sm_90 where NVRTC and ptxas are present (no GPU needed).
void expect_everywhere(const std::string& text, const Tensors& inputs,
                       const std::map<std::string, std::vector<Value>>& expected) {
  for (const std::string& device : present_devices()) {
    for (const ir::LowerOptions& lower : {ir::LowerOptions{}, plain_lowering()}) {
      SCOPED_TRACE(device + (lower.optimize ? ", default lowering" : ", plain lowering"));
      Result<Tensors> got = run_program(device, text, lower, inputs);
      ASSERT_TRUE(got.ok()) << got.status() << "\n" << text;
      for (const auto& [name, values] : expected) {
        ASSERT_TRUE(got->count(name)) << name;
        const HostTensor& t = got->at(name);
        ASSERT_EQ(t.size(), static_cast<int64_t>(values.size())) << name;
        int wrong = 0;
        for (size_t i = 0; i < values.size(); ++i) {
          const Value g = element(t, static_cast<int64_t>(i));
          if (!same(g, values[i]) && ++wrong <= 4) {
            ADD_FAILURE() << name << "[" << i << "] (" << ir::dtype_name(t.dtype) << "): got " << text_of(g)
                          << ", expected " << text_of(values[i]);
          }
        }
      }
    }
  }
  // With the default lowering (the plain one's many small kernels take NVRTC and ptxas far
  // longer, and print the same expressions).
  static const Status cuda = cuda_toolchain_available();
  if (!cuda.ok()) return;
  Result<ir::Program> program = lang::parse_program(text, "types.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  Result<ir::LoweredProgram> lowered = ir::lower_program(*program, ir::LowerOptions{});
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  Status built = check_cuda_builds(*lowered, "types.kiln");
  EXPECT_TRUE(built.ok()) << built;
}

std::string name_of(DType t) { return std::string(ir::dtype_name(t)); }

const DType kIntegerTypes[] = {DType::kI8, DType::kU8, DType::kI16, DType::kU16,
                               DType::kI32, DType::kU32, DType::kI64, DType::kU64};

// Operand pairs at each type's edges: MAX + 1, MIN - 1, MIN / -1, x / 0, products that
// overflow, and (wrapped into unsigned types) negative values, which are large there.
std::vector<std::pair<__int128, __int128>> edge_pairs(DType t) {
  const __int128 lo = least(t), hi = greatest(t);
  const std::vector<std::pair<__int128, __int128>> raw = {
      {hi, 1}, {lo, -1}, {lo, 1}, {7, 0}, {-7, 2}, {7, -2}, {hi, hi}, {lo, lo}, {hi, 2}, {100, 3},
      {-100, 7}, {0, 0}, {hi - 1, hi}, {lo + 1, -1}, {(hi + 1) / 2 + 5, 3}, {3, (hi + 1) / 2 + 5}};
  std::vector<std::pair<__int128, __int128>> out;
  for (auto [a, b] : raw) out.emplace_back(wrap(t, a), wrap(t, b));
  return out;
}

// ---- Integers ---------------------------------------------------------------------------

// + - * / neg abs max min < == at every integer width, on the edges: wrap-around (127 + 1 in i8,
// 255 + 1 in u8), x / 0 == 0, MIN / -1 == MIN, u64 above 2^63 compared and divided unsigned; a
// literal takes the tensor's type (a + 1); the op's type, not the target's, decides where it
// wraps (u8 + u8 into i64 wraps at 8 bits).
TEST(ElementTypesTest, IntegerArithmeticWrapsAtEachWidth) {
  std::string text;
  Tensors inputs;
  std::map<std::string, std::vector<Value>> want;
  for (DType t : kIntegerTypes) {
    const std::string T = name_of(t), n = "[" + std::to_string(edge_pairs(t).size()) + "]";
    auto name = [&](const char* what) { return std::string(what) + "_" + T; };
    text += "input " + name("a") + " : " + T + n + "\ninput " + name("b") + " : " + T + n + "\n";
    const std::string a = name("a") + "[i]", b = name("b") + "[i]";
    const std::string statements[][3] = {
        {"add", T, a + " + " + b},   {"sub", T, a + " - " + b},        {"mul", T, a + " * " + b},
        {"div", T, a + " / " + b},   {"neg", T, "-" + a},              {"ab", T, "abs(" + a + ")"},
        {"mx", T, "max(" + a + ", " + b + ")"}, {"mn", T, "min(" + a + ", " + b + ")"}, {"inc", T, a + " + 1"},
        {"lt", "bool", a + " < " + b}, {"eq", "bool", a + " == " + b}, {"wide", "i64", a + " + " + b}};
    for (const auto& [out, type, expr] : statements) {
      text += "output " + name(out.c_str()) + " : " + type + n + "\n" + name(out.c_str()) + "[i] = " + expr + "\n";
    }
    std::vector<Value> av, bv;
    for (auto [x, y] : edge_pairs(t)) {
      av.push_back(integer(x));
      bv.push_back(integer(y));
      // Division: truncated; by 0 it is 0; MIN / -1 wraps to MIN.
      const __int128 quotient = y == 0 ? 0 : wrap(t, x / y);
      want[name("add")].push_back(integer(wrap(t, x + y)));
      want[name("sub")].push_back(integer(wrap(t, x - y)));
      // The product's low 128 bits (two u64 values' product passes 2^127): wrap keeps fewer.
      const auto product = static_cast<__int128>(static_cast<unsigned __int128>(x) * static_cast<unsigned __int128>(y));
      want[name("mul")].push_back(integer(wrap(t, product)));
      want[name("div")].push_back(integer(quotient));
      want[name("neg")].push_back(integer(wrap(t, -x)));
      want[name("ab")].push_back(integer(wrap(t, x < 0 ? -x : x)));
      want[name("mx")].push_back(integer(x < y ? y : x));
      want[name("mn")].push_back(integer(y < x ? y : x));
      want[name("inc")].push_back(integer(wrap(t, x + 1)));
      want[name("lt")].push_back(integer(x < y));
      want[name("eq")].push_back(integer(x == y));
      want[name("wide")].push_back(integer(wrap(DType::kI64, wrap(t, x + y))));
    }
    inputs[name("a")] = tensor_of(t, av);
    inputs[name("b")] = tensor_of(t, bv);
  }
  // The examples of docs/language.md.
  EXPECT_EQ(want["inc_i8"][0].i, -128);   // 127 + 1
  EXPECT_EQ(want["inc_u8"][0].i, 0);      // 255 + 1
  EXPECT_EQ(want["div_i32"][1].i, least(DType::kI32));  // INT32_MIN / -1
  EXPECT_EQ(want["div_u64"][3].i, 0);     // 7 / 0
  expect_everywhere(text, inputs, want);
}

// & | ^ ~ bit by bit, and << >> by amounts of two integer types (i32, u8): negative, inside the
// width, at it and beyond: 0, or -1 for >> of a negative signed value; >> of signed values is
// arithmetic.
TEST(ElementTypesTest, BitwiseOpsAndShiftsByAnyAmount) {
  const int64_t amounts[] = {-1, 0, 1, 3, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 100, -100};
  std::string text;
  Tensors inputs;
  std::map<std::string, std::vector<Value>> want;
  for (DType t : kIntegerTypes) {
    const std::string T = name_of(t), n = "[" + std::to_string(edge_pairs(t).size()) + "]";
    auto name = [&](const char* what) { return std::string(what) + "_" + T; };
    const std::string a = name("a") + "[i]", b = name("b") + "[i]", s = name("s") + "[i]", su = name("su") + "[i]";
    text += "input " + name("a") + " : " + T + n + "\ninput " + name("b") + " : " + T + n + "\ninput " + name("s") +
            " : i32" + n + "\ninput " + name("su") + " : u8" + n + "\n";
    for (auto [out, expr] : {std::pair{"band", a + " & " + b}, std::pair{"bor", a + " | " + b}, std::pair{"bxor", a + " ^ " + b},
                             std::pair{"bnot", "~" + a}, std::pair{"shl", a + " << " + s}, std::pair{"shr", a + " >> " + s},
                             std::pair{"shlu", a + " << " + su}, std::pair{"shru", a + " >> " + su}}) {
      text += "output " + name(out) + " : " + T + n + "\n" + name(out) + "[i] = " + expr + "\n";
    }
    auto shift = [&](__int128 x, __int128 amount, bool left) -> __int128 {
      if (amount < 0 || amount >= bits_of(t)) return !left && x < 0 ? -1 : 0;
      // Arithmetic >> on the value (floor division by 2^amount); << keeps the low bits.
      return left ? wrap(t, x * (static_cast<__int128>(1) << amount))
                  : (x >= 0 ? x >> amount : -((-x - 1) >> amount) - 1);
    };
    std::vector<Value> av, bv, sv, suv;
    size_t k = 0;
    for (auto [x, y] : edge_pairs(t)) {
      const __int128 by = amounts[k % std::size(amounts)], by_u8 = wrap(DType::kU8, amounts[(k + 5) % std::size(amounts)]);
      ++k;
      av.push_back(integer(x));
      bv.push_back(integer(y));
      sv.push_back(integer(by));
      suv.push_back(integer(by_u8));
      // On the two's complement bits of the type: the low `bits` bits of any representation.
      const auto ux = static_cast<unsigned __int128>(x), uy = static_cast<unsigned __int128>(y);
      want[name("band")].push_back(integer(wrap(t, static_cast<__int128>(ux & uy))));
      want[name("bor")].push_back(integer(wrap(t, static_cast<__int128>(ux | uy))));
      want[name("bxor")].push_back(integer(wrap(t, static_cast<__int128>(ux ^ uy))));
      want[name("bnot")].push_back(integer(wrap(t, static_cast<__int128>(~ux))));
      want[name("shl")].push_back(integer(shift(x, by, true)));
      want[name("shr")].push_back(integer(shift(x, by, false)));
      want[name("shlu")].push_back(integer(shift(x, by_u8, true)));
      want[name("shru")].push_back(integer(shift(x, by_u8, false)));
    }
    inputs[name("a")] = tensor_of(t, av);
    inputs[name("b")] = tensor_of(t, bv);
    inputs[name("s")] = tensor_of(DType::kI32, sv);
    inputs[name("su")] = tensor_of(DType::kU8, suv);
  }
  expect_everywhere(text, inputs, want);
}

// Comparisons give bool for every type: floats (f16 and bf16 compared as the values they hold)
// with NaN unordered, -0 equal to +0, infinities; bool with bool; and u64 against i64's order.
TEST(ElementTypesTest, ComparisonsOfEveryTypeGiveBool) {
  const std::vector<std::pair<double, double>> pairs = {{1, 2}, {2, 1}, {-0.0, 0.0}, {kNaN, 1}, {1, kNaN}, {kNaN, kNaN},
                                                        {-kInf, kInf}, {kInf, kInf}, {0.1, 0.1000001}, {65504, 65520}};
  std::string text;
  Tensors inputs;
  std::map<std::string, std::vector<Value>> want;
  const std::pair<const char*, std::function<bool(double, double)>> ops[] = {
      {"<", [](double x, double y) { return x < y; }},   {"<=", [](double x, double y) { return x <= y; }},
      {">", [](double x, double y) { return x > y; }},   {">=", [](double x, double y) { return x >= y; }},
      {"==", [](double x, double y) { return x == y; }}, {"!=", [](double x, double y) { return x != y; }}};
  for (DType t : {DType::kF16, DType::kBF16, DType::kF32, DType::kF64, DType::kBool}) {
    const std::string T = name_of(t), n = "[" + std::to_string(pairs.size()) + "]";
    std::vector<Value> a, b;
    for (auto [x, y] : pairs) {
      // What a tensor of the type holds (bool: != 0).
      a.push_back(t == DType::kBool ? integer(x != 0) : number(round_to(t, x)));
      b.push_back(t == DType::kBool ? integer(y != 0) : number(round_to(t, y)));
    }
    inputs["a_" + T] = tensor_of(t, a);
    inputs["b_" + T] = tensor_of(t, b);
    text += "input a_" + T + " : " + T + n + "\ninput b_" + T + " : " + T + n + "\n";
    for (size_t k = 0; k < std::size(ops); ++k) {
      const std::string out = "c" + std::to_string(k) + "_" + T;
      text += "output " + out + " : bool" + n + "\n" + out + "[i] = a_" + T + "[i] " + ops[k].first + " b_" + T + "[i]\n";
      for (size_t i = 0; i < pairs.size(); ++i) {
        const double x = a[i].is_float ? a[i].f : static_cast<double>(a[i].i), y = b[i].is_float ? b[i].f : static_cast<double>(b[i].i);
        want[out].push_back(integer(ops[k].second(x, y)));
      }
    }
  }
  expect_everywhere(text, inputs, want);
}

// bool: & | ^ ~ are logical, true and false are bool literals, arithmetic on bool counts in i32,
// and a bool read from memory holding any non-zero byte is true.
TEST(ElementTypesTest, BoolIsLogicalAndCountsInI32) {
  const std::string text = R"(
input p : bool[4]
input q : bool[4]
output band : bool[4]
output bor : bool[4]
output bxor : bool[4]
output bnot : bool[4]
output with_true : bool[4]
output with_false : bool[4]
output count : i32[4]
output negated : i32[4]
band[i] = p[i] & q[i]
bor[i] = p[i] | q[i]
bxor[i] = p[i] ^ q[i]
bnot[i] = ~p[i]
with_true[i] = p[i] ^ true
with_false[i] = q[i] | false
count[i] = p[i] + q[i] + p[i]
negated[i] = -p[i]
)";
  HostTensor p = tensor_of(DType::kBool, {integer(0), integer(0), integer(1), integer(1)});
  p.bytes[3] = 7;  // any non-zero byte reads as true
  const HostTensor q = tensor_of(DType::kBool, {integer(0), integer(1), integer(0), integer(1)});
  expect_everywhere(text, {{"p", p}, {"q", q}},
                    {{"band", ints({0, 0, 0, 1})},
                     {"bor", ints({0, 1, 1, 1})},
                     {"bxor", ints({0, 1, 1, 0})},
                     {"bnot", ints({1, 1, 0, 0})},
                     {"with_true", ints({1, 1, 0, 0})},
                     {"with_false", ints({0, 1, 0, 1})},
                     {"count", ints({0, 1, 2, 3})},
                     {"negated", ints({0, 0, -1, -1})}});
}

// ---- Casts ------------------------------------------------------------------------------

// Source values of each type for the casts: every type's limits and beyond (wrapped), and floats
// that are NaN, infinite, -0, huge, beyond each integer type, halfway between two f16 or bf16
// values, subnormal in f16 or f32, or past f16's largest.
std::vector<Value> cast_sources(DType t) {
  if (t == DType::kBool) return {integer(0), integer(1)};
  std::vector<Value> out;
  if (ir::is_float_type(t)) {
    for (double d : {0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0, 300.0, -300.0,
                     65504.0, 65519.0, 65520.0, 1e9, -1e9, 3e9, 5e9, 1e19, 2e19, -1e19, 1.0 + 0x1p-11, 1.0 + 0x3p-11,
                     0x1p-25, 0x3p-25, 0x1p-24, 1.0 + 0x1p-8, 1.0 + 0x3p-8, 1e-40, 3.4e38, 1e300, kInf, -kInf, kNaN}) {
      out.push_back(number(round_to(t, d)));  // what a tensor of type t holds
    }
    return out;
  }
  for (__int128 v : {static_cast<__int128>(0), static_cast<__int128>(1), static_cast<__int128>(-1),
                     static_cast<__int128>(127), static_cast<__int128>(128), static_cast<__int128>(255),
                     static_cast<__int128>(256), static_cast<__int128>(300), static_cast<__int128>(-129),
                     static_cast<__int128>(65535), static_cast<__int128>(65536), static_cast<__int128>(1) << 31,
                     (static_cast<__int128>(1) << 32) + 3, (static_cast<__int128>(1) << 53) + 1,
                     (static_cast<__int128>(1) << 24) + 1, least(t), greatest(t), greatest(t) - 1}) {
    out.push_back(integer(wrap(t, v)));
  }
  return out;
}

// Every type cast to every type (169 casts in one program), by the rules: floats to integers
// truncate and saturate (NaN 0), integers wrap, anything to bool is != 0, integers reach f16 and
// bf16 through f32, floats round to nearest even.
TEST(ElementTypesTest, CastsBetweenEveryPairOfTypes) {
  std::string text;
  Tensors inputs;
  std::map<std::string, std::vector<Value>> want;
  for (DType from : ir::kAllDTypes) {
    const std::vector<Value> sources = cast_sources(from);
    const std::string x = "x_" + name_of(from), n = std::to_string(sources.size());
    text += "input " + x + " : " + name_of(from) + "[" + n + "]\n";
    inputs[x] = tensor_of(from, sources);
    for (DType to : ir::kAllDTypes) {
      const std::string o = "o_" + name_of(from) + "_" + name_of(to);
      text += "output " + o + " : " + name_of(to) + "[" + n + "]\n";
      text += o + "[i] = " + name_of(to) + "(" + x + "[i])\n";
      for (const Value& v : sources) want[o].push_back(cast(v, to));
    }
  }
  expect_everywhere(text, inputs, want);
}

// f16 and bf16 rounding worked by hand: ties to even (1 + 2^-11 is 1, 1 + 3 * 2^-11 is 1 + 2^-9),
// subnormals (2^-25 ties to 0, 3 * 2^-25 to 2^-23), overflow (65520 is infinity; 65519 is 65504),
// NaN and -0 kept; bf16 likewise at its 8 bits and f32's range (1 + 3 * 2^-8, exact in f16, ties
// to 1 + 2^-6 there).
TEST(ElementTypesTest, HalfAndBfloatRoundToNearestEven) {
  const std::string text = R"(
input x : f32[10]
input d : f64[3]
output h : f16[10]
output b : bf16[10]
output hd : f16[3]
h[i] = f16(x[i])
b[i] = bf16(x[i])
hd[i] = d[i]
)";
  const std::vector<Value> x = {number(1.0 + 0x1p-11), number(1.0 + 0x3p-11), number(0x1p-25), number(0x3p-25),
                                number(65519.0), number(65520.0), number(-65520.0), number(kNaN), number(-0.0),
                                number(1.0 + 0x3p-8)};
  // 1 + 2^-11 + 2^-40 is just above the f16 halfway point, but rounds to it in f32 first: an f64
  // value must round to f16 once, from the f64 (up), not through f32 (down, to even).
  const std::vector<Value> d = {number(1.0 + 0x1p-11 + 0x1p-40), number(-(1.0 + 0x1p-11 + 0x1p-40)), number(0x1p-25 + 0x1p-60)};
  expect_everywhere(text, {{"x", tensor_of(DType::kF32, x)}, {"d", tensor_of(DType::kF64, d)}},
                    {{"h", {number(1.0), number(1.0 + 0x1p-9), number(0.0), number(0x1p-23), number(65504.0),
                            number(kInf), number(-kInf), number(kNaN), number(-0.0), number(1.0 + 0x3p-8)}},
                     {"b", {number(1.0), number(1.0), number(0x1p-25), number(0x3p-25), number(65536.0),
                            number(65536.0), number(-65536.0), number(kNaN), number(-0.0), number(1.0 + 0x1p-6)}},
                     {"hd", {number(1.0 + 0x1p-10), number(-(1.0 + 0x1p-10)), number(0x1p-24)}}});
}

// Within a statement f16 / bf16 values are computed in f32 and rounded once, at the store: an
// f16 sum that ties rounds to even, a product past 65504 is infinity, an f32 target keeps the f32
// result, and a cast in the middle rounds there too.
TEST(ElementTypesTest, HalfArithmeticIsComputedInF32AndRoundedAtTheStore) {
  const std::string text = R"(
input a : f16[8]
input b : f16[8]
input c : bf16[8]
output s : f16[8]
output p : f16[8]
output q : f16[8]
output s32 : f32[8]
output twice : f16[8]
output cs : bf16[8]
s[i] = a[i] + b[i]
p[i] = a[i] * b[i]
q[i] = a[i] / b[i]
s32[i] = a[i] + b[i]
twice[i] = f16(a[i] * b[i]) + b[i]
cs[i] = c[i] + c[i] * b[i]
)";
  const std::vector<double> av = {2048, 2050, 300, 0x1p-14, 1, -0.0, 0.1, kInf};
  const std::vector<double> bv = {1, 1, 300, 0x1p-10, 0x1p-11, -0.0, 3, 1};
  const std::vector<double> cv = {256, 257, 1e38, 3, 0.1, -2, 1, kNaN};
  std::vector<Value> a, b, c;
  std::map<std::string, std::vector<Value>> want;
  for (size_t i = 0; i < av.size(); ++i) {
    const double x = round_to(DType::kF16, av[i]), y = round_to(DType::kF16, bv[i]), z = round_to(DType::kBF16, cv[i]);
    a.push_back(number(x));
    b.push_back(number(y));
    c.push_back(number(z));
    // f32 arithmetic (one f32 rounding of the exact result), then the store's rounding.
    const float sum = static_cast<float>(x) + static_cast<float>(y);
    const float product = static_cast<float>(x) * static_cast<float>(y);
    want["s"].push_back(number(round_to(DType::kF16, sum)));
    want["p"].push_back(number(round_to(DType::kF16, product)));
    want["q"].push_back(number(round_to(DType::kF16, static_cast<float>(x) / static_cast<float>(y))));
    want["s32"].push_back(number(sum));
    want["twice"].push_back(number(round_to(DType::kF16, static_cast<float>(round_to(DType::kF16, product)) + static_cast<float>(y))));
    // bf16 * f16 is f32; the whole right side in f32, rounded to bf16 once.
    want["cs"].push_back(number(round_to(DType::kBF16, static_cast<float>(z) + static_cast<float>(z) * static_cast<float>(y))));
  }
  // The f16 ties: 2048 + 1 is 2048 (even), 2050 + 1 is 2052; 300 * 300 overflows.
  ASSERT_EQ(want["s"][0].f, 2048.0);
  ASSERT_EQ(want["s"][1].f, 2052.0);
  ASSERT_EQ(want["p"][2].f, kInf);
  expect_everywhere(text, {{"a", tensor_of(DType::kF16, a)}, {"b", tensor_of(DType::kF16, b)}, {"c", tensor_of(DType::kBF16, c)}},
                    want);
}

// ---- Reductions, gathers, select --------------------------------------------------------

// sum / prod of bool and narrow integers accumulate in i64 (u64 for unsigned) and convert to the
// target (wrapping), over f16 / bf16 in f32; mean of integers in f64; max / min keep the type
// (u64 unsigned); argmax / argmin give positions in any integer type. Long enough rows (300) that
// the reductions split into vector lanes.
TEST(ElementTypesTest, ReductionsAccumulateInTheirTypes) {
  const std::string text = R"(
input x8 : i8[4]
input u : u8[300]
input m : bool[5]
input h : f16[3]
input bb : bf16[3]
input big : u64[3]
input l : i64[2]
input w : i32[201]
output s8 : i8
output s32 : i32
output p16 : i16
output su64 : u64
output su8 : u8
output su32 : u32
output mu : f64
output mu8 : u8
output mx : u8
output mn : u8
output cnt : i64
output cnt8 : u8
output any : bool
output all : bool
output sh : f16
output sb : bf16
output mh : f16
output sbig : u64
output mxbig : u64
output sl : i64
output sw : i32
output sw64 : i64
output am8 : i8
output amu : u16
s8 = sum(x8[i])
s32 = sum(x8[i])
p16 = prod(x8[i])
su64 = sum(u[i])
su8 = sum(u[i])
su32 = sum(u[i])
mu = mean(u[i])
mu8 = mean(u[i])
mx = max(u[i])
mn = min(u[i])
cnt = sum(m[i])
cnt8 = sum(m[i])
any = max(m[i])
all = min(m[i])
sh = sum(h[i])
sb = sum(bb[i])
mh = mean(h[i])
sbig = sum(big[i])
mxbig = max(big[i])
sl = sum(l[i])
sw = sum(w[i])
sw64 = sum(w[i])
am8 = argmax(x8[i])
amu = argmin(u[i])
)";
  std::vector<Value> u;
  __int128 usum = 0;
  for (int i = 0; i < 300; ++i) {
    const int v = i == 17 ? 3 : 200 + i % 56;  // 3 is the least, at 17; 255 the greatest
    u.push_back(integer(v));
    usum += v;
  }
  std::vector<Value> w(201, integer(int64_t{1} << 30));
  const __int128 big = (static_cast<__int128>(1) << 63) + 1;
  const Tensors inputs = {
      {"x8", tensor_of(DType::kI8, {integer(100), integer(100), integer(100), integer(-128)})},
      {"u", tensor_of(DType::kU8, u)},
      {"m", tensor_of(DType::kBool, {integer(1), integer(0), integer(1), integer(1), integer(0)})},
      {"h", tensor_of(DType::kF16, {number(2048), number(1), number(1)})},
      {"bb", tensor_of(DType::kBF16, {number(256), number(1), number(1)})},
      {"big", tensor_of(DType::kU64, {integer(big), integer(big), integer(5)})},
      {"l", tensor_of(DType::kI64, {integer(std::numeric_limits<int64_t>::max()), integer(1)})},
      {"w", tensor_of(DType::kI32, w)},
  };
  const double umean = static_cast<double>(usum) / 300;
  expect_everywhere(
      text, inputs,
      {{"s8", {integer(wrap(DType::kI8, 172))}},   // 100 + 100 + 100 - 128 in i64, then wrapped
       {"s32", {integer(172)}},
       {"p16", {integer(wrap(DType::kI16, static_cast<__int128>(100) * 100 * 100 * -128))}},
       {"su64", {integer(usum)}},
       {"su8", {integer(wrap(DType::kU8, usum))}},
       {"su32", {integer(usum)}},
       {"mu", {number(umean)}},
       {"mu8", {integer(saturate(DType::kU8, umean))}},
       {"mx", {integer(255)}},
       {"mn", {integer(3)}},
       {"cnt", {integer(3)}},
       {"cnt8", {integer(3)}},
       {"any", {integer(1)}},
       {"all", {integer(0)}},
       {"sh", {number(2050)}},  // in f32 (f16 would stay at 2048: 2048 + 1 ties to even)
       {"sb", {number(258)}},   // likewise bf16 at 256
       {"mh", {number(round_to(DType::kF16, static_cast<float>(2050.0f / 3.0f)))}},
       {"sbig", {integer(wrap(DType::kU64, 2 * big + 5))}},
       {"mxbig", {integer(big)}},  // unsigned: above 2^63 is the greatest
       {"sl", {integer(std::numeric_limits<int64_t>::min())}},
       {"sw", {integer(wrap(DType::kI32, static_cast<__int128>(201) << 30))}},
       {"sw64", {integer(static_cast<__int128>(201) << 30)}},
       {"am8", {integer(0)}},
       {"amu", {integer(17)}}});
}

// Gathers read index tensors of any integer type: i8 (a negative index is out of range: 0), u8
// (200 is out of range), i64.
TEST(ElementTypesTest, GathersTakeIndicesOfAnyIntegerType) {
  const std::string text = R"(
input e : f32[5, 2]
input t8 : i8[4]
input tu : u8[4]
input t64 : i64[4]
output g8 : f32[4, 2]
output gu : f32[4, 2]
output g64 : f32[4, 2]
g8[i, j] = e[t8[i], j]
gu[i, j] = e[tu[i], j]
g64[i, j] = e[t64[i], j]
)";
  std::vector<Value> e;
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 2; ++c) e.push_back(number(10 * r + c + 1));
  }
  auto rows = [&](std::vector<int> index) {
    std::vector<Value> out;
    for (int r : index) {
      for (int c = 0; c < 2; ++c) out.push_back(number(r >= 0 && r < 5 ? 10 * r + c + 1 : 0));
    }
    return out;
  };
  expect_everywhere(text,
                    {{"e", tensor_of(DType::kF32, e)},
                     {"t8", tensor_of(DType::kI8, {integer(4), integer(0), integer(-1), integer(2)})},
                     {"tu", tensor_of(DType::kU8, {integer(1), integer(200), integer(4), integer(0)})},
                     {"t64", tensor_of(DType::kI64, {integer(3), integer(2), integer(1), integer(0)})}},
                    {{"g8", rows({4, 0, -1, 2})}, {"gu", rows({1, 200, 4, 0})}, {"g64", rows({3, 2, 1, 0})}});
}

// select's condition: a bool tensor, a comparison, a float (non-zero, NaN included, is true), a
// bool literal.
TEST(ElementTypesTest, SelectTakesABoolOrAnyCondition) {
  const std::string text = R"(
input c : bool[4]
input f : f32[4]
input a : i16[4]
input b : i16[4]
output by_bool : i16[4]
output by_compare : i16[4]
output by_float : i16[4]
output by_literal : i16[4]
by_bool[i] = select(c[i], a[i], b[i])
by_compare[i] = select(a[i] > b[i], a[i], b[i])
by_float[i] = select(f[i], a[i], b[i])
by_literal[i] = select(false, a[i], b[i])
)";
  expect_everywhere(text,
                    {{"c", tensor_of(DType::kBool, ints({1, 0, 1, 0}))},
                     {"f", tensor_of(DType::kF32, {number(0.0), number(-0.0), number(kNaN), number(0.5)})},
                     {"a", tensor_of(DType::kI16, ints({-32768, 5, 7, 32767}))},
                     {"b", tensor_of(DType::kI16, ints({1, 6, -7, -1}))}},
                    {{"by_bool", ints({-32768, 6, 7, -1})},
                     {"by_compare", ints({1, 6, 7, 32767})},
                     {"by_float", ints({1, 6, 7, 32767})},
                     {"by_literal", ints({1, 6, -7, -1})}});
}

// Value tracing logs every type as the interpreter does (kiln/loop/loop.h, "Value tracing"): a
// u64 above 2^63 unsigned, f16 as the value it holds (an overflow as inf), bool as 0 or 1, the
// same lines on every device.
TEST(ElementTypesTest, ValueTracesOfEveryTypeAgreeAcrossDevices) {
  const std::string text = R"(input a : u64[3]
input h : f16[3]
input m : bool[3]
input s : i8[3]
output c : u64[3]
output e : f16[3]
output f : bool[3]
output g : u32[3]
routine step {
  c[i] = a[i] + a[i]
  e[i] = h[i] * 3
  f[i] = ~m[i]
  g[i] = u32(s[i])
}
)";
  Result<ir::Program> program = lang::parse_program(text, "trace.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  const Tensors inputs = {
      {"a", tensor_of(DType::kU64, {integer((static_cast<__int128>(1) << 63) + 5), integer(greatest(DType::kU64)), integer(7)})},
      {"h", tensor_of(DType::kF16, {number(65504), number(1), number(-2.5)})},
      {"m", tensor_of(DType::kBool, ints({1, 0, 1}))},
      {"s", tensor_of(DType::kI8, ints({-1, 127, -128}))}};
  std::map<std::string, nlohmann::json> entries;  // per device: the run's entries
  for (const std::string& device : present_devices()) {
    SCOPED_TRACE(device);
    Result<std::shared_ptr<runtime::ValueTrace>> trace = runtime::ValueTrace::start();
    ASSERT_TRUE(trace.ok()) << trace.status();
    TempDir cache;
    Result<hal::DeviceRef> dev = open_device(device, cache.path());
    ASSERT_TRUE(dev.ok()) << dev.status();
    runtime::BackendOptions backend_options;
    backend_options.value_trace = *trace;
    Result<std::shared_ptr<runtime::Backend>> backend = runtime::Backend::create(*dev, backend_options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    Result<std::shared_ptr<runtime::NodeTable>> nodes = runtime::NodeTable::create(*program, 1);
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    for (const auto& [name, t] : inputs) {
      Result<runtime::HostTensor> tensor = (*nodes)->tensor(name);
      ASSERT_TRUE(tensor.ok()) << tensor.status();
      ASSERT_TRUE(tensor->write(std::as_bytes(std::span<const char>(t.bytes.data(), t.bytes.size()))).ok());
    }
    runtime::CompileOptions compile;
    compile.lower.trace_values = true;
    Result<runtime::StreamRef> stream = (*backend)->new_stream("s0");
    ASSERT_TRUE(stream.ok()) << stream.status();
    Result<runtime::ContextRef> root = (*backend)->make_context(*stream, *nodes, "root");
    ASSERT_TRUE(root.ok()) << root.status();
    Result<runtime::CodeRef> code = (*backend)->compile(*program, "step", compile);
    ASSERT_TRUE(code.ok()) << code.status();
    Result<runtime::Linked> linked = (*backend)->link(*root, *code, "step");
    ASSERT_TRUE(linked.ok()) << linked.status();
    ASSERT_TRUE(linked->routine->run().ok());
    ASSERT_TRUE((*backend)->await(Timeout::after_ms(120000)).ok());
    Result<std::string> lines = (*trace)->json_lines();
    ASSERT_TRUE(lines.ok()) << lines.status();
    ASSERT_TRUE((*trace)->stop().ok());
    std::istringstream in(*lines);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("entries")) entries[device] = j["entries"];
    }
    ASSERT_TRUE(entries.count(device)) << *lines;
  }
  const nlohmann::json& reference = entries.at("interp");
  for (const auto& [device, e] : entries) EXPECT_EQ(e, reference) << device << ": " << e.dump() << "\n  interp: " << reference.dump();
  // The statements' values: u64 2^63 + 5 doubled wraps to 10, 2^64 - 1 doubled is 2^64 - 2; f16
  // 65504 * 3 overflows; bool's ~; i8 -128 is 2^32 - 128 in u32.
  std::vector<std::string> values;
  for (const nlohmann::json& statement : reference) {
    for (const nlohmann::json& l : statement["lines"]) values.push_back(l["value"].dump());
  }
  EXPECT_EQ(values, (std::vector<std::string>{"10", "18446744073709551614", "14", "\"inf\"", "3", "-7.5", "0", "1",
                                              "0", "4294967295", "127", "4294967168"}));
}

}  // namespace
}  // namespace kiln::e2e
