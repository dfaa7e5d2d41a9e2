#include "drivers/opencl/cl_platform.h"

namespace kiln::opencl {

namespace {

Result<std::string> platform_string(const Api& api, cl_platform_id platform, cl_platform_info what) {
  size_t size = 0;
  cl_int err = api.GetPlatformInfo(platform, what, 0, nullptr, &size);
  if (err != CL_SUCCESS) return cl_error("clGetPlatformInfo", err);
  std::string text(size, '\0');
  err = api.GetPlatformInfo(platform, what, size, text.data(), nullptr);
  if (err != CL_SUCCESS) return cl_error("clGetPlatformInfo", err);
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

Result<std::string> device_string(const Api& api, cl_device_id device, cl_device_info what) {
  size_t size = 0;
  cl_int err = api.GetDeviceInfo(device, what, 0, nullptr, &size);
  if (err != CL_SUCCESS) return cl_error("clGetDeviceInfo", err);
  std::string text(size, '\0');
  err = api.GetDeviceInfo(device, what, size, text.data(), nullptr);
  if (err != CL_SUCCESS) return cl_error("clGetDeviceInfo", err);
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

template <typename T>
Result<T> device_value(const Api& api, cl_device_id device, cl_device_info what) {
  T value{};
  cl_int err = api.GetDeviceInfo(device, what, sizeof value, &value, nullptr);
  if (err != CL_SUCCESS) return cl_error("clGetDeviceInfo", err);
  return value;
}

bool has_extension(const std::string& extensions, const std::string& name) {
  size_t pos = 0;
  while ((pos = extensions.find(name, pos)) != std::string::npos) {
    size_t end = pos + name.size();
    bool starts = pos == 0 || extensions[pos - 1] == ' ';
    bool ends = end == extensions.size() || extensions[end] == ' ';
    if (starts && ends) return true;
    pos = end;
  }
  return false;
}

Status describe(const Api& api, ClDeviceRecord& r) {
  KILN_ASSIGN_OR_RETURN(r.platform_name, platform_string(api, r.platform, CL_PLATFORM_NAME));
  KILN_ASSIGN_OR_RETURN(r.platform_version, platform_string(api, r.platform, CL_PLATFORM_VERSION));
  KILN_ASSIGN_OR_RETURN(r.device_name, device_string(api, r.device, CL_DEVICE_NAME));
  KILN_ASSIGN_OR_RETURN(r.device_version, device_string(api, r.device, CL_DEVICE_VERSION));
  KILN_ASSIGN_OR_RETURN(r.driver_version, device_string(api, r.device, CL_DRIVER_VERSION));
  KILN_ASSIGN_OR_RETURN(std::string extensions, device_string(api, r.device, CL_DEVICE_EXTENSIONS));
  KILN_ASSIGN_OR_RETURN(cl_device_type type, device_value<cl_device_type>(api, r.device, CL_DEVICE_TYPE));
  r.cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
  hal::DeviceCapabilities& caps = r.info.capabilities;
  KILN_ASSIGN_OR_RETURN(caps.compute_units, device_value<cl_uint>(api, r.device, CL_DEVICE_MAX_COMPUTE_UNITS));
  KILN_ASSIGN_OR_RETURN(caps.max_allocation_size, device_value<cl_ulong>(api, r.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
  KILN_ASSIGN_OR_RETURN(caps.total_memory, device_value<cl_ulong>(api, r.device, CL_DEVICE_GLOBAL_MEM_SIZE));
  KILN_ASSIGN_OR_RETURN(caps.local_memory_size, device_value<cl_ulong>(api, r.device, CL_DEVICE_LOCAL_MEM_SIZE));
  KILN_ASSIGN_OR_RETURN(size_t max_group, device_value<size_t>(api, r.device, CL_DEVICE_MAX_WORK_GROUP_SIZE));
  caps.max_workgroup_size = static_cast<uint32_t>(std::min<size_t>(max_group, UINT32_MAX));
  // Removed in OpenCL 3.0 for some devices; a failed query means "not unified".
  Result<cl_bool> unified = device_value<cl_bool>(api, r.device, CL_DEVICE_HOST_UNIFIED_MEMORY);
  caps.unified_memory = unified.ok() && *unified == CL_TRUE;
  caps.fp64 = has_extension(extensions, "cl_khr_fp64");
  caps.fp16 = has_extension(extensions, "cl_khr_fp16");
  caps.executable_formats = {"opencl-c"};
  r.info.driver = "opencl";
  r.info.description = r.platform_name + " / " + r.device_name + " (" + r.device_version +
                       ", driver " + r.driver_version + ")";
  return Status();
}

}  // namespace

Result<std::vector<ClDeviceRecord>> enumerate_devices(const Api& api) {
  cl_uint platform_count = 0;
  cl_int err = api.GetPlatformIDs(0, nullptr, &platform_count);
  if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && platform_count == 0)) {
    return unavailable_error("no OpenCL platform is installed (clGetPlatformIDs returned " +
                             error_name(err == CL_SUCCESS ? CL_PLATFORM_NOT_FOUND_KHR : err) +
                             "); install one, e.g. pocl-opencl-icd");
  }
  if (err != CL_SUCCESS) {
    return Status(StatusCode::kUnavailable, cl_error("clGetPlatformIDs", err).message());
  }
  std::vector<cl_platform_id> platforms(platform_count);
  err = api.GetPlatformIDs(platform_count, platforms.data(), nullptr);
  if (err != CL_SUCCESS) {
    return Status(StatusCode::kUnavailable, cl_error("clGetPlatformIDs", err).message());
  }
  std::vector<ClDeviceRecord> records;
  for (cl_platform_id platform : platforms) {
    cl_uint count = 0;
    err = api.GetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count);
    if (err == CL_DEVICE_NOT_FOUND || count == 0) continue;  // a platform without devices
    if (err != CL_SUCCESS) {
      return Status(StatusCode::kUnavailable, cl_error("clGetDeviceIDs", err).message());
    }
    std::vector<cl_device_id> devices(count);
    err = api.GetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, devices.data(), nullptr);
    if (err != CL_SUCCESS) {
      return Status(StatusCode::kUnavailable, cl_error("clGetDeviceIDs", err).message());
    }
    for (cl_device_id device : devices) {
      ClDeviceRecord r;
      r.platform = platform;
      r.device = device;
      r.info.ordinal = static_cast<uint32_t>(records.size());
      r.info.name = "opencl:" + std::to_string(r.info.ordinal);
      Status described = describe(api, r);
      if (!described.ok()) {
        return Status(StatusCode::kUnavailable, described.annotate(r.info.name).message());
      }
      records.push_back(std::move(r));
    }
  }
  if (records.empty()) {
    return unavailable_error(std::to_string(platform_count) +
                             " OpenCL platform(s) found, but no device (clGetDeviceIDs)");
  }
  return records;
}

}  // namespace kiln::opencl
