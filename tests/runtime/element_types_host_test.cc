// The runtime's host side of every element type (docs/runtime.md, "Element types on the host"):
// initial values of each type in the host copies, read_as / write_from with each C++ element type,
// bool data that is not 0 or 1 refused, and summaries of a call's tensors of each type. The
// device side of the types is tests/runtime/element_types_test.cc's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kiln/base/random.h"
#include "kiln/loop/op_eval.h"
#include "kiln/ral/element_types.h"
#include "runtime/e2e_util.h"
#include "runtime/runtime_test_util.h"
#include "runtime/value_trace_steps.h"

namespace kiln::runtime_test {
namespace {

using runtime::HostTensor;
using runtime::NodeTable;

template <typename T>
std::vector<T> host_values(NodeTable& nodes, const std::string& name) {
  Result<HostTensor> t = nodes.tensor(name);
  EXPECT_TRUE(t.ok()) << t.status();
  Result<std::vector<T>> v = t->read_as<T>();
  EXPECT_TRUE(v.ok()) << name << ": " << v.status();
  return v.ok() ? *v : std::vector<T>();
}

TEST(ElementTypesHostTest, InitialValuesOfEveryType) {
  Result<ir::Program> program = lang::parse_program(
      "param h : f16[3] = 0.1\nparam g : bf16[2] = -3.3\nparam u : u8[2] = 255\nparam b : bool[2] = true\n"
      "param k : i64[2] = -9007199254740992\nparam w : u64[1] = 4294967296\nparam s : i16[1] = -32768\n"
      "param r : f16[5] = uniform(-1, 1)\nparam n : bf16[4] = normal(2, 3)\nparam z : u32[2]\n"
      "output y : f32\ny = f32(h[0])\n",
      "init.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes, NodeTable::create(*program, 17));
  auto bits = [](uint16_t b, int n) { return std::vector<ral::Half>(static_cast<size_t>(n), ral::Half{b}); };
  EXPECT_EQ(host_values<ral::Half>(*nodes, "h"), bits(ir::f16_bits(0.1), 3));
  EXPECT_EQ(host_values<ral::BFloat16>(*nodes, "g"), std::vector<ral::BFloat16>(2, ral::BFloat16{ir::bf16_bits(-3.3)}));
  EXPECT_EQ(host_values<uint8_t>(*nodes, "u"), (std::vector<uint8_t>{255, 255}));
  EXPECT_EQ(host_values<uint8_t>(*nodes, "b"), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(host_values<int64_t>(*nodes, "k"), (std::vector<int64_t>{-9007199254740992, -9007199254740992}));
  EXPECT_EQ(host_values<uint64_t>(*nodes, "w"), (std::vector<uint64_t>{4294967296u}));
  EXPECT_EQ(host_values<int16_t>(*nodes, "s"), (std::vector<int16_t>{-32768}));
  EXPECT_EQ(host_values<uint32_t>(*nodes, "z"), (std::vector<uint32_t>{0, 0}));
  // Random initializers: the draws of the node's stream (f64), each rounded to the type.
  Random uniform = Random::for_name(17, "r"), normal = Random::for_name(17, "n");
  std::vector<ral::Half> r;
  for (int i = 0; i < 5; ++i) r.push_back(ral::Half{ir::f16_bits(uniform.uniform(-1, 1))});
  EXPECT_EQ(host_values<ral::Half>(*nodes, "r"), r);
  std::vector<ral::BFloat16> n;
  for (int i = 0; i < 4; ++i) n.push_back(ral::BFloat16{ir::bf16_bits(normal.normal(2, 3))});
  EXPECT_EQ(host_values<ral::BFloat16>(*nodes, "n"), n);
}

TEST(ElementTypesHostTest, ReadAsAndWriteFromTakeTheTensorsOwnType) {
  Result<ir::Program> program = lang::parse_program(
      "input a : i8[2]\ninput b : bool[3]\ninput c : u64[1]\ninput d : bf16[2]\noutput y : f32\ny = f32(a[0])\n",
      "types.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes, NodeTable::create(*program));
  KILN_ASSERT_OK_AND_ASSIGN(HostTensor a, nodes->tensor("a"));
  KILN_ASSERT_OK_AND_ASSIGN(HostTensor b, nodes->tensor("b"));
  KILN_ASSERT_OK_AND_ASSIGN(HostTensor c, nodes->tensor("c"));
  KILN_ASSERT_OK_AND_ASSIGN(HostTensor d, nodes->tensor("d"));
  KILN_ASSERT_OK(a.write_from(std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(*a.read_as<int8_t>(), (std::vector<int8_t>{-128, 127}));
  KILN_ASSERT_OK(b.write_from(std::vector<uint8_t>{1, 0, 1}));  // bool as bytes
  EXPECT_EQ(*b.read_as<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
  KILN_ASSERT_OK(c.write_from(std::vector<uint64_t>{UINT64_MAX}));
  EXPECT_EQ(*c.read_as<uint64_t>(), (std::vector<uint64_t>{UINT64_MAX}));
  KILN_ASSERT_OK(d.write_from(std::vector<ral::BFloat16>{{0x3f80}, {0xc000}}));
  EXPECT_EQ(*d.read_as<ral::BFloat16>(), (std::vector<ral::BFloat16>{{0x3f80}, {0xc000}}));
  // Another type of the same size is refused, naming the tensor and both types.
  Status wrong = a.write_from(std::vector<uint8_t>{1, 2});
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("tensor 'a' holds i8 elements, not u8"), std::string::npos) << wrong;
  Result<std::vector<ral::Half>> half = d.read_as<ral::Half>();
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("tensor 'd' holds bf16 elements, not f16"), std::string::npos) << half.status();
  Result<std::vector<uint16_t>> u16 = d.read_as<uint16_t>();
  EXPECT_FALSE(u16.ok());
  // A bool is a byte of 0 or 1; the tensor keeps what it held.
  Status bad = b.write_from(std::vector<uint8_t>{0, 2, 1});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("tensor 'b' is bool, but element 1 of the data is 2"), std::string::npos) << bad;
  EXPECT_EQ(*b.read_as<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
}

// A call's tensor summaries (value traces) read every type: u64 unsigned, f16 and bf16 by value.
TEST(ElementTypesHostTest, SummariesOfEveryType) {
  struct Case {
    ir::DType type;
    std::vector<uint8_t> bytes;  // three elements
    double min, max, mean;
    int64_t nans, infs;
  };
  auto bytes_of = [](const auto& values) {
    std::vector<uint8_t> out(sizeof values);
    std::memcpy(out.data(), &values, sizeof values);
    return out;
  };
  const uint64_t u64[] = {UINT64_MAX, 0, 4};
  const uint16_t f16[] = {ir::f16_bits(-2), 0x7e00, ir::f16_bits(0.5)};
  const uint16_t bf16[] = {ir::bf16_bits(3), 0xff80, ir::bf16_bits(1)};
  const int8_t i8[] = {-128, 0, 2};
  const uint8_t b[] = {1, 0, 1};
  const Case cases[] = {
      {ir::DType::kU64, bytes_of(u64), 0, 18446744073709551615.0, (18446744073709551615.0 + 4) / 3, 0, 0},
      {ir::DType::kF16, bytes_of(f16), -2, 0.5, -0.75, 1, 0},
      {ir::DType::kBF16, bytes_of(bf16), 1, 3, 2, 0, 1},
      {ir::DType::kI8, bytes_of(i8), -128, 2, -42, 0, 0},
      {ir::DType::kBool, bytes_of(b), 0, 1, 2.0 / 3, 0, 0},
  };
  e2e::TempDir cache;
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, e2e::open_device("interp", cache.path()));
  for (const Case& c : cases) {
    ir::TensorNode node;
    node.name = "t";
    node.dtype = c.type;
    node.dims = {3};
    KILN_ASSERT_OK_AND_ASSIGN(hal::BufferRef buffer, device->allocator().allocate({}, c.bytes.size()));
    {
      KILN_ASSERT_OK_AND_ASSIGN(hal::Mapping mapping, buffer->map(hal::MapAccess::kWrite));
      std::memcpy(mapping.data(), c.bytes.data(), c.bytes.size());
    }
    KILN_ASSERT_OK_AND_ASSIGN(runtime::ValueTrace::TensorSummary s, runtime::summarize_tensor(node, *buffer));
    const std::string name(ir::dtype_name(c.type));
    EXPECT_EQ(s.dtype, c.type);
    EXPECT_EQ(s.min, c.min) << name;
    EXPECT_EQ(s.max, c.max) << name;
    EXPECT_DOUBLE_EQ(s.mean, c.mean) << name;
    EXPECT_EQ(s.nans, c.nans) << name;
    EXPECT_EQ(s.infs, c.infs) << name;
  }
}

}  // namespace
}  // namespace kiln::runtime_test
