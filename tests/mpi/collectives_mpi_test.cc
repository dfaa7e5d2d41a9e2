// Collectives across processes: run by ctest under `mpirun -np 2` and `-np 4` (tests/CMakeLists.txt),
// every rank runs the same program on interp, cpu and opencl with inputs of its own, and checks
// what it receives against the combination of every rank's inputs, computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/ral/world.h"
#include "kiln/runtime/program_instance.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

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
  std::vector<std::string> devices = {"interp", "cpu"};
  auto opencl = drivers::builtin_registry().find("opencl");
  if (opencl.ok() && (*opencl)->availability().ok()) devices.push_back("opencl");
  for (const std::string& device : devices) {
    SCOPED_TRACE(device + ", rank " + std::to_string(me) + " of " + std::to_string(R));
    TempDir cache;
    Result<hal::DeviceRef> dev = open_device(device, cache.path());
    ASSERT_TRUE(dev.ok()) << dev.status();
    auto instance = runtime::ProgramInstance::create(*dev, *program);
    ASSERT_TRUE(instance.ok()) << instance.status();
    HostTensor x = empty_tensor(*program->find_node("x")), k = empty_tensor(*program->find_node("k"));
    for (int i = 0; i < count; ++i) x.set(i, x_of(me, i));
    for (int i = 0; i < 3; ++i) k.set(i, 10 * me + i);
    ASSERT_TRUE(write_tensor(**instance, "x", x).ok());
    ASSERT_TRUE(write_tensor(**instance, "k", k).ok());
    Status ran = (*instance)->run("main");
    ASSERT_TRUE(ran.ok()) << ran;
    auto read = [&](const char* name) { return read_tensor(**instance, *program->find_node(name))->values(); };
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

}  // namespace
}  // namespace kiln::e2e
