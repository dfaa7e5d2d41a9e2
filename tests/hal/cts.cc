#include "hal/cts.h"

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

namespace kiln::cts {

void grace_sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::vector<std::string> registered_drivers() {
  std::vector<std::string> names;
  for (const hal::DriverRef& driver : drivers::builtin_registry().drivers()) names.push_back(driver->name());
  return names;
}

std::string driver_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum) c = '_';
  }
  return name.empty() ? "unnamed" : name;
}

// ---------------------------------------------------------------------------------------------
// The kernel table, one entry per executable format.

namespace {

// Format "c" (CPU driver): the declarations of kiln/kernel_abi.h are prepended by the compiler.
constexpr const char* kCKernels = R"C(
static uint32_t cts_linear_id(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  return id->x + s->workgroup_count[0] * (id->y + s->workgroup_count[1] * id->z);
}

int write_ids(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  uint32_t* out = (uint32_t*)s->bindings[0];
  size_t i = cts_linear_id(s, id);
  if ((i + 1) * sizeof(uint32_t) > s->binding_lengths[0]) return 10;
  if (out[i] != 0xFFFFFFFFu) return 11;
  out[i] = id->x + 1000u * id->y + 1000000u * id->z;
  return 0;
}

int add_constant(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  uint32_t* data = (uint32_t*)s->bindings[0];
  size_t n = s->binding_lengths[0] / sizeof(uint32_t);
  size_t per = s->constants[1];
  size_t begin = (size_t)cts_linear_id(s, id) * per;
  for (size_t i = begin; i < begin + per && i < n; ++i) data[i] += s->constants[0];
  return 0;
}

int copy_offset(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  const uint32_t* src = (const uint32_t*)s->bindings[0];
  uint32_t* dst = (uint32_t*)s->bindings[1];
  size_t src_n = s->binding_lengths[0] / sizeof(uint32_t);
  size_t dst_n = s->binding_lengths[1] / sizeof(uint32_t);
  size_t per = s->constants[1];
  size_t begin = (size_t)cts_linear_id(s, id) * per;
  for (size_t i = begin; i < begin + per && i < dst_n; ++i) {
    size_t j = i + s->constants[0];
    if (j >= src_n) return 12;
    dst[i] = src[j];
  }
  return 0;
}

int return_constant(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  (void)id;
  return (int)s->constants[0];
}

int probe_state(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  if (cts_linear_id(s, id) != 0) return 0;
  uint32_t* out = (uint32_t*)s->bindings[0];
  if (s->binding_lengths[0] < 12 * sizeof(uint32_t)) return 13;
  out[0] = s->abi_version;
  out[1] = s->workgroup_count[0];
  out[2] = s->workgroup_count[1];
  out[3] = s->workgroup_count[2];
  out[4] = s->binding_count;
  out[5] = s->constant_count;
  out[6] = s->constants[0];
  out[7] = s->constants[1];
  out[8] = s->constants[2];
  out[9] = (uint32_t)s->binding_lengths[0];
  out[10] = (uint32_t)s->binding_lengths[1];
  out[11] = s->binding_lengths[1] >= sizeof(uint32_t) ? ((const uint32_t*)s->bindings[1])[0]
                                                      : 0xDEADu;
  return 0;
}
)C";

constexpr const char* kCBroken = R"C(
int broken(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {
  return cts_undeclared_identifier + ;
}
)C";

// Format "opencl-c" (OpenCL driver): the macros of the OpenCL kernel ABI (docs/opencl.md) are
// prepended by the compiler. One work item per workgroup; KILN_FAIL(code) fails the dispatch.
// The binding and constant counts are fixed by each kernel's parameters (validation makes the
// dispatch match them), so probe_state reports them as constants.
constexpr const char* kOpenCLKernels = R"CL(
uint cts_linear_id(void) {
  return (uint)(get_group_id(0) + get_num_groups(0) * (get_group_id(1) + get_num_groups(1) * get_group_id(2)));
}

__kernel void write_ids(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0)) {
  KILN_ENTRY();
  __global uint* out = KILN_BINDING(uint, 0);
  ulong i = cts_linear_id();
  if ((i + 1) * sizeof(uint) > KILN_BINDING_LENGTH(0)) KILN_FAIL(10);
  if (out[i] != 0xFFFFFFFFu) KILN_FAIL(11);
  out[i] = (uint)get_group_id(0) + 1000u * (uint)get_group_id(1) + 1000000u * (uint)get_group_id(2);
}

__kernel void add_constant(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_CONSTANT_PARAM(0),
                           KILN_CONSTANT_PARAM(1)) {
  KILN_ENTRY();
  __global uint* data = KILN_BINDING(uint, 0);
  ulong n = KILN_BINDING_LENGTH(0) / sizeof(uint);
  ulong per = KILN_CONSTANT(1);
  ulong begin = (ulong)cts_linear_id() * per;
  for (ulong i = begin; i < begin + per && i < n; ++i) data[i] += KILN_CONSTANT(0);
}

__kernel void copy_offset(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1),
                          KILN_CONSTANT_PARAM(0), KILN_CONSTANT_PARAM(1)) {
  KILN_ENTRY();
  __global const uint* src = KILN_BINDING(uint, 0);
  __global uint* dst = KILN_BINDING(uint, 1);
  ulong src_n = KILN_BINDING_LENGTH(0) / sizeof(uint);
  ulong dst_n = KILN_BINDING_LENGTH(1) / sizeof(uint);
  ulong per = KILN_CONSTANT(1);
  ulong begin = (ulong)cts_linear_id() * per;
  for (ulong i = begin; i < begin + per && i < dst_n; ++i) {
    ulong j = i + KILN_CONSTANT(0);
    if (j >= src_n) KILN_FAIL(12);
    dst[i] = src[j];
  }
}

__kernel void return_constant(KILN_STATUS_PARAMS, KILN_CONSTANT_PARAM(0)) {
  KILN_ENTRY();
  if (KILN_CONSTANT(0) != 0) KILN_FAIL(KILN_CONSTANT(0));
}

__kernel void probe_state(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1),
                          KILN_CONSTANT_PARAM(0), KILN_CONSTANT_PARAM(1), KILN_CONSTANT_PARAM(2)) {
  KILN_ENTRY();
  if (cts_linear_id() != 0) return;
  __global uint* out = KILN_BINDING(uint, 0);
  if (KILN_BINDING_LENGTH(0) < 12 * sizeof(uint)) KILN_FAIL(13);
  out[0] = KILN_OPENCL_ABI_VERSION;
  out[1] = (uint)get_num_groups(0);
  out[2] = (uint)get_num_groups(1);
  out[3] = (uint)get_num_groups(2);
  out[4] = 2;
  out[5] = 3;
  out[6] = KILN_CONSTANT(0);
  out[7] = KILN_CONSTANT(1);
  out[8] = KILN_CONSTANT(2);
  out[9] = (uint)KILN_BINDING_LENGTH(0);
  out[10] = (uint)KILN_BINDING_LENGTH(1);
  out[11] = KILN_BINDING_LENGTH(1) >= sizeof(uint) ? KILN_BINDING(uint, 1)[0] : 0xDEADu;
}
)CL";

constexpr const char* kOpenCLBroken = R"CL(
__kernel void broken(KILN_STATUS_PARAMS) {
  KILN_ENTRY();
  uint x = cts_undeclared_identifier + ;
}
)CL";

// Format "cuda-c" (CUDA driver): the CUDA kernel ABI (src/drivers/cuda/cuda_kernel_abi.h, the
// same parameters as OpenCL's) is prepended by the compiler. One thread per block.
constexpr const char* kCudaKernels = R"CU(
static __device__ unsigned cts_linear_id() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

extern "C" __global__ void write_ids(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0)) {
  KILN_ENTRY();
  unsigned* out = KILN_BINDING(unsigned, 0);
  unsigned long long i = cts_linear_id();
  if ((i + 1) * sizeof(unsigned) > KILN_BINDING_LENGTH(0)) KILN_FAIL(10);
  if (out[i] != 0xFFFFFFFFu) KILN_FAIL(11);
  out[i] = blockIdx.x + 1000u * blockIdx.y + 1000000u * blockIdx.z;
}

extern "C" __global__ void add_constant(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_CONSTANT_PARAM(0),
                                        KILN_CONSTANT_PARAM(1)) {
  KILN_ENTRY();
  unsigned* data = KILN_BINDING(unsigned, 0);
  unsigned long long n = KILN_BINDING_LENGTH(0) / sizeof(unsigned);
  unsigned long long per = KILN_CONSTANT(1);
  unsigned long long begin = (unsigned long long)cts_linear_id() * per;
  for (unsigned long long i = begin; i < begin + per && i < n; ++i) data[i] += KILN_CONSTANT(0);
}

extern "C" __global__ void copy_offset(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1),
                                       KILN_CONSTANT_PARAM(0), KILN_CONSTANT_PARAM(1)) {
  KILN_ENTRY();
  const unsigned* src = KILN_BINDING(unsigned, 0);
  unsigned* dst = KILN_BINDING(unsigned, 1);
  unsigned long long src_n = KILN_BINDING_LENGTH(0) / sizeof(unsigned);
  unsigned long long dst_n = KILN_BINDING_LENGTH(1) / sizeof(unsigned);
  unsigned long long per = KILN_CONSTANT(1);
  unsigned long long begin = (unsigned long long)cts_linear_id() * per;
  for (unsigned long long i = begin; i < begin + per && i < dst_n; ++i) {
    unsigned long long j = i + KILN_CONSTANT(0);
    if (j >= src_n) KILN_FAIL(12);
    dst[i] = src[j];
  }
}

extern "C" __global__ void return_constant(KILN_STATUS_PARAMS, KILN_CONSTANT_PARAM(0)) {
  KILN_ENTRY();
  if (KILN_CONSTANT(0) != 0) KILN_FAIL(KILN_CONSTANT(0));
}

extern "C" __global__ void probe_state(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0), KILN_BINDING_PARAMS(1),
                                       KILN_CONSTANT_PARAM(0), KILN_CONSTANT_PARAM(1), KILN_CONSTANT_PARAM(2)) {
  KILN_ENTRY();
  if (cts_linear_id() != 0) return;
  unsigned* out = KILN_BINDING(unsigned, 0);
  if (KILN_BINDING_LENGTH(0) < 12 * sizeof(unsigned)) KILN_FAIL(13);
  out[0] = KILN_CUDA_ABI_VERSION;
  out[1] = gridDim.x;
  out[2] = gridDim.y;
  out[3] = gridDim.z;
  out[4] = 2;
  out[5] = 3;
  out[6] = KILN_CONSTANT(0);
  out[7] = KILN_CONSTANT(1);
  out[8] = KILN_CONSTANT(2);
  out[9] = (unsigned)KILN_BINDING_LENGTH(0);
  out[10] = (unsigned)KILN_BINDING_LENGTH(1);
  out[11] = KILN_BINDING_LENGTH(1) >= sizeof(unsigned) ? KILN_BINDING(unsigned, 1)[0] : 0xDEADu;
}
)CU";

constexpr const char* kCudaBroken = R"CU(
extern "C" __global__ void broken(KILN_STATUS_PARAMS) {
  KILN_ENTRY();
  unsigned x = cts_undeclared_identifier + ;
}
)CU";

// Format "kiln-loop" (the interp driver): loop-IR kernels have no push constants and no
// workgroup ids, so they cannot express the test kernels; only the compiler diagnostic is tested.
constexpr const char* kLoopBroken = R"(
(kernel broken (nodes) (vars 0) (locals 0)
  (block (cts_unknown_statement)))
)";

struct FormatEntry {
  const char* format;
  const char* kernels;  // null: no test kernels in this format
  const char* broken;
};
constexpr FormatEntry kFormats[] = {
    {"c", kCKernels, kCBroken},
    {"opencl-c", kOpenCLKernels, kOpenCLBroken},
    {"cuda-c", kCudaKernels, kCudaBroken},
    {"kiln-loop", nullptr, kLoopBroken},
};

std::vector<hal::ExportInfo> test_exports() {
  // Every binding is read as uint32_t: its start must be a multiple of 4.
  return {
      {"write_ids", 1, 0, false, {4}},    {"add_constant", 1, 2, false, {4}}, {"copy_offset", 2, 2, false, {4, 4}},
      {"return_constant", 0, 1, false, {}}, {"probe_state", 2, 3, false, {4, 4}},
  };
}

// The first of the device's formats whose entry has `field` (kernels or broken).
const FormatEntry* find_format(const hal::DeviceInfo& info, const char* FormatEntry::*field) {
  for (const std::string& format : info.capabilities.executable_formats) {
    for (const FormatEntry& entry : kFormats) {
      if (format == entry.format && entry.*field) return &entry;
    }
  }
  return nullptr;
}

}  // namespace

Result<hal::ExecutableSource> test_kernel_source(const hal::DeviceInfo& info) {
  const FormatEntry* entry = find_format(info, &FormatEntry::kernels);
  if (!entry) return unimplemented_error("the CTS has no test kernels for device " + info.name);
  hal::ExecutableSource source;
  source.format = entry->format;
  source.source = entry->kernels;
  source.exports = test_exports();
  source.label = "cts_kernels";
  return source;
}

Result<hal::ExecutableSource> broken_kernel_source(const hal::DeviceInfo& info) {
  const FormatEntry* entry = find_format(info, &FormatEntry::broken);
  if (!entry) {
    return unimplemented_error("the CTS has no broken test source for device " + info.name);
  }
  hal::ExecutableSource source;
  source.format = entry->format;
  source.source = entry->broken;
  source.exports = {{"broken", 0, 0}};
  source.label = "cts_broken";
  return source;
}

// ---------------------------------------------------------------------------------------------
// The fixture.

void CtsTest::SetUp() {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find(GetParam());
  ASSERT_TRUE(driver.ok()) << driver.status();
  if (Status available = (*driver)->availability(); !available.ok()) {
    GTEST_SKIP() << GetParam() << " is not available here: " << available.message();
  }
  auto device = drivers::builtin_registry().create_device(GetParam());
  ASSERT_TRUE(device.ok()) << "create_device(" << GetParam()
                           << "): " << device.status().to_string();
  device_ = *device;
  auto queue = device_->create_queue("cts0");
  ASSERT_TRUE(queue.ok()) << queue.status().to_string();
  queue_ = *queue;
  auto queue2 = device_->create_queue("cts1");
  ASSERT_TRUE(queue2.ok()) << queue2.status().to_string();
  queue2_ = *queue2;
}

void CtsTest::TearDown() {
  kernels_.reset();
  queue2_.reset();
  queue_.reset();
  device_.reset();
}

BufferRef CtsTest::make_buffer(size_t size, uint8_t fill, uint32_t usage) {
  hal::BufferParams params;
  params.usage = usage;
  BufferRef buffer = must(allocator().allocate(params, size), "allocate");
  if (size == 0) return buffer;
  if ((usage & hal::kUsageMapping) && (buffer->memory_type() & hal::kMemoryHostVisible)) {
    std::vector<uint8_t> bytes(size, fill);
    must(buffer->write_data(0, bytes.data(), size), "write_data");
  } else if (usage & hal::kUsageTransferTarget) {
    SemaphoreRef done = semaphore();
    must(queue_->fill({}, {{done, 1}}, buffer, 0, size, &fill, 1), "fill");
    must(wait(done, 1), "wait for fill");
  }
  return buffer;
}

BufferRef CtsTest::make_buffer(const std::vector<uint8_t>& bytes, uint32_t usage) {
  hal::BufferParams params;
  params.usage = usage;
  BufferRef buffer = must(allocator().allocate(params, bytes.size()), "allocate");
  if (bytes.empty()) return buffer;
  if ((usage & hal::kUsageMapping) && (buffer->memory_type() & hal::kMemoryHostVisible)) {
    must(buffer->write_data(0, bytes.data(), bytes.size()), "write_data");
  } else {
    SemaphoreRef done = semaphore();
    must(queue_->update({}, {{done, 1}}, bytes.data(), buffer, 0, bytes.size()), "update");
    must(wait(done, 1), "wait for update");
  }
  return buffer;
}

BufferRef CtsTest::make_u32_buffer(const std::vector<uint32_t>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(uint32_t));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return make_buffer(bytes);
}

std::vector<uint8_t> CtsTest::read_bytes(const BufferRef& buffer, size_t offset, size_t length) {
  if (length == hal::Buffer::kWholeBuffer) length = buffer->byte_length() - offset;
  std::vector<uint8_t> bytes(length);
  if (length == 0) return bytes;
  if ((buffer->usage() & hal::kUsageMapping) && (buffer->memory_type() & hal::kMemoryHostVisible)) {
    must(buffer->read_data(offset, bytes.data(), length), "read_data");
  } else {
    SemaphoreRef done = semaphore();
    must(queue_->read({}, {{done, 1}}, buffer, offset, bytes.data(), length), "read");
    must(wait(done, 1), "wait for read");
  }
  return bytes;
}

std::vector<uint32_t> CtsTest::read_u32(const BufferRef& buffer) {
  std::vector<uint8_t> bytes = read_bytes(buffer);
  std::vector<uint32_t> values(bytes.size() / sizeof(uint32_t));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(uint32_t));
  return values;
}

bool CtsTest::has_kernels() { return test_kernel_source(device_->info()).ok(); }

hal::ExecutableRef CtsTest::kernels() {
  if (!kernels_) {
    hal::ExecutableSource source = must(test_kernel_source(device_->info()), "test kernels");
    kernels_ = must(device_->compile_executable(source), "compile test kernels");
  }
  return kernels_;
}

hal::DispatchCommand CtsTest::make_dispatch(TestKernel kernel, std::array<uint32_t, 3> workgroups,
                                            std::vector<uint32_t> constants,
                                            std::vector<hal::BufferBinding> bindings) {
  hal::DispatchCommand dispatch;
  dispatch.executable = kernels();
  dispatch.export_ordinal = kernel;
  dispatch.workgroups = workgroups;
  dispatch.constants = std::move(constants);
  dispatch.bindings = std::move(bindings);
  return dispatch;
}

// ---------------------------------------------------------------------------------------------
// Utilities.

std::vector<uint8_t> pattern_bytes(size_t size, uint32_t seed) {
  std::vector<uint8_t> bytes(size);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    bytes[i] = static_cast<uint8_t>(x);
  }
  return bytes;
}

::testing::AssertionResult bytes_equal(const std::vector<uint8_t>& actual,
                                       const std::vector<uint8_t>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << ", expected " << expected.size();
  }
  size_t first = actual.size(), count = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) {
      if (count++ == 0) first = i;
    }
  }
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << count << " of " << actual.size() << " bytes differ; first at " << first << ": 0x"
         << std::hex << int(actual[first]) << ", expected 0x" << int(expected[first]);
}

void OrderLog::add(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.push_back(id);
}

std::vector<int> OrderLog::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_;
}

size_t OrderLog::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

bool run_bounded(std::function<void()> fn, int64_t timeout_ms) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread thread([fn = std::move(fn), done] {
    fn();
    done->set_value();
  });
  if (finished.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    thread.detach();
    return false;
  }
  thread.join();
  return true;
}

bool eventually(const std::function<bool()>& predicate) {
  int64_t deadline = now_ns() + kWaitMs * 1000000;
  while (!predicate()) {
    if (now_ns() >= deadline) return predicate();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace kiln::cts
