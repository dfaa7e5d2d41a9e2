#include "tools/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

namespace kiln::tools {
namespace {

NpyArray make(ir::DType dtype, std::vector<int64_t> shape, size_t elements) {
  NpyArray a{dtype, std::move(shape), std::string(elements * ir::dtype_size(dtype), '\0')};
  for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<char>(i * 7);
  return a;
}

TEST(NpyTest, RoundTripsEveryDtypeAndRank) {
  for (ir::DType dtype : ir::kAllDTypes) {
    for (auto shape : std::vector<std::vector<int64_t>>{{}, {5}, {3, 4}, {2, 1, 3}, {0, 2}}) {
      size_t n = 1;
      for (int64_t d : shape) n *= static_cast<size_t>(d);
      NpyArray a = make(dtype, shape, n);
      std::string bytes = format_npy(a);
      EXPECT_EQ((10 + static_cast<unsigned char>(bytes[8])) % 64, 0u) << "data is 64-byte aligned";
      Result<NpyArray> b = parse_npy(bytes, "t.npy");
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(b->dtype, dtype);
      EXPECT_EQ(b->shape, shape);
      EXPECT_EQ(b->data, a.data);
    }
  }
}

// A header as numpy 1.x writes it.
std::string numpy_file(const std::string& dict, size_t data_bytes, int version = 1) {
  std::string header = dict;
  size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  size_t len = header.size();
  for (size_t i = 0; i < (version == 1 ? 2u : 4u); ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\x01');
}

TEST(NpyTest, ReadsNumpyHeadersOfVersions1And2) {
  auto a = parse_npy(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24), "a.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  auto b = parse_npy(numpy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (7,), }", 28, 2), "b.npy");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->shape, (std::vector<int64_t>{7}));
  auto c = parse_npy(numpy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 8), "c.npy");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->shape.empty());
}

// The descr NumPy writes for each dtype (np.dtype(T).str; ml_dtypes.bfloat16 arrays are saved as
// '<V2'), and what else means the same type: '=' (native: little-endian here), and for one-byte
// types any byte order.
TEST(NpyTest, ReadsTheDescrOfEveryType) {
  const std::pair<const char*, ir::DType> table[] = {
      {"|b1", ir::DType::kBool}, {"|i1", ir::DType::kI8},   {"|u1", ir::DType::kU8},   {"<i2", ir::DType::kI16},
      {"<u2", ir::DType::kU16},  {"<i4", ir::DType::kI32},  {"<u4", ir::DType::kU32},  {"<i8", ir::DType::kI64},
      {"<u8", ir::DType::kU64},  {"<f2", ir::DType::kF16},  {"<V2", ir::DType::kBF16}, {"<f4", ir::DType::kF32},
      {"<f8", ir::DType::kF64},  {"|V2", ir::DType::kBF16}, {"=i8", ir::DType::kI64},  {"<b1", ir::DType::kBool},
      {">u1", ir::DType::kU8},   {"=f2", ir::DType::kF16},
  };
  for (const auto& [descr, dtype] : table) {
    const std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (3,), }";
    Result<NpyArray> a = parse_npy(numpy_file(dict, 3 * ir::dtype_size(dtype)), "a.npy");
    ASSERT_TRUE(a.ok()) << descr << ": " << a.status();
    EXPECT_EQ(a->dtype, dtype) << descr;
  }
  // What kiln writes is what NumPy writes.
  const std::pair<ir::DType, const char*> written[] = {
      {ir::DType::kBool, "'|b1'"}, {ir::DType::kU8, "'|u1'"},  {ir::DType::kI8, "'|i1'"},
      {ir::DType::kU64, "'<u8'"},  {ir::DType::kF16, "'<f2'"}, {ir::DType::kBF16, "'<V2'"},
  };
  for (const auto& [dtype, descr] : written) {
    EXPECT_NE(npy_header(dtype, {2}).find(std::string("'descr': ") + descr), std::string::npos) << descr;
  }
}

// A file holds a tensor's values only in the tensor's own type; a bf16 tensor also takes u16 bit
// patterns (NumPy without ml_dtypes: np.save("w.npy", bits.view(np.uint16))).
TEST(NpyTest, OnlyTheDeclaredTypeOrBf16Bits) {
  for (ir::DType file : ir::kAllDTypes) {
    for (ir::DType declared : ir::kAllDTypes) {
      EXPECT_EQ(npy_holds(file, declared), file == declared || (file == ir::DType::kU16 && declared == ir::DType::kBF16))
          << ir::dtype_name(file) << " into " << ir::dtype_name(declared);
    }
  }
}

TEST(NpyTest, BoolArraysHoldZerosAndOnes) {
  const std::byte good[] = {std::byte{0}, std::byte{1}, std::byte{1}};
  EXPECT_TRUE(check_npy_bools(good, "m.npy").ok());
  const std::byte bad[] = {std::byte{0}, std::byte{1}, std::byte{2}};
  Status s = check_npy_bools(bad, "m.npy");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("m.npy: element 2 of the bool array is 2"), std::string::npos) << s;
}

void expect_refused(const std::string& bytes, const std::string& fragment) {
  Result<NpyArray> r = parse_npy(bytes, "bad.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("bad.npy"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status();
}

TEST(NpyTest, RefusesWhatKilnCannotRead) {
  expect_refused("hello", "not a .npy file");
  expect_refused(numpy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8), "'>f4' (big-endian)");
  expect_refused(numpy_file("{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", 4), "save the array as '<i2'");
  expect_refused(numpy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16), "'<c8'; kiln reads '|b1'");
  expect_refused(numpy_file("{'descr': '<V4', 'fortran_order': False, 'shape': (2,), }", 8), "'<V4'");
  expect_refused(numpy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", 6), "f16 [2]");
  expect_refused(numpy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16), "Fortran");
  expect_refused(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20), "f32 [2, 3]");
  expect_refused(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28), "instead of 24");
  expect_refused(numpy_file("{'descr': '<f4', 'shape': (2,), }", 8), "lacks");
  expect_refused(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8), "shape");
  expect_refused(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }", 8), "");
  std::string truncated = numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
  expect_refused(truncated.substr(0, 20), "truncated");
}

// What NumPy's own reader refuses, kiln refuses too: a format version other than 1.0, 2.0 and
// 3.0, dict entries without commas between them, text after the dict, bytes outside ASCII.
TEST(NpyTest, RefusesWhatNumpyRefuses) {
  std::string minor = numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
  minor[7] = 40;  // format version 1.40
  expect_refused(minor, "version 1.40");
  expect_refused(numpy_file("{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }", 8), "expected ','");
  expect_refused(numpy_file("{'descr': '<f4', 'fortran_order': False 'shape': (2,)}", 8), "expected ','");
  expect_refused(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", 8), "after the dict");
  expect_refused(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\x01", 8), "byte 1");
  expect_refused(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), \xc3\xa9}", 8), "byte 195");
  // What NumPy reads, kiln still reads: no trailing comma, double quotes, old "L" suffixes.
  EXPECT_TRUE(parse_npy(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8), "a.npy").ok());
  EXPECT_TRUE(parse_npy(numpy_file("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2L,)}", 8), "b.npy").ok());
}

TEST(NpyTest, MalformedBytesNeverCrash) {
  std::string good = format_npy(make(ir::DType::kF32, {3, 4}, 12));
  uint64_t state = 12345;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string bytes = good;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    size_t flips = 1 + (state >> 60);
    for (size_t f = 0; f < flips; ++f) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      bytes[(state >> 33) % bytes.size()] = static_cast<char>(state >> 13);
    }
    if (trial % 7 == 0) bytes.resize((state >> 40) % bytes.size());
    Result<NpyArray> r = parse_npy(bytes, "fuzz.npy");
    if (r.ok()) {
      size_t n = 1;
      for (int64_t d : r->shape) n *= static_cast<size_t>(d);
      EXPECT_EQ(r->data.size(), n * ir::dtype_size(r->dtype));
    }
  }
}

}  // namespace
}  // namespace kiln::tools
