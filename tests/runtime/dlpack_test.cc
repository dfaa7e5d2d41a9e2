// Where a kiln array is in DLPack's terms (runtime/dlpack.h): host memory, an OpenCL cl_mem and
// a CUDA device pointer, from storages that say so, from the CUDA driver's own storage over the
// stand-in for the driver API (no GPU here), and from the runtime's device_memory on the real cpu
// and OpenCL (PoCL) devices. The Python package builds its capsules from exactly this
// (tests/python/test_tensors.py reads an OpenCL capsule back through OpenCL itself).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda_fake_api.h"
#include "drivers/cuda/cu_allocator.h"
#include "drivers/cuda/cu_context.h"
#include "kiln/runtime/routine.h"
#include "runtime/dlpack.h"
#include "runtime/runtime_test_util.h"

namespace kiln::runtime_test {
namespace {

// A storage that names its memory as the test says (no memory behind it).
class NamedStorage final : public hal::BufferStorage {
 public:
  explicit NamedStorage(hal::NativeMemory native) : native_(native) {}
  hal::NativeMemory native_memory() override { return native_; }
  Status map(size_t, size_t, hal::MapAccess, void**) override { return unimplemented_error("not mappable"); }
  void unmap(size_t, size_t, hal::MapAccess, void*) override {}

 private:
  hal::NativeMemory native_;
};

TEST(DLPackTest, PlacementFollowsDlpackH) {
  using Kind = hal::NativeMemory::Kind;
  std::vector<float> host(16);
  hal::NativeMemory memory;
  memory.kind = Kind::kHost;
  memory.host = host.data();
  KILN_ASSERT_OK_AND_ASSIGN(dlpack::Placement p, dlpack::placement(memory, 8));
  EXPECT_EQ(p.device.device_type, dlpack::kDLCPU);
  EXPECT_EQ(p.device.device_id, 0);
  EXPECT_EQ(p.data, host.data() + 2) << "host memory: data is the first element";
  EXPECT_EQ(p.byte_offset, 0u);

  memory = {};
  memory.kind = Kind::kCuda;
  memory.device_address = 0x7f0000100000;
  memory.device = 3;
  KILN_ASSERT_OK_AND_ASSIGN(p, dlpack::placement(memory, 256));
  EXPECT_EQ(p.device.device_type, dlpack::kDLCUDA);
  EXPECT_EQ(p.device.device_id, 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data), uintptr_t{0x7f0000100100}) << "CUDA: the device pointer of the first element";
  EXPECT_EQ(p.byte_offset, 0u);

  memory = {};
  memory.kind = Kind::kOpenCL;
  int cl_mem_object = 0;
  memory.handle = &cl_mem_object;
  memory.device = 1;
  KILN_ASSERT_OK_AND_ASSIGN(p, dlpack::placement(memory, 64));
  EXPECT_EQ(p.device.device_type, dlpack::kDLOpenCL);
  EXPECT_EQ(p.device.device_id, 1);
  EXPECT_EQ(p.data, &cl_mem_object) << "OpenCL: data is the cl_mem itself";
  EXPECT_EQ(p.byte_offset, 64u) << "and the array starts byte_offset into it";

  EXPECT_TRUE(has_error(dlpack::placement(hal::NativeMemory{}, 0).status(), StatusCode::kUnimplemented));
}

TEST(DLPackTest, DevicesAndDataTypes) {
  hal::DeviceInfo info;
  info.driver = "opencl";
  info.ordinal = 2;
  EXPECT_EQ(dlpack::device_of(info).device_type, dlpack::kDLOpenCL);
  EXPECT_EQ(dlpack::device_of(info).device_id, 2);
  info.driver = "cuda";
  EXPECT_EQ(dlpack::device_of(info).device_type, dlpack::kDLCUDA);
  info.driver = "interp";
  EXPECT_EQ(dlpack::device_of(info).device_type, dlpack::kDLCPU);
  EXPECT_EQ(dlpack::device_of(info).device_id, 0);
  const dlpack::DLDataType f64 = dlpack::data_type(ir::DType::kF64);
  EXPECT_EQ(f64.code, 2);
  EXPECT_EQ(f64.bits, 64);
  EXPECT_EQ(f64.lanes, 1);
  EXPECT_EQ(dlpack::data_type(ir::DType::kI32).code, 0);
  EXPECT_EQ(dlpack::device_text(dlpack::kDLOpenCL), "OpenCL device memory");
  EXPECT_EQ(dlpack::device_text(99), "memory of DLPack device type 99");
}

// A buffer's storage names its memory the way dlpack.h wants it: through the hal::Buffer (and a
// subspan's offset), not by the storage alone.
TEST(DLPackTest, ABuffersOffsetIsPartOfItsPlacement) {
  hal::NativeMemory named;
  named.kind = hal::NativeMemory::Kind::kCuda;
  named.device_address = 0x10000;
  auto storage = std::make_shared<NamedStorage>(named);
  hal::Buffer whole(storage, nullptr, hal::kMemoryDeviceLocal, hal::kUsageDefault, 4096, 0, 4096);
  KILN_ASSERT_OK_AND_ASSIGN(hal::BufferRef part, whole.subspan(512, 1024));
  KILN_ASSERT_OK_AND_ASSIGN(dlpack::Placement p, dlpack::placement(part->storage()->native_memory(), part->byte_offset()));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data), uintptr_t{0x10000 + 512});
}

// The CUDA driver's storage, over the stand-in for the driver API: its device pointer and device.
TEST(DLPackTest, CudaBuffersAreTheirDevicePointers) {
  using namespace cuda::fake;  // NOLINT: the stand-in's names read as the driver's
  Fake::misuse = 0;
  cuda::CuDeviceRecord record;
  record.name = "fake";
  record.device = 0;
  record.compute_major = 9;
  record.can_map_host_memory = true;
  record.memory_pools = true;
  record.info.name = "cuda:0";
  record.info.driver = "cuda";
  record.info.capabilities.total_memory = uint64_t{80} << 30;
  record.info.capabilities.executable_formats = {"cuda-c"};
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<cuda::CuContext> context, cuda::CuContext::create(fake_api(), record));
  {
    cuda::CuAllocator allocator(context, &record);
    KILN_ASSERT_OK_AND_ASSIGN(hal::BufferRef buffer, allocator.allocate({}, 1024));
    KILN_ASSERT_OK_AND_ASSIGN(hal::BufferRef part, buffer->subspan(256, 512));
    const hal::NativeMemory native = part->storage()->native_memory();
    EXPECT_EQ(native.kind, hal::NativeMemory::Kind::kCuda);
    EXPECT_EQ(native.device, 0);
    EXPECT_EQ(native.device_address, cuda::buffer_pointer(*buffer));
    KILN_ASSERT_OK_AND_ASSIGN(dlpack::Placement p, dlpack::placement(native, part->byte_offset()));
    EXPECT_EQ(p.device.device_type, dlpack::kDLCUDA);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data), cuda::buffer_pointer(*part));
    // The stand-in's device memory is host memory: the pointer reaches the buffer's bytes.
    const uint32_t value = 0x12345678;
    KILN_ASSERT_OK(part->write_data(0, &value, sizeof value));
    uint32_t seen = 0;
    std::memcpy(&seen, p.data, sizeof seen);
    EXPECT_EQ(seen, value);
  }
  context.reset();
  EXPECT_EQ(Fake::misuse.load(), 0) << "a CUDA call without the context pushed";
}

// runtime::device_memory on the real devices: after the routine's write, host memory on cpu (the
// array host_view sees) and a cl_mem on OpenCL, kept alive by the handle.
class DeviceMemoryTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceMemoryTest, TheArrayAsItsDriverNamesIt) {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find(GetParam());
  KILN_ASSERT_OK(driver.status());
  if (Status available = (*driver)->availability(); !available.ok()) {
    GTEST_SKIP() << GetParam() << " is not available here: " << available;
  }
  KILN_ASSERT_OK_AND_ASSIGN(ir::Program program, parse("param w : f32[6] = 1\nroutine twice {\n  w[i] = w[i] * 2\n}\n"));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<NodeTable> nodes, NodeTable::create(program));
  KILN_ASSERT_OK_AND_ASSIGN(hal::DeviceRef device, drivers::builtin_registry().create_device(GetParam()));
  KILN_ASSERT_OK_AND_ASSIGN(std::shared_ptr<Backend> backend, Backend::create(device));
  KILN_ASSERT_OK_AND_ASSIGN(StreamRef stream, backend->new_stream());
  const std::vector<std::string> routines = {"twice"};
  KILN_ASSERT_OK_AND_ASSIGN(CodeRef code, backend->compile_batch(program, routines, {}));
  KILN_ASSERT_OK_AND_ASSIGN(ContextRef root, backend->make_context(stream, nodes));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::Linked twice, backend->link(root, code, "twice"));
  KILN_ASSERT_OK(twice.routine->run());
  KILN_ASSERT_OK_AND_ASSIGN(runtime::DeviceMemory memory, runtime::device_memory(twice.context, "w", wait_limit()));
  EXPECT_EQ(memory.bytes, 6 * sizeof(float));
  EXPECT_FALSE(memory.bound);
  EXPECT_NE(memory.keep_alive, nullptr);
  const dlpack::DLDevice expected = dlpack::device_of(device->info());
  KILN_ASSERT_OK_AND_ASSIGN(dlpack::Placement p, dlpack::placement(memory.native, memory.offset));
  EXPECT_EQ(p.device.device_type, expected.device_type);
  EXPECT_EQ(p.device.device_id, expected.device_id);
  if (GetParam() == "opencl") {
    EXPECT_EQ(memory.native.kind, hal::NativeMemory::Kind::kOpenCL);
    EXPECT_NE(memory.native.handle, nullptr);
    EXPECT_TRUE(has_error(runtime::host_view(twice.context, "w", wait_limit()).status(), StatusCode::kUnimplemented,
                          {"is not host memory"}));
    return;
  }
  // Host memory: the routine has completed (device_memory waited for it), and its write is there.
  EXPECT_EQ(memory.native.kind, hal::NativeMemory::Kind::kHost);
  std::vector<float> seen(6);
  std::memcpy(seen.data(), p.data, memory.bytes);
  EXPECT_EQ(seen, std::vector<float>(6, 2));
  KILN_ASSERT_OK_AND_ASSIGN(runtime::HostView view, runtime::host_view(twice.context, "w", wait_limit()));
  EXPECT_EQ(static_cast<void*>(view.bytes.data()), p.data);
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceMemoryTest, ::testing::Values("cpu", "opencl"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::runtime_test
