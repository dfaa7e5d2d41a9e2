#include "drivers/cuda/cu_platform.h"

namespace kiln::cuda {

namespace {

Status describe(const Api& api, CuDeviceRecord& r) {
  char name[256] = {};
  CUresult result = api.DeviceGetName(name, static_cast<int>(sizeof name - 1), r.device);
  if (result != CUDA_SUCCESS) return cu_error("cuDeviceGetName", result);
  r.name = name;
  auto attribute = [&](CUdevice_attribute which, int& value) {
    CUresult got = api.DeviceGetAttribute(&value, which, r.device);
    return got == CUDA_SUCCESS ? Status()
                               : cu_error("cuDeviceGetAttribute", got,
                                          "attribute " + std::to_string(static_cast<int>(which)));
  };
  int sms = 0, threads = 0, shared = 0, integrated = 0, pools = 0, unified = 0, map_host = 0;
  KILN_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, r.compute_major));
  KILN_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, r.compute_minor));
  KILN_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, sms));
  KILN_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, threads));
  KILN_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, shared));
  KILN_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_INTEGRATED, integrated));
  KILN_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, pools));
  KILN_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, unified));
  KILN_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, map_host));
  r.memory_pools = pools != 0;
  r.unified_addressing = unified != 0;
  r.can_map_host_memory = map_host != 0;
  size_t memory = 0;
  result = api.DeviceTotalMem(&memory, r.device);
  if (result != CUDA_SUCCESS) return cu_error("cuDeviceTotalMem_v2", result);

  hal::DeviceCapabilities& caps = r.info.capabilities;
  caps.compute_units = static_cast<uint32_t>(sms > 0 ? sms : 1);
  caps.total_memory = memory;
  caps.max_allocation_size = memory;  // CUDA has no separate per-allocation limit
  caps.max_workgroup_size = static_cast<uint32_t>(threads > 0 ? threads : 1);
  caps.local_memory_size = static_cast<uint64_t>(shared > 0 ? shared : 0);
  caps.fp64 = true;  // every device a current driver supports
  caps.fp16 = r.compute_major * 10 + r.compute_minor >= 53;  // half arithmetic from sm_53
  caps.unified_memory = integrated != 0;  // device memory is the host's (Tegra, GH200 aside)
  caps.executable_formats = {"cuda-c"};
  // Enough blocks to keep every SM busy several times over (a 2^24-element elementwise kernel got
  // 256 blocks of 128 threads under the CPU's sizing and reached a tenth of PyTorch's speed on an
  // H200), and at least one store per thread of a 128-thread block.
  caps.workgroups_per_compute_unit = 32;
  caps.min_stores_per_workgroup = 128;
  r.info.driver = "cuda";
  r.info.description = r.name + " (compute capability " + std::to_string(r.compute_major) + "." +
                       std::to_string(r.compute_minor) + ", CUDA driver " +
                       cuda_version_text(r.driver_version) + ")";
  return Status();
}

}  // namespace

Result<std::vector<CuDeviceRecord>> enumerate_devices(const Api& api) {
  CUresult result = api.Init(0);
  if (result == CUDA_ERROR_NO_DEVICE) return unavailable_error("no CUDA device");
  if (result != CUDA_SUCCESS) {
    return Status(StatusCode::kUnavailable, cu_error("cuInit", result).message());
  }
  int driver_version = 0;
  result = api.DriverGetVersion(&driver_version);
  if (result != CUDA_SUCCESS) {
    return Status(StatusCode::kUnavailable, cu_error("cuDriverGetVersion", result).message());
  }
  int count = 0;
  result = api.DeviceGetCount(&count);
  if (result != CUDA_SUCCESS) {
    return Status(StatusCode::kUnavailable, cu_error("cuDeviceGetCount", result).message());
  }
  if (count <= 0) return unavailable_error("no CUDA device");
  std::vector<CuDeviceRecord> records;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CuDeviceRecord r;
    r.driver_version = driver_version;
    r.info.ordinal = static_cast<uint32_t>(ordinal);
    r.info.name = "cuda:" + std::to_string(ordinal);
    result = api.DeviceGet(&r.device, ordinal);
    Status described = result == CUDA_SUCCESS ? describe(api, r) : cu_error("cuDeviceGet", result);
    if (!described.ok()) {
      return Status(StatusCode::kUnavailable, described.annotate(r.info.name).message());
    }
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace kiln::cuda
