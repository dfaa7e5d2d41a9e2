// Binding a caller's host memory as a node's array (kiln/runtime/bind.h), on the host devices
// (cpu, interp) and on OpenCL, which binds nothing: routines' writes land in the caller's memory,
// the binding lasts until the node is set again or its shape changes, what cannot be the array
// is refused (the caller copies), and the memory is held until the work that used it completes,
// ordered by a semaphore the test signals, never by time.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kiln/hal/semaphore.h"
#include "kiln/runtime/bind.h"
#include "kiln/runtime/routine.h"
#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

constexpr const char kHostBindingProgram[] = R"(
input  x : f32[8]
param  w : f32[8] = 1
output y : f32[8]
const  c : f32 = 2
routine step {
  w[i] = w[i] - 0.5 * x[i]
}
routine main {
  y[i] = x[i] * w[i] * c
}
)";

// Memory the test binds, counting how often kiln released it.
struct Owned {
  explicit Owned(std::vector<float> v) : values(std::move(v)) {}
  std::vector<float> values;
  std::span<std::byte> bytes() { return std::as_writable_bytes(std::span<float>(values)); }
};

class HostBindingTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    Result<hal::DriverRef> driver = drivers::builtin_registry().find(GetParam());
    KILN_ASSERT_OK(driver.status());
    if (Status available = (*driver)->availability(); !available.ok()) {
      GTEST_SKIP() << GetParam() << " is not available here: " << available;
    }
    KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse(kHostBindingProgram));
    KILN_ASSERT_OK_AND_ASSIGN(nodes_, NodeTable::create(program));
    KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, drivers::builtin_registry().create_device(GetParam()));
    KILN_ASSERT_OK_AND_ASSIGN(backend_, Backend::create(device));
    KILN_ASSERT_OK_AND_ASSIGN(stream_, backend_->new_stream());
    const std::vector<std::string> routines = {"step", "main"};
    KILN_ASSERT_OK_AND_ASSIGN(CodeRef code, backend_->compile_batch(program, routines, {}));
    KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, backend_->make_context(stream_, nodes_));
    KILN_ASSERT_OK_AND_ASSIGN(runtime::LinkedBatch linked, backend_->link_batch(root, code));
    context_ = linked.context;
    for (const RoutineRef& r : linked.routines) (r->name() == "step" ? step_ : main_) = r;
    KILN_ASSERT_OK(write_floats(*nodes_, "x", ramp(8, 1, 1)));
  }
  void TearDown() override {
    if (stream_) KILN_EXPECT_OK(stream_->await(wait_limit()));
  }
  bool host_memory() const { return GetParam() == "cpu" || GetParam() == "interp"; }

  // Binds `owned` as `node`, holding it through a handle whose release counts into `released`.
  Result<bool> bind(const std::string& node, const std::shared_ptr<Owned>& owned, std::atomic<int>* released = nullptr) {
    std::shared_ptr<void> keep(owned.get(), [owned, released](void*) {
      if (released) ++*released;
    });
    return runtime::bind_host(context_, node, owned->bytes(), std::move(keep));
  }
  Status run_and_wait(const RoutineRef& routine) {
    KILN_RETURN_IF_ERROR(routine->run());
    return stream_->await(wait_limit());
  }

  std::shared_ptr<NodeTable> nodes_;
  std::shared_ptr<Backend> backend_;
  StreamRef stream_;
  ContextRef context_;
  RoutineRef step_, main_;
};

using HostMemoryBindingTest = HostBindingTest;

// w - 0.5 * x for x = 1..8.
std::vector<float> stepped(std::vector<float> w) {
  for (size_t i = 0; i < w.size(); ++i) w[i] -= 0.5f * static_cast<float>(i + 1);
  return w;
}

TEST_P(HostBindingTest, RoutinesReadAndWriteTheCallersMemory) {
  auto w = std::make_shared<Owned>(std::vector<float>(8, 3));
  KILN_ASSERT_OK_AND_ASSIGN(bool bound, bind("w", w));
  if (!host_memory()) {
    EXPECT_FALSE(bound) << "OpenCL and CUDA kernels cannot use host memory in place";
    return;
  }
  ASSERT_TRUE(bound);
  KILN_ASSERT_OK(run_and_wait(step_));
  EXPECT_EQ(w->values, stepped(std::vector<float>(8, 3))) << "the routine's write is in the caller's memory";
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> read, read_floats(*nodes_, "w"));
  EXPECT_EQ(read, w->values);

  // The binding lasts: the next run updates the same memory, and a write of the caller's
  // between runs is what the routines read (and what the host copy reads back, every time).
  KILN_ASSERT_OK(run_and_wait(step_));
  EXPECT_EQ(w->values, stepped(stepped(std::vector<float>(8, 3))));
  w->values.assign(8, 10);
  KILN_ASSERT_OK_AND_ASSIGN(read, read_floats(*nodes_, "w"));
  EXPECT_EQ(read, w->values);
  w->values[0] = 20;
  KILN_ASSERT_OK_AND_ASSIGN(read, read_floats(*nodes_, "w"));
  EXPECT_EQ(read[0], 20) << "a bound array is read back each time: the caller may have written it";
  KILN_ASSERT_OK(run_and_wait(main_));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y[0], 1 * 20 * 2);
  EXPECT_EQ(y[7], 8 * 10 * 2);
}

TEST_P(HostMemoryBindingTest, SettingTheNodeAgainEndsTheBinding) {
  auto first = std::make_shared<Owned>(std::vector<float>(8, 3));
  auto second = std::make_shared<Owned>(std::vector<float>(8, 4));
  KILN_ASSERT_OK_AND_ASSIGN(bool bound, bind("w", first));
  ASSERT_TRUE(bound);
  KILN_ASSERT_OK(run_and_wait(step_));
  const std::vector<float> first_after = first->values;

  // Another memory: the first keeps what it holds.
  KILN_ASSERT_OK_AND_ASSIGN(bound, bind("w", second));
  ASSERT_TRUE(bound);
  KILN_ASSERT_OK(run_and_wait(step_));
  EXPECT_EQ(first->values, first_after);
  EXPECT_EQ(second->values, stepped(std::vector<float>(8, 4)));

  // A host write: the node has memory of its own again, holding the host's value.
  KILN_ASSERT_OK(write_floats(*nodes_, "w", std::vector<float>(8, 5)));
  const std::vector<float> second_after = second->values;
  KILN_ASSERT_OK(run_and_wait(step_));
  EXPECT_EQ(second->values, second_after);
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> w, read_floats(*nodes_, "w"));
  EXPECT_EQ(w, stepped(std::vector<float>(8, 5)));
}

TEST_P(HostMemoryBindingTest, WhatCannotBeTheArrayIsNotBound) {
  // Not aligned to the element size.
  auto raw = std::make_shared<std::vector<std::byte>>(8 * sizeof(float) + 1);
  std::span<std::byte> misaligned(raw->data() + 1, 8 * sizeof(float));
  KILN_ASSERT_OK_AND_ASSIGN(bool bound, runtime::bind_host(context_, "w", misaligned, raw));
  EXPECT_FALSE(bound);

  // Overlapping another node's array: here w's bound memory offered as x.
  auto w = std::make_shared<Owned>(std::vector<float>(16, 1));
  KILN_ASSERT_OK_AND_ASSIGN(bound, runtime::bind_host(context_, "w", w->bytes().first(32), w));
  ASSERT_TRUE(bound);
  KILN_ASSERT_OK_AND_ASSIGN(bound, runtime::bind_host(context_, "x", w->bytes().subspan(16, 32), w));
  EXPECT_FALSE(bound) << "kernels take their arrays as not aliasing";
  // ... and kiln's own array of y.
  KILN_ASSERT_OK(run_and_wait(main_));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::HostView y, runtime::host_view(context_, "y", wait_limit()));
  EXPECT_FALSE(y.bound);
  KILN_ASSERT_OK_AND_ASSIGN(bound, runtime::bind_host(context_, "x", y.bytes, y.keep_alive));
  EXPECT_FALSE(bound);
  // The node's own memory handed back is already its array.
  KILN_ASSERT_OK_AND_ASSIGN(runtime::HostView x, runtime::host_view(context_, "x", wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(bound, runtime::bind_host(context_, "x", x.bytes, x.keep_alive));
  EXPECT_TRUE(bound);
  // A node no routine of the tree uses has no array here.
  KILN_ASSERT_OK_AND_ASSIGN(bound, runtime::bind_host(context_, "nothing", w->bytes().first(32), w));
  EXPECT_FALSE(bound);

  auto small = std::make_shared<Owned>(std::vector<float>(4, 1));
  EXPECT_TRUE(has_error(runtime::bind_host(context_, "x", small->bytes(), small).status(),
                        StatusCode::kInvalidArgument, {"node 'x'", "32 bytes", "f32[8]", "16"}));
  auto scalar = std::make_shared<Owned>(std::vector<float>(1, 1));
  Result<bool> constant = runtime::bind_host(context_, "c", scalar->bytes(), scalar);
  if (constant.ok()) {
    EXPECT_FALSE(*constant) << "a const the code inlines has no array";
  } else {
    EXPECT_TRUE(has_error(constant.status(), StatusCode::kInvalidArgument, {"const"}));
  }
}

// The caller drops its memory and the binding moves on while a routine that uses it waits to
// run: kiln holds the memory until the routine has completed (ASan would see a read of freed
// memory), and releases it exactly once.
TEST_P(HostMemoryBindingTest, MemoryOutlivesItsBindingUntilTheWorkUsingItCompletes) {
  std::atomic<int> released{0};
  {
    auto x = std::make_shared<Owned>(ramp(8, 10, 10));
    KILN_ASSERT_OK_AND_ASSIGN(bool bound, bind("x", x, &released));
    ASSERT_TRUE(bound);
  }  // kiln's handle is the last one now
  auto gate = hal::Semaphore::create(0);
  KILN_ASSERT_OK(stream_->wait_for(gate, 1));
  KILN_ASSERT_OK(main_->run());  // waits for the gate
  KILN_ASSERT_OK(write_floats(*nodes_, "x", std::vector<float>(8, 0)));  // ends the binding
  EXPECT_EQ(released.load(), 0) << "released while a routine that reads it is queued";
  KILN_ASSERT_OK(gate->signal(1));
  KILN_ASSERT_OK(stream_->await(wait_limit()));
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, read_floats(*nodes_, "y"));
  EXPECT_EQ(y, ramp(8, 20, 20)) << "the routine read the bound memory, as it was when it was scheduled";
  // Everything that could hold it gone (the queue's thread with it), it was released once.
  main_.reset();
  step_.reset();
  context_.reset();
  stream_.reset();
  backend_.reset();
  EXPECT_EQ(released.load(), 1);
}

TEST_P(HostBindingTest, AFailedSemaphoreFailsTheStreamThatWaitsForIt) {
  auto gate = hal::Semaphore::create(0);
  KILN_ASSERT_OK(stream_->wait_for(gate, 1));
  KILN_ASSERT_OK(main_->run());
  gate->fail(unavailable_error("the producer went away"));
  EXPECT_TRUE(has_error(stream_->await(wait_limit()), StatusCode::kUnavailable, {"the producer went away"}));
  stream_.reset();  // failed: TearDown has nothing to wait for
}

INSTANTIATE_TEST_SUITE_P(Devices, HostBindingTest, ::testing::Values("cpu", "interp", "opencl", "cuda"),
                         [](const auto& info) { return info.param; });
// The binding itself, on the devices whose memory is host memory.
INSTANTIATE_TEST_SUITE_P(Devices, HostMemoryBindingTest, ::testing::Values("cpu", "interp"),
                         [](const auto& info) { return info.param; });

// A node whose shape names a size: the binding ends when the size changes (the caller's memory
// holds the old shape, which the routines then never read); the node starts over from zeros.
TEST(HostBindingSizesTest, AChangeOfShapeEndsTheBinding) {
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse("size N\ninput x : f32[N]\ninput a : f32[N]\noutput y : f32[N]\n"
                                                       "routine add {\n  y[i] = a[i] + x[i]\n}\n"));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes, NodeTable::create(program));
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, cpu_device());
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> backend, Backend::create(device));
  KILN_ASSERT_OK_AND_ASSIGN(StreamRef stream, backend->new_stream());
  const std::vector<std::string> routines = {"add"};
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef code, backend->compile_batch(program, routines, {}));
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, backend->make_context(stream, nodes));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked add, backend->link(root, code, "add"));
  auto run = [&]() -> Result<std::vector<float>> {
    KILN_RETURN_IF_ERROR(add.routine->run());
    KILN_RETURN_IF_ERROR(stream->await(wait_limit()));
    return read_floats(*nodes, "y");
  };

  auto a = std::make_shared<Owned>(std::vector<float>{1, 2, 3});
  const std::vector<float> x3 = {10, 20, 30};
  const NodeTable::ShapedWrite writes[] = {{"x", std::as_bytes(std::span<const float>(x3)), {3}},
                                           {"a", {}, {3}, true}};
  KILN_ASSERT_OK(nodes->write_shaped(writes));
  KILN_ASSERT_OK_AND_ASSIGN(bool bound, runtime::bind_host(add.context, "a", a->bytes(), a));
  ASSERT_TRUE(bound);
  KILN_ASSERT_OK_AND_ASSIGN(std::vector<float> y, run());
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33}));
  a->values = {4, 5, 6};
  KILN_ASSERT_OK_AND_ASSIGN(y, run());
  EXPECT_EQ(y, (std::vector<float>{14, 25, 36}));

  // N = 5: a's 3 floats are no longer its array (ASan would see a read past them).
  const std::vector<float> x5(5, 1);
  KILN_ASSERT_OK_AND_ASSIGN(runtime::HostTensor x, nodes->tensor("x"));
  KILN_ASSERT_OK(x.write(std::as_bytes(std::span<const float>(x5)), {5}));
  KILN_ASSERT_OK_AND_ASSIGN(y, run());
  EXPECT_EQ(y, std::vector<float>(5, 1)) << "a starts over from zeros at its new shape";
  EXPECT_EQ(a->values, (std::vector<float>{4, 5, 6}));
}

}  // namespace
}  // namespace kiln::runtime_test
