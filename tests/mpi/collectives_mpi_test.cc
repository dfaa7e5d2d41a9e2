// Collectives across processes: run by ctest under `mpirun -np 2` and `-np 4` (tests/CMakeLists.txt),
// every rank runs the same program on interp, cpu and opencl with inputs of its own, and checks
// what it receives against the combination of every rank's inputs, computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/op_eval.h"
#include "kiln/ral/world.h"
#include "kiln/runtime/program_instance.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

// interp, cpu, and opencl where a platform is installed.
std::vector<std::string> devices_here() {
  std::vector<std::string> devices = {"interp", "cpu"};
  auto opencl = drivers::builtin_registry().find("opencl");
  if (opencl.ok() && (*opencl)->availability().ok()) devices.push_back("opencl");
  return devices;
}

// `program` compiled for `device`, its kernels cached in `cache`.
std::unique_ptr<runtime::ProgramInstance> compiled(const std::string& device, const ir::Program& program,
                                                   const TempDir& cache) {
  Result<hal::DeviceRef> dev = open_device(device, cache.path());
  EXPECT_TRUE(dev.ok()) << dev.status();
  if (!dev.ok()) return nullptr;
  auto instance = runtime::ProgramInstance::create(*dev, program);
  EXPECT_TRUE(instance.ok()) << instance.status();
  return instance.ok() ? std::move(*instance) : nullptr;
}

// Rank r's x: element i is (r + 1) * (i - 2), exact in f32.
double x_of(int r, int i) { return (r + 1) * (i - 2.0); }

std::string program_text(int ranks) {
  const std::string R = std::to_string(ranks);
  return "input x : f32[" + R + ", 2]\n"
         "input k : i32[3]\n"
         "output sum : f32[" + R + ", 2]\noutput mean : f32[" + R + ", 2]\noutput top : f32[" + R + ", 2]\n"
         "output low : f32[" + R + ", 2]\noutput all : f32[" + std::to_string(ranks * ranks) + ", 2]\n"
         "output part : f32[1, 2]\noutput again : f32[" + R + ", 2]\noutput keys : i32[3]\noutput r : i32\noutput n : i32\n"
         "call allreduce(x) -> sum\ncall allreduce(sum) -> again\ncall allreduce(x, op=1) -> mean\ncall allreduce(x, op=2) -> top\n"
         "call allreduce(x, op=3) -> low\ncall allgather(x) -> all\ncall reduce_scatter(x) -> part\n"
         "call broadcast(k, root=" + std::to_string(ranks - 1) + ") -> keys\ncall rank() -> r\ncall world_size() -> n\n";
}

TEST(MpiCollectivesTest, EveryRankGetsTheCombination) {
  Result<ral::World*> world = ral::world();
  ASSERT_TRUE(world.ok()) << world.status();
  const int R = (*world)->size(), me = (*world)->rank();
  ASSERT_GT(R, 1) << "run under mpirun -np 2 or more: " << (*world)->describe();
  Result<ir::Program> program = lang::parse_program(program_text(R), "mpi.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  const int count = R * 2;
  std::vector<double> sum(count), mean(count), top(count), low(count), all;
  for (int i = 0; i < count; ++i) {
    std::vector<double> v;
    for (int r = 0; r < R; ++r) v.push_back(x_of(r, i));
    for (double e : v) sum[i] += e;
    mean[i] = static_cast<float>(sum[i] / R);
    top[i] = *std::max_element(v.begin(), v.end());
    low[i] = *std::min_element(v.begin(), v.end());
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < count; ++i) all.push_back(x_of(r, i));
  }
  for (const std::string& device : devices_here()) {
    SCOPED_TRACE(device + ", rank " + std::to_string(me) + " of " + std::to_string(R));
    TempDir cache;
    std::unique_ptr<runtime::ProgramInstance> instance = compiled(device, *program, cache);
    ASSERT_NE(instance, nullptr);
    HostTensor x = empty_tensor(*program->find_node("x")), k = empty_tensor(*program->find_node("k"));
    for (int i = 0; i < count; ++i) x.set(i, x_of(me, i));
    for (int i = 0; i < 3; ++i) k.set(i, 10 * me + i);
    ASSERT_TRUE(write_tensor(*instance, "x", x).ok());
    ASSERT_TRUE(write_tensor(*instance, "k", k).ok());
    Status ran = instance->run("main");
    ASSERT_TRUE(ran.ok()) << ran;
    auto read = [&](const char* name) { return read_tensor(*instance, *program->find_node(name))->values(); };
    EXPECT_EQ(read("sum"), sum);
    // Read what the collective before it wrote: started after it, not with it.
    std::vector<double> again;
    for (double v : sum) again.push_back(v * R);
    EXPECT_EQ(read("again"), again);
    EXPECT_EQ(read("mean"), mean);
    EXPECT_EQ(read("top"), top);
    EXPECT_EQ(read("low"), low);
    EXPECT_EQ(read("all"), all);
    EXPECT_EQ(read("part"), (std::vector<double>{sum[2 * me], sum[2 * me + 1]}));
    EXPECT_EQ(read("keys"), (std::vector<double>{10.0 * (R - 1), 10.0 * (R - 1) + 1, 10.0 * (R - 1) + 2}));
    EXPECT_EQ(read("r"), (std::vector<double>{static_cast<double>(me)}));
    EXPECT_EQ(read("n"), (std::vector<double>{static_cast<double>(R)}));
  }
}

// Small allreduces started together are sent as one per element type and op (World::start_all):
// a, b and d (f32 sums) go as one, the large c alone between them ends that run, the means m and
// q as one (divided once they are combined), the i32 sums e and f as one; every output must hold
// its own combination, on every device.
TEST(MpiCollectivesTest, SmallAllreducesStartedTogetherAreSentAsOne) {
  Result<ral::World*> world = ral::world();
  ASSERT_TRUE(world.ok()) << world.status();
  const int R = (*world)->size(), me = (*world)->rank();
  ASSERT_GT(R, 1) << "run under mpirun -np 2 or more: " << (*world)->describe();
  // c is past World::kFusedPartBytes.
  const int64_t large = ral::World::kFusedPartBytes / 4 + 5;
  struct Input {
    const char* name;
    const char* type;
    int64_t count;
    int op;
  };
  const std::vector<Input> inputs = {{"a", "f32", 3, 0}, {"b", "f32", 8, 0}, {"c", "f32", large, 0},
                                     {"d", "f32", 5, 0}, {"m", "f32", 2, 1}, {"q", "f32", 4, 1},
                                     {"e", "i32", 4, 0}, {"f", "i32", 1, 0}};
  std::string text;
  for (const Input& in : inputs) {
    const std::string shape = std::string(in.type) + "[" + std::to_string(in.count) + "]";
    text += "input " + std::string(in.name) + " : " + shape + "\noutput " + in.name + "_all : " + shape + "\n";
  }
  for (const Input& in : inputs) {
    text += "call allreduce(" + std::string(in.name) + (in.op ? ", op=" + std::to_string(in.op) : "") + ") -> " +
            in.name + "_all\n";
  }
  Result<ir::Program> program = lang::parse_program(text, "fused.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  // Rank r's element i of input k: exact in f32 and i32.
  auto value = [](int r, size_t k, int64_t i) { return (r + 1.0) * static_cast<double>(i % 97 - 3) + 10.0 * k; };
  for (const std::string& device : devices_here()) {
    SCOPED_TRACE(device + ", rank " + std::to_string(me) + " of " + std::to_string(R));
    TempDir cache;
    std::unique_ptr<runtime::ProgramInstance> instance = compiled(device, *program, cache);
    ASSERT_NE(instance, nullptr);
    for (size_t k = 0; k < inputs.size(); ++k) {
      HostTensor t = empty_tensor(*program->find_node(inputs[k].name));
      for (int64_t i = 0; i < inputs[k].count; ++i) t.set(i, value(me, k, i));
      ASSERT_TRUE(write_tensor(*instance, inputs[k].name, t).ok());
    }
    // Twice: the second run's calls were agreed on in the first (mpi_collectives.h).
    for (int run = 0; run < 2; ++run) {
      Status ran = instance->run("main");
      ASSERT_TRUE(ran.ok()) << ran;
      for (size_t k = 0; k < inputs.size(); ++k) {
        std::vector<double> expected;
        for (int64_t i = 0; i < inputs[k].count; ++i) {
          double sum = 0;
          for (int r = 0; r < R; ++r) sum += value(r, k, i);
          expected.push_back(inputs[k].op == 1 ? static_cast<float>(sum / R) : sum);
        }
        const std::string out = std::string(inputs[k].name) + "_all";
        EXPECT_EQ(read_tensor(*instance, *program->find_node(out))->values(), expected) << out;
      }
    }
  }
}

// A first dimension that fits R × the other's only for another R is refused when the routine is
// linked, naming R; every rank refuses it alike, so no rank is left waiting.
TEST(MpiCollectivesTest, ShapesForAnotherNumberOfRanksAreRefusedWhenLinked) {
  Result<ral::World*> world = ral::world();
  ASSERT_TRUE(world.ok()) << world.status();
  const int R = (*world)->size();
  const std::string wrong = std::to_string(2 * (R + 1));
  Result<ir::Program> program = lang::parse_program(
      "input x : f32[2]\noutput y : f32[" + wrong + "]\ncall allgather(x) -> y\n", "gather.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  TempDir cache;
  Result<hal::DeviceRef> dev = open_device("cpu", cache.path());
  ASSERT_TRUE(dev.ok()) << dev.status();
  auto instance = runtime::ProgramInstance::create(*dev, *program);
  ASSERT_FALSE(instance.ok());
  EXPECT_NE(instance.status().message().find("allgather: 'y' is f32[" + wrong +
                                             "] and 'x' f32[2]; y's first dimension must be R × x's, and this job has R = " +
                                             std::to_string(R) + " ranks"),
            std::string::npos)
      << instance.status();
}

// Every element type across the ranks (docs/distributed.md, "Element types"): integers combine in
// their own type and wrap (u8), a mean of integers goes through f64, bool sums and maxima are a
// logical or and minima an and, f16 and bf16 combine in f32 and are rounded back, u64 compares
// unsigned; allgather, reduce_scatter and broadcast move every type. On interp: what crosses
// between the ranks is the RAL's, the same for every device.
TEST(MpiCollectivesTest, EveryElementTypeCombines) {
  Result<ral::World*> world = ral::world();
  ASSERT_TRUE(world.ok()) << world.status();
  const int R = (*world)->size(), me = (*world)->rank();
  ASSERT_GT(R, 1) << "run under mpirun -np 2 or more: " << (*world)->describe();
  const std::string r3 = std::to_string(3 * R), rn = std::to_string(R);
  Result<ir::Program> program = lang::parse_program(
      "input a : u8[3]\ninput b : i64[3]\ninput c : bool[3]\ninput h : f16[3]\ninput g : bf16[3]\n"
      "input w : u64[3]\ninput s : i8[" + rn + "]\ninput v : u16[3]\n"
      "output a_sum : u8[3]\noutput b_mean : i64[3]\noutput c_sum : bool[3]\noutput c_min : bool[3]\n"
      "output h_sum : f16[3]\noutput h_mean : f16[3]\noutput g_max : bf16[3]\noutput g_all : bf16[" + r3 + "]\n"
      "output w_max : u64[3]\noutput w_min : u64[3]\noutput s_part : i8[1]\noutput v_root : u16[3]\n"
      "call allreduce(a) -> a_sum\ncall allreduce(b, op=1) -> b_mean\ncall allreduce(c) -> c_sum\n"
      "call allreduce(c, op=3) -> c_min\ncall allreduce(h) -> h_sum\ncall allreduce(h, op=1) -> h_mean\n"
      "call allreduce(g, op=2) -> g_max\ncall allgather(g) -> g_all\ncall allreduce(w, op=2) -> w_max\n"
      "call allreduce(w, op=3) -> w_min\ncall reduce_scatter(s) -> s_part\n"
      "call broadcast(v, root=" + std::to_string(R - 1) + ") -> v_root\n",
      "types.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  // Each rank's inputs, as element values (f16 and bf16 as bits).
  auto a_of = [](int r) { return std::vector<double>{200.0 + r, double(r), 255}; };
  auto b_of = [](int r) { return std::vector<double>{double(r), -3.0 * r - 1, 9223372036854775807.0}; };
  auto c_of = [](int r) { return std::vector<double>{0, r == 0 ? 1.0 : 0.0, 1}; };
  auto h_of = [](int r) { return std::vector<uint16_t>{0x2e66, ir::f16_bits(1000.0 * (r + 1)), 0x7bff}; };
  auto g_of = [](int r) { return std::vector<uint16_t>{ir::bf16_bits(r), ir::bf16_bits(-r), ir::bf16_bits(1.5)}; };
  auto w_of = [](int r) { return std::vector<uint64_t>{UINT64_MAX - uint64_t(r), uint64_t(r), uint64_t{1} << 63}; };
  auto s_of = [&](int r) {
    std::vector<double> v;
    for (int i = 0; i < R; ++i) v.push_back(100 + r + i);
    return v;
  };
  auto v_of = [](int r) { return std::vector<double>{60000.0 + r, double(r), 7}; };
  auto tensor = [&](const char* name) { return empty_tensor(*program->find_node(name)); };
  auto with = [&](const char* name, const std::vector<double>& values) {
    HostTensor t = tensor(name);
    for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
    return t;
  };
  auto with_bits = [&](const char* name, const auto& values) {
    HostTensor t = tensor(name);
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
  };
  // What every rank must receive.
  std::vector<double> a_sum(3, 0), b_sum(3, 0), b_mean(3), c_sum(3, 0), c_min(3, 1);
  std::vector<float> h_sum(3, 0);
  std::vector<uint16_t> h_sum_bits(3), h_mean_bits(3), g_max(3), g_all;
  std::vector<uint64_t> w_max(3, 0), w_min(3, UINT64_MAX);
  double s_part = 0;
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < 3; ++i) {
      a_sum[i] = std::fmod(a_sum[i] + a_of(r)[i], 256);
      b_sum[i] += b_of(r)[i];
      c_sum[i] = std::max(c_sum[i], c_of(r)[i]);
      c_min[i] = std::min(c_min[i], c_of(r)[i]);
      h_sum[i] += static_cast<float>(ir::f16_value(h_of(r)[i]));
      w_max[i] = std::max(w_max[i], w_of(r)[i]);
      w_min[i] = std::min(w_min[i], w_of(r)[i]);
    }
    s_part += s_of(r)[me];
    for (uint16_t bits : g_of(r)) g_all.push_back(bits);
  }
  for (int i = 0; i < 3; ++i) {
    b_mean[i] = static_cast<double>(ir::saturate_int(ir::DType::kI64, b_sum[i] / R));
    h_sum_bits[i] = ir::f16_bits(h_sum[i]);
    h_mean_bits[i] = ir::f16_bits(h_sum[i] / static_cast<float>(R));
    g_max[i] = g_of(i == 1 ? 0 : R - 1)[i];
  }
  const double s_wrapped = static_cast<double>(static_cast<int8_t>(static_cast<uint8_t>(static_cast<int64_t>(s_part) & 0xff)));

  TempDir cache;
  Result<hal::DeviceRef> dev = open_device("interp", cache.path());
  ASSERT_TRUE(dev.ok()) << dev.status();
  auto instance = runtime::ProgramInstance::create(*dev, *program);
  ASSERT_TRUE(instance.ok()) << instance.status();
  ASSERT_TRUE(write_tensor(**instance, "a", with("a", a_of(me))).ok());
  ASSERT_TRUE(write_tensor(**instance, "b", with("b", b_of(me))).ok());
  ASSERT_TRUE(write_tensor(**instance, "c", with("c", c_of(me))).ok());
  ASSERT_TRUE(write_tensor(**instance, "h", with_bits("h", h_of(me))).ok());
  ASSERT_TRUE(write_tensor(**instance, "g", with_bits("g", g_of(me))).ok());
  ASSERT_TRUE(write_tensor(**instance, "w", with_bits("w", w_of(me))).ok());
  ASSERT_TRUE(write_tensor(**instance, "s", with("s", s_of(me))).ok());
  ASSERT_TRUE(write_tensor(**instance, "v", with("v", v_of(me))).ok());
  Status ran = (*instance)->run("main");
  ASSERT_TRUE(ran.ok()) << ran;
  auto read = [&](const char* name) { return *read_tensor(**instance, *program->find_node(name)); };
  auto bits_of = [&](const char* name) {
    const HostTensor t = read(name);
    std::vector<uint16_t> bits(t.bytes.size() / 2);
    std::memcpy(bits.data(), t.bytes.data(), t.bytes.size());
    return bits;
  };
  auto u64_of = [&](const char* name) {
    const HostTensor t = read(name);
    std::vector<uint64_t> v(t.bytes.size() / 8);
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
    return v;
  };
  SCOPED_TRACE("rank " + std::to_string(me) + " of " + std::to_string(R));
  EXPECT_EQ(read("a_sum").values(), a_sum);
  EXPECT_EQ(read("b_mean").values(), b_mean);
  EXPECT_EQ(read("c_sum").values(), c_sum);
  EXPECT_EQ(read("c_min").values(), c_min);
  EXPECT_EQ(bits_of("h_sum"), h_sum_bits);
  EXPECT_EQ(bits_of("h_mean"), h_mean_bits);
  EXPECT_EQ(bits_of("g_max"), g_max);
  EXPECT_EQ(bits_of("g_all"), g_all);
  EXPECT_EQ(u64_of("w_max"), w_max);
  EXPECT_EQ(u64_of("w_min"), w_min);
  EXPECT_EQ(read("s_part").values(), std::vector<double>{s_wrapped});
  EXPECT_EQ(read("v_root").values(), v_of(R - 1));
}

}  // namespace
}  // namespace kiln::e2e
