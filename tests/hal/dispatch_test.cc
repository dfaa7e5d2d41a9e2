// CTS: dispatches — workgroup ids over 3-D counts, constants and bindings reaching the kernel,
// several exports, empty grids, argument validation and failing kernels.
#include <cstring>
#include <vector>

#include "hal/cts.h"

namespace kiln::cts {
namespace {

class DispatchTest : public CtsTest {
 protected:
  void SetUp() override {
    CtsTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    CTS_REQUIRE_KERNELS();
  }

  // Runs write_ids over `count` and checks every workgroup wrote its id exactly once.
  void check_workgroup_ids(std::array<uint32_t, 3> count) {
    SCOPED_TRACE(testing::Message() << count[0] << "x" << count[1] << "x" << count[2]);
    size_t n = size_t(count[0]) * count[1] * count[2];
    BufferRef out = make_buffer((n + 3) * 4, 0xFF);  // 3 spare elements after the grid
    SemaphoreRef done = semaphore();
    CTS_ASSERT_OK(queue_->dispatch({}, {{done, 1}}, make_dispatch(kWriteIds, count, {}, {{out}})));
    CTS_ASSERT_OK(wait(done, 1));
    std::vector<uint32_t> values = read_u32(out);
    size_t wrong = 0;
    for (uint32_t z = 0; z < count[2]; ++z) {
      for (uint32_t y = 0; y < count[1]; ++y) {
        for (uint32_t x = 0; x < count[0]; ++x) {
          size_t i = x + size_t(count[0]) * (y + size_t(count[1]) * z);
          if (values[i] != workgroup_id_value(x, y, z) && wrong++ < 5) {
            ADD_FAILURE() << "workgroup (" << x << "," << y << "," << z << ") wrote " << values[i];
          }
        }
      }
    }
    EXPECT_EQ(wrong, 0u);
    for (size_t i = n; i < n + 3; ++i) EXPECT_EQ(values[i], kIdsEmpty) << "spare element " << i;
  }
};
KILN_CTS_INSTANTIATE(DispatchTest);

TEST_P(DispatchTest, WorkgroupIds3D) { check_workgroup_ids({4, 3, 2}); }

TEST_P(DispatchTest, WorkgroupIdsShapes) {
  for (std::array<uint32_t, 3> count : std::vector<std::array<uint32_t, 3>>{
           {1, 1, 1}, {7, 1, 1}, {1, 5, 1}, {1, 1, 6}, {3, 3, 3}, {2, 9, 4}}) {
    check_workgroup_ids(count);
  }
}

TEST_P(DispatchTest, ManyWorkgroups) {
  check_workgroup_ids({1024, 1, 1});
  check_workgroup_ids({16, 8, 8});
}

TEST_P(DispatchTest, ConstantsAndBindingsReachTheKernel) {
  BufferRef out = make_buffer(64 * 4, 0);
  // The probe binding starts 16 bytes into a buffer whose element 4 is 0xC0FFEE.
  std::vector<uint32_t> probe_values(32, 0);
  probe_values[4] = 0xC0FFEE;
  BufferRef probe = make_u32_buffer(probe_values);
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(
      queue_->dispatch({}, {{done, 1}},
                       make_dispatch(kProbeState, {1, 2, 3}, {11, 0xFFFFFFFF, 33},
                                     {{out, 0, 48}, {probe, 16, hal::Buffer::kWholeBuffer}})));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint32_t> values = read_u32(out);
  // The C kernel ABI is at version 1, the OpenCL one at 2 (the entry check of a failed action).
  Result<hal::ExecutableSource> source = test_kernel_source(device().info());
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(values[0], source->format == "opencl-c" ? 2u : 1u) << "abi_version";
  EXPECT_EQ(values[1], 1u);
  EXPECT_EQ(values[2], 2u);
  EXPECT_EQ(values[3], 3u);
  EXPECT_EQ(values[4], 2u) << "binding_count";
  EXPECT_EQ(values[5], 3u) << "constant_count";
  EXPECT_EQ(values[6], 11u);
  EXPECT_EQ(values[7], 0xFFFFFFFFu);
  EXPECT_EQ(values[8], 33u);
  EXPECT_EQ(values[9], 48u) << "out binding length";
  EXPECT_EQ(values[10], 32u * 4 - 16) << "probe binding length (whole buffer from offset 16)";
  EXPECT_EQ(values[11], 0xC0FFEEu) << "probe binding does not start at its offset";
  for (size_t i = 12; i < values.size(); ++i) EXPECT_EQ(values[i], 0u) << i;
}

TEST_P(DispatchTest, BindingOffsetsAndSubspans) {
  // write_ids into a binding at byte offset 64 of a subspan at offset 32: the kernel's slot 0 is
  // byte 96 of the allocation; everything else keeps its 0xFF bytes.
  BufferRef parent = make_buffer(512, 0xFF);
  BufferRef view = must(parent->subspan(32, 256), "subspan");
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(
      queue_->dispatch({}, {{done, 1}}, make_dispatch(kWriteIds, {4, 2, 1}, {}, {{view, 64, 32}})));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint32_t> values = read_u32(parent);
  for (size_t i = 0; i < values.size(); ++i) {
    if (i >= 24 && i < 32) {
      size_t linear = i - 24;
      EXPECT_EQ(values[i], workgroup_id_value(linear % 4, linear / 4, 0)) << i;
    } else {
      EXPECT_EQ(values[i], kIdsEmpty) << i;
    }
  }
}

TEST_P(DispatchTest, AddConstantRanges) {
  // 4096 elements; 64 workgroups of 64 elements.
  std::vector<uint32_t> initial(4096);
  for (uint32_t i = 0; i < 4096; ++i) initial[i] = i;
  BufferRef data = make_u32_buffer(initial);
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(queue_->dispatch({}, {{done, 1}},
                                 make_dispatch(kAddConstant, {8, 4, 2}, {1000, 64}, {{data}})));
  CTS_ASSERT_OK(wait(done, 1));
  std::vector<uint32_t> values = read_u32(data);
  for (uint32_t i = 0; i < 4096; ++i) ASSERT_EQ(values[i], i + 1000) << i;
}

TEST_P(DispatchTest, SeveralExportsOfOneExecutable) {
  // write_ids → add_constant → copy_offset, chained on one executable across both queues.
  BufferRef ids = make_buffer(16 * 4, 0xFF);
  BufferRef copy = make_buffer(12 * 4, 0);
  SemaphoreRef t = semaphore();
  CTS_ASSERT_OK(queue_->dispatch({}, {{t, 1}}, make_dispatch(kWriteIds, {16, 1, 1}, {}, {{ids}})));
  CTS_ASSERT_OK(queue2_->dispatch({{t, 1}}, {{t, 2}},
                                  make_dispatch(kAddConstant, {1, 1, 1}, {5, 16}, {{ids}})));
  CTS_ASSERT_OK(queue_->dispatch({{t, 2}}, {{t, 3}},
                                 make_dispatch(kCopyOffset, {3, 1, 1}, {4, 4}, {{ids}, {copy}})));
  CTS_ASSERT_OK(wait(t, 3));
  std::vector<uint32_t> values = read_u32(copy);
  for (uint32_t i = 0; i < 12; ++i) EXPECT_EQ(values[i], i + 4 + 5) << i;
  std::vector<uint32_t> id_values = read_u32(ids);
  for (uint32_t i = 0; i < 16; ++i) EXPECT_EQ(id_values[i], i + 5) << i;
}

TEST_P(DispatchTest, ZeroWorkgroupsSignalsWithoutRunning) {
  BufferRef out = make_buffer(64, 0xFF);
  SemaphoreRef done = semaphore();
  uint64_t v = 0;
  for (std::array<uint32_t, 3> count :
       std::vector<std::array<uint32_t, 3>>{{0, 4, 4}, {4, 0, 4}, {4, 4, 0}, {0, 0, 0}}) {
    // A kernel that would fail if any workgroup ran, and one that would write.
    CTS_ASSERT_OK(queue_->dispatch({{done, v}}, {{done, v + 1}},
                                   make_dispatch(kReturnConstant, count, {9}, {})));
    ++v;
    CTS_ASSERT_OK(queue_->dispatch({{done, v}}, {{done, v + 1}},
                                   make_dispatch(kWriteIds, count, {}, {{out}})));
    ++v;
  }
  CTS_ASSERT_OK(wait(done, v));
  EXPECT_EQ(read_bytes(out), std::vector<uint8_t>(64, 0xFF));
}

TEST_P(DispatchTest, FailingKernelFailsSignals) {
  SemaphoreRef done = semaphore(), other = semaphore(7);
  CTS_ASSERT_OK(queue_->dispatch({}, {{done, 1}, {other, 8}},
                                 make_dispatch(kReturnConstant, {3, 2, 1}, {42}, {})));
  Status result = wait(done, 1);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.code(), StatusCode::kDeadlineExceeded) << result.to_string();
  EXPECT_FALSE(wait(other, 8).ok());
  EXPECT_FALSE(other->query().ok());
  // A kernel returning 0 succeeds.
  SemaphoreRef ok = semaphore();
  CTS_ASSERT_OK(
      queue_->dispatch({}, {{ok, 1}}, make_dispatch(kReturnConstant, {3, 2, 1}, {0}, {})));
  CTS_EXPECT_OK(wait(ok, 1));
}

TEST_P(DispatchTest, KernelDetectsOutOfRangeWrites) {
  // The kernels report misuse through their return value: a grid larger than the binding fails.
  BufferRef out = make_buffer(4 * 4, 0xFF);
  SemaphoreRef done = semaphore();
  CTS_ASSERT_OK(
      queue_->dispatch({}, {{done, 1}}, make_dispatch(kWriteIds, {8, 1, 1}, {}, {{out}})));
  EXPECT_FALSE(wait(done, 1).ok());
}

TEST_P(DispatchTest, CountMismatchesAreInvalid) {
  BufferRef data = make_buffer(64, 0);
  SemaphoreRef ready = semaphore(1), done = semaphore();
  SemaphoreList waits = {{ready, 1}}, signals = {{done, 1}};
  // Bindings: write_ids takes 1.
  CTS_EXPECT_CODE(kInvalidArgument,
                  queue_->dispatch(waits, signals, make_dispatch(kWriteIds, {1, 1, 1}, {}, {})));
  CTS_EXPECT_CODE(
      kInvalidArgument,
      queue_->dispatch(waits, signals, make_dispatch(kWriteIds, {1, 1, 1}, {}, {{data}, {data}})));
  // Constants: add_constant takes 2.
  CTS_EXPECT_CODE(
      kInvalidArgument,
      queue_->dispatch(waits, signals, make_dispatch(kAddConstant, {1, 1, 1}, {1}, {{data}})));
  CTS_EXPECT_CODE(kInvalidArgument,
                  queue_->dispatch(waits, signals,
                                   make_dispatch(kAddConstant, {1, 1, 1}, {1, 2, 3}, {{data}})));
  // Binding ranges.
  CTS_EXPECT_CODE(
      kInvalidArgument,
      queue_->dispatch(waits, signals, make_dispatch(kWriteIds, {1, 1, 1}, {}, {{data, 65, 0}})));
  CTS_EXPECT_CODE(
      kInvalidArgument,
      queue_->dispatch(waits, signals, make_dispatch(kWriteIds, {1, 1, 1}, {}, {{data, 32, 40}})));
  CTS_EXPECT_CODE(
      kInvalidArgument,
      queue_->dispatch(waits, signals, make_dispatch(kWriteIds, {1, 1, 1}, {}, {{nullptr}})));
  // A binding of uint32_t elements that starts 2 bytes in: a GPU would fault on it, a CPU would
  // not, and no driver runs it.
  CTS_EXPECT_CODE(
      kInvalidArgument,
      queue_->dispatch(waits, signals, make_dispatch(kWriteIds, {1, 1, 1}, {}, {{data, 2, 16}})));
  Result<BufferRef> odd = data->subspan(6, 32);
  ASSERT_TRUE(odd.ok()) << odd.status();
  CTS_EXPECT_CODE(
      kInvalidArgument,
      queue_->dispatch(waits, signals, make_dispatch(kWriteIds, {1, 1, 1}, {}, {{*odd, 0, 16}})));
  // Export ordinal past the end and a missing executable.
  hal::DispatchCommand bad_ordinal = make_dispatch(kWriteIds, {1, 1, 1}, {}, {{data}});
  bad_ordinal.export_ordinal = kTestKernelCount;
  CTS_EXPECT_CODE(kInvalidArgument, queue_->dispatch(waits, signals, std::move(bad_ordinal)));
  hal::DispatchCommand no_executable = make_dispatch(kWriteIds, {1, 1, 1}, {}, {{data}});
  no_executable.executable = nullptr;
  CTS_EXPECT_CODE(kInvalidArgument, queue_->dispatch(waits, signals, std::move(no_executable)));
  grace_sleep();
  EXPECT_EQ(value_of(done), 0u);
  EXPECT_EQ(read_bytes(data), std::vector<uint8_t>(64, 0));
}

TEST_P(DispatchTest, ConcurrentDispatchesOnTwoQueues) {
  // Independent dispatches on both queues at once, on disjoint halves of one buffer.
  BufferRef data = make_u32_buffer(std::vector<uint32_t>(2048, 1));
  BufferRef low = must(data->subspan(0, 4096), "low half");
  BufferRef high = must(data->subspan(4096, 4096), "high half");
  SemaphoreRef a = semaphore(), b = semaphore();
  for (uint64_t i = 0; i < 10; ++i) {
    CTS_ASSERT_OK(queue_->dispatch({{a, i}}, {{a, i + 1}},
                                   make_dispatch(kAddConstant, {16, 1, 1}, {1, 64}, {{low}})));
    CTS_ASSERT_OK(queue2_->dispatch({{b, i}}, {{b, i + 1}},
                                    make_dispatch(kAddConstant, {4, 4, 1}, {2, 64}, {{high}})));
  }
  CTS_ASSERT_OK(wait(a, 10));
  CTS_ASSERT_OK(wait(b, 10));
  std::vector<uint32_t> values = read_u32(data);
  for (size_t i = 0; i < 1024; ++i) ASSERT_EQ(values[i], 11u) << i;
  for (size_t i = 1024; i < 2048; ++i) ASSERT_EQ(values[i], 21u) << i;
}

}  // namespace
}  // namespace kiln::cts
