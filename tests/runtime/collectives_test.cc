// Collectives in a process started alone: a world of one rank, where every collective is a copy
// (docs/language.md, "Collectives"), on interp, cpu and opencl; their shapes checked when the
// program is read. The same calls across processes are tested under mpirun (tests/mpi).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/ral/world.h"
#include "kiln/runtime/program_instance.h"
#include "runtime/e2e_util.h"

namespace kiln::e2e {
namespace {

constexpr const char* kCollectivesProgram = R"(
input  x : f32[4, 3]
input  k : i32[2]
output sum : f32[4, 3]
output top : f32[4, 3]
output all : f32[4, 3]
output part : f32[4, 3]
output keys : i32[2]
output total : f64
output r : i32
output n : i32
tensor s : f64
s = sum(f64(x[i, j]))
call allreduce(x) -> sum
call allreduce(x, op=2) -> top
call allgather(x) -> all
call reduce_scatter(x, op=1) -> part
call broadcast(k, root=0) -> keys
call allreduce(s) -> total
call rank() -> r
call world_size() -> n
)";

TEST(CollectivesTest, AWorldOfOneCopies) {
  ral::World* world = *ral::world();
  ASSERT_EQ(world->size(), 1) << world->describe();
  ASSERT_EQ(world->rank(), 0);
  Result<ir::Program> program = lang::parse_program(kCollectivesProgram, "collectives.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<double> x;
  for (int i = 0; i < 12; ++i) x.push_back(i * 0.5 - 2);
  for (const std::string& device : present_devices()) {
    SCOPED_TRACE(device);
    TempDir cache;
    Result<hal::DeviceRef> dev = open_device(device, cache.path());
    ASSERT_TRUE(dev.ok()) << dev.status();
    auto instance = runtime::ProgramInstance::create(*dev, *program);
    ASSERT_TRUE(instance.ok()) << instance.status();
    HostTensor xt = empty_tensor(*program->find_node("x")), kt = empty_tensor(*program->find_node("k"));
    for (size_t i = 0; i < x.size(); ++i) xt.set(static_cast<int64_t>(i), x[i]);
    kt.set(0, 7);
    kt.set(1, -3);
    ASSERT_TRUE(write_tensor(**instance, "x", xt).ok());
    ASSERT_TRUE(write_tensor(**instance, "k", kt).ok());
    Status ran = (*instance)->run("main");
    ASSERT_TRUE(ran.ok()) << ran;
    auto read = [&](const char* name) { return read_tensor(**instance, *program->find_node(name))->values(); };
    for (const char* copy : {"sum", "top", "all", "part"}) EXPECT_EQ(read(copy), x) << copy;
    EXPECT_EQ(read("keys"), (std::vector<double>{7, -3}));
    EXPECT_EQ(read("total"), (std::vector<double>{9}));  // -2 + ... + 3.5
    EXPECT_EQ(read("r"), (std::vector<double>{0}));
    EXPECT_EQ(read("n"), (std::vector<double>{1}));
  }
}

TEST(CollectivesTest, ShapesTypesAndAttributesAreCheckedWhenRead) {
  const std::string head = "input x : f32[4, 3]\ninput c : f32[3, 3]\noutput y : f32[4, 3]\noutput z : f32[6, 3]\n"
                           "output w : i32[4, 3]\noutput v : f32[2]\noutput q : f32\n";
  auto error = [&](const std::string& call) {
    Result<ir::Program> p = lang::parse_program(head + call + "\n", "c.kiln");
    return p.ok() ? std::string("accepted") : p.status().message();
  };
  EXPECT_NE(error("call allreduce(x) -> w").find("c.kiln:8:"), std::string::npos);
  EXPECT_NE(error("call allreduce(x) -> w").find("allreduce: 'w' is i32[4, 3]; it must be f32[4, 3] like 'x'"),
            std::string::npos) << error("call allreduce(x) -> w");
  EXPECT_NE(error("call allreduce(x, op=4) -> y").find("op=4 is none of 0 (sum), 1 (mean), 2 (max), 3 (min)"),
            std::string::npos);
  EXPECT_NE(error("call allgather(x) -> z").find("allgather: 'z' is f32[6, 3] and 'x' f32[4, 3]; y's first "
                                                 "dimension must be R × x's"),
            std::string::npos) << error("call allgather(x) -> z");
  EXPECT_NE(error("call reduce_scatter(c) -> v").find("reduce_scatter:"), std::string::npos);
  EXPECT_NE(error("call rank() -> v").find("rank: 'v' is f32[2]; rank gives an i32 scalar"), std::string::npos);
  EXPECT_NE(error("call broadcast(x, root=1.5) -> y").find("root"), std::string::npos);
  EXPECT_EQ(error("call allgather(q) -> v"), "accepted");  // a scalar per rank: y is [R] (here R = 2)
}

// What needs the number of ranks is checked when the routine is linked, R known by then.
TEST(CollectivesTest, ShapesThatNeedTheRanksAreCheckedWhenLinked) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"input x : f32[3]\noutput y : f32[3]\ncall broadcast(x, root=1) -> y\n",
       "routine 'main', line 3: broadcast: root 1 is not a rank of this job of 1 rank (ranks 0 to 0)"},
      {"input x : f32[3]\noutput y : f32[6]\ncall allgather(x) -> y\n",
       "routine 'main', line 3: allgather: 'y' is f32[6] and 'x' f32[3]; y's first dimension must be R × x's, and "
       "this job has R = 1 rank"},
      {"input x : f32[4, 2]\noutput y : f32[2, 2]\ncall reduce_scatter(x) -> y\n",
       "routine 'main', line 3: reduce_scatter: 'x' is f32[4, 2] and 'y' f32[2, 2]; x's first dimension must be R × y's, "
       "and this job has R = 1 rank"},
  };
  TempDir cache;
  Result<hal::DeviceRef> dev = open_device("cpu", cache.path());
  ASSERT_TRUE(dev.ok()) << dev.status();
  for (const Case& c : cases) {
    Result<ir::Program> program = lang::parse_program(c.text, "c.kiln");
    ASSERT_TRUE(program.ok()) << program.status();
    auto instance = runtime::ProgramInstance::create(*dev, *program);
    ASSERT_FALSE(instance.ok()) << c.text;
    EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument) << instance.status();
    EXPECT_NE(instance.status().message().find(c.error), std::string::npos) << instance.status();
  }
}

}  // namespace
}  // namespace kiln::e2e
