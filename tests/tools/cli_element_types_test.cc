// `kiln run` with every element type (language version 3): .npy inputs and outputs of each type,
// `--print` of each (bool as false / true, integers exactly, f16 and bf16 with the digits that
// read back), bf16 from u16 bit patterns, and the refusals: a file of another type than the
// declared one (nothing converts), a bool array with a byte other than 0 and 1. On interp, the
// reference: what the command line does with the values does not depend on the device.
#include <cstring>
#include <limits>
#include <sstream>

#include "tools/cli_test_util.h"

namespace kiln::tools {
namespace {

template <typename T>
NpyArray array_of(ir::DType dtype, const std::vector<T>& values) {
  NpyArray a{dtype, {static_cast<int64_t>(values.size())}, std::string(values.size() * sizeof(T), '\0')};
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

// One input and one output of each type, y = x, and three values of each that test its edges.
struct TypeCase {
  const char* name;  // of the tensors: xNAME, yNAME
  ir::DType dtype;
  NpyArray values;
  const char* printed;  // the --print line of the three values
};

std::vector<TypeCase> cases() {
  const uint16_t f16[] = {0x2e66, 0xfc00, 0x7bff};  // 0.1 (rounded), -inf, 65504
  const uint16_t bf16[] = {0x3dcd, 0x7fc0, 0x4040};  // 0.1 (rounded), nan, 3
  return {
      {"b", ir::DType::kBool, array_of<uint8_t>(ir::DType::kBool, {0, 1, 1}), "false true true"},
      {"i8", ir::DType::kI8, array_of<int8_t>(ir::DType::kI8, {-128, 127, 0}), "-128 127 0"},
      {"u8", ir::DType::kU8, array_of<uint8_t>(ir::DType::kU8, {0, 255, 7}), "0 255 7"},
      {"i16", ir::DType::kI16, array_of<int16_t>(ir::DType::kI16, {-32768, 32767, -1}), "-32768 32767 -1"},
      {"u16", ir::DType::kU16, array_of<uint16_t>(ir::DType::kU16, {65535, 0, 300}), "65535 0 300"},
      {"i32", ir::DType::kI32, array_of<int32_t>(ir::DType::kI32, {INT32_MIN, INT32_MAX, 1234567}),
       "-2147483648 2147483647 1234567"},
      {"u32", ir::DType::kU32, array_of<uint32_t>(ir::DType::kU32, {UINT32_MAX, 0, 1}), "4294967295 0 1"},
      {"i64", ir::DType::kI64, array_of<int64_t>(ir::DType::kI64, {INT64_MIN, INT64_MAX, -3}),
       "-9223372036854775808 9223372036854775807 -3"},
      {"u64", ir::DType::kU64, array_of<uint64_t>(ir::DType::kU64, {UINT64_MAX, uint64_t{1} << 63, 9007199254740993u}),
       "18446744073709551615 9223372036854775808 9007199254740993"},
      {"f16", ir::DType::kF16, array_of<uint16_t>(ir::DType::kF16, {f16[0], f16[1], f16[2]}), "0.1 -inf 65504"},
      {"bf", ir::DType::kBF16, array_of<uint16_t>(ir::DType::kBF16, {bf16[0], bf16[1], bf16[2]}), "0.1 nan 3"},
      {"f32", ir::DType::kF32, array_of<float>(ir::DType::kF32, {0.5f, -2.0f, 1e-3f}), "0.5 -2 0.001"},
      {"f64", ir::DType::kF64, array_of<double>(ir::DType::kF64, {0.25, 1e300, -7.0}), "0.25 1e+300 -7"},
  };
}

std::string identity_program() {
  std::string text;
  for (const TypeCase& c : cases()) {
    const std::string type(ir::dtype_name(c.dtype));
    text += "input x" + std::string(c.name) + " : " + type + "[3]\n";
    text += "output y" + std::string(c.name) + " : " + type + "[3]\n";
  }
  for (const TypeCase& c : cases()) text += "y" + std::string(c.name) + "[i] = x" + c.name + "[i]\n";
  return text;
}

class CliElementTypesTest : public CliTest {
 protected:
  std::string program() {
    const std::string path = dir_.file("types.kiln");
    EXPECT_TRUE(write_bytes(path, identity_program()).ok());
    return path;
  }
  // --input of every x from its case's values (as `files` says: a case's name to another array).
  std::vector<std::string> inputs(const std::map<std::string, NpyArray>& files = {}) {
    std::vector<std::string> args;
    for (const TypeCase& c : cases()) {
      const std::string file = dir_.file(std::string("x") + c.name + ".npy");
      auto other = files.find(c.name);
      EXPECT_TRUE(write_bytes(file, format_npy(other == files.end() ? c.values : other->second)).ok());
      args.push_back("--input");
      args.push_back(std::string("x") + c.name + "=" + file);
    }
    return args;
  }
};

TEST_F(CliElementTypesTest, EveryTypeGoesInAndOutAndPrints) {
  std::vector<std::string> args = {"run", program(), "--device", "interp", "--print"};
  for (const std::string& a : inputs()) args.push_back(a);
  for (const TypeCase& c : cases()) {
    args.push_back("--output");
    args.push_back(std::string("y") + c.name + "=" + dir_.file(std::string("y") + c.name + ".npy"));
  }
  ProcessResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  for (const TypeCase& c : cases()) {
    const std::string y = std::string("y") + c.name;
    const std::string listing = y + " : " + std::string(ir::dtype_name(c.dtype)) + " [3]\n  " + c.printed + "\n";
    EXPECT_NE(r.output.find(listing), std::string::npos) << listing << "in\n" << r.output;
    Result<NpyArray> out = read_npy(dir_.file(y + ".npy"));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->dtype, c.dtype) << y;
    EXPECT_EQ(out->data, c.values.data) << y << ": the values come back bit for bit";
  }
  // bf16 is written as NumPy writes an ml_dtypes.bfloat16 array.
  Result<std::string> text = read_file(dir_.file("ybf.npy"));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("'descr': '<V2'"), std::string::npos);
}

// NumPy without ml_dtypes saves bf16 values as their u16 bit patterns: a bf16 input takes them.
TEST_F(CliElementTypesTest, Bf16TakesU16BitPatterns) {
  NpyArray bits = cases()[10].values;
  ASSERT_EQ(bits.dtype, ir::DType::kBF16);
  bits.dtype = ir::DType::kU16;
  std::vector<std::string> args = {"run", program(), "--device", "interp", "--output", "ybf=" + dir_.file("ybf.npy")};
  for (const std::string& a : inputs({{"bf", bits}})) args.push_back(a);
  ProcessResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  Result<NpyArray> out = read_npy(dir_.file("ybf.npy"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype, ir::DType::kBF16);
  EXPECT_EQ(out->data, bits.data);
}

// A file of another type than the declared one is refused, naming the file, the tensor and both
// types: f64 into f32 (no silent narrowing), u8 into i8, i32 into i64, f16 bits into bf16.
TEST_F(CliElementTypesTest, AFileOfAnotherTypeIsRefused) {
  struct Wrong {
    const char* name;
    NpyArray file;
    const char* says;
  };
  const Wrong wrongs[] = {
      {"f32", array_of<double>(ir::DType::kF64, {1, 2, 3}), "holds f64 [3], but input 'xf32' is f32 [3]"},
      {"i8", array_of<uint8_t>(ir::DType::kU8, {1, 2, 3}), "holds u8 [3], but input 'xi8' is i8 [3]"},
      {"i64", array_of<int32_t>(ir::DType::kI32, {1, 2, 3}), "holds i32 [3], but input 'xi64' is i64 [3]"},
      {"bf", array_of<uint16_t>(ir::DType::kF16, {1, 2, 3}), "holds f16 [3], but input 'xbf' is bf16 [3]"},
      {"b", array_of<uint8_t>(ir::DType::kU8, {0, 1, 1}), "holds u8 [3], but input 'xb' is bool [3]"},
  };
  for (const Wrong& w : wrongs) {
    std::vector<std::string> args = {"run", program(), "--device", "interp"};
    for (const std::string& a : inputs({{w.name, w.file}})) args.push_back(a);
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    EXPECT_NE(r.output.find(std::string("x") + w.name + ".npy " + w.says), std::string::npos) << r.output;
  }
}

TEST_F(CliElementTypesTest, ABoolArrayHoldsOnlyZerosAndOnes) {
  std::vector<std::string> args = {"run", program(), "--device", "interp"};
  for (const std::string& a : inputs({{"b", array_of<uint8_t>(ir::DType::kBool, {0, 1, 2})}})) args.push_back(a);
  ProcessResult r = run(args);
  EXPECT_NE(r.exit_code, 0) << describe_run(args, r);
  EXPECT_NE(r.output.find("xb.npy: element 2 of the bool array is 2; a bool is 0 (false) or 1 (true)"), std::string::npos)
      << r.output;
}

// Without --input, the seed gives each type values of its own: floats in [-1, 1), signed integers
// in [-8, 8], unsigned ones in [0, 16], bools false or true.
TEST_F(CliElementTypesTest, TheSeedGivesEveryTypeValues) {
  std::vector<std::string> args = {"run", program(), "--device", "interp", "--print"};
  ProcessResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  for (const TypeCase& c : cases()) {
    const std::string head = std::string("y") + c.name + " : " + std::string(ir::dtype_name(c.dtype)) + " [3]\n";
    const size_t at = r.output.find(head);
    ASSERT_NE(at, std::string::npos) << head << r.output;
    std::istringstream line(r.output.substr(at + head.size(), r.output.find('\n', at + head.size()) - at - head.size()));
    std::string word;
    int count = 0;
    for (; line >> word; ++count) {
      if (c.dtype == ir::DType::kBool) {
        EXPECT_TRUE(word == "true" || word == "false") << word;
        continue;
      }
      const double v = std::stod(word);
      if (ir::is_float_type(c.dtype)) {
        EXPECT_TRUE(v >= -1 && v < 1) << c.name << " " << word;
      } else {
        EXPECT_EQ(v, std::trunc(v)) << word;
        EXPECT_GE(v, ir::is_unsigned_type(c.dtype) ? 0 : -8) << c.name << " " << word;
        EXPECT_LE(v, ir::is_unsigned_type(c.dtype) ? 16 : 8) << c.name << " " << word;
      }
    }
    EXPECT_EQ(count, 3) << c.name;
  }
}

// A value trace keeps every digit of i64 and u64 values (a double would round 2^64 - 1 and
// 2^53 + 3), and `kiln trace-values` prints them so.
TEST_F(CliElementTypesTest, ValueTracesKeepEveryDigitOfWideIntegers) {
  const std::string trace = dir_.file("trace.jsonl");
  std::vector<std::string> args = {"run", program(), "--device", "interp", "--trace-values", trace};
  for (const std::string& a : inputs()) args.push_back(a);
  ProcessResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  Result<std::string> text = read_file(trace);
  ASSERT_TRUE(text.ok()) << text.status();
  for (const char* value : {"\"value\": 18446744073709551615", "\"value\": 9007199254740993",
                            "\"value\": -9223372036854775808", "\"value\": 9223372036854775807"}) {
    EXPECT_NE(text->find(value), std::string::npos) << value << " in\n" << *text;
  }
  ProcessResult shown = run({"trace-values", trace});
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("xu64[i]=18446744073709551615  -> 18446744073709551615"), std::string::npos)
      << shown.output;
}

}  // namespace
}  // namespace kiln::tools
