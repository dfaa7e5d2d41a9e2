#include "drivers/cuda/cu_api.h"

#include <atomic>
#include <type_traits>

#include "kiln/base/env.h"
#include "kiln/base/shared_library.h"

namespace kiln::cuda {

namespace {

struct Loaded {
  Api api{};
  Status status;
};

// Set once the table is complete, for error_name(), which must work before and without it.
std::atomic<const Api*> g_loaded{nullptr};

Loaded load() {
  Loaded out;
  const std::string library = cuda_library_name();
  Result<void*> handle = load_shared_library({library.c_str()});
  if (!handle.ok()) {
    out.status = unavailable_error("no CUDA driver (" + library + "): " + handle.status().message());
    return out;
  }
  // Every entry is required: the driver is written against all of them, and a library without
  // one (cuMemAllocAsync arrived in CUDA 11.2) is too old to run it.
  SymbolBinder binder(*handle);
#define KILN_CU_BIND(member, symbol) binder.bind(out.api.member, #symbol);
  KILN_CUDA_API_FUNCTIONS(KILN_CU_BIND)
#undef KILN_CU_BIND
  // Graphs are an option: a driver without them (before CUDA 12.0) runs every routine as launches.
  SymbolBinder optional(*handle);
#define KILN_CU_BIND_OPTIONAL(member, symbol) optional.bind(out.api.member, #symbol);
  KILN_CUDA_API_GRAPH_FUNCTIONS(KILN_CU_BIND_OPTIONAL)
#undef KILN_CU_BIND_OPTIONAL
  if (!binder.missing().empty()) {
    out.status = unavailable_error("the CUDA driver library " + library + " lacks " + binder.missing() +
                                   " (kiln needs a driver for CUDA 11.2 or newer)");
  }
  return out;
}

const char* known_error_name(CUresult code) {
  switch (code) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED: return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_DEVICE_UNAVAILABLE: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_LAUNCH_TIMEOUT: return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
    case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case CUDA_ERROR_UNKNOWN: return "CUDA_ERROR_UNKNOWN";
  }
  return nullptr;
}

}  // namespace

Result<const Api*> Api::load() {
  // Loaded once and never unloaded (see the header); a function-local static is initialized
  // once even when several threads get here first.
  static const Loaded* loaded = [] {
    auto* l = new Loaded(kiln::cuda::load());
    if (l->status.ok()) g_loaded.store(&l->api, std::memory_order_release);
    return l;
  }();
  if (!loaded->status.ok()) return loaded->status;
  return &loaded->api;
}

Result<int> driver_version() {
  KILN_ASSIGN_OR_RETURN(const Api* api, Api::load());
  int version = 0;
  if (CUresult result = api->DriverGetVersion(&version); result != CUDA_SUCCESS) {
    return cu_error("cuDriverGetVersion", result);
  }
  return version;
}

std::optional<int> driver_or_none() {
  Result<int> version = driver_version();
  return version.ok() ? std::optional<int>(*version) : std::nullopt;
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::vector<std::string> library_names_for_driver(std::optional<int> driver,
                                                  std::initializer_list<std::pair<int, const char*>> versioned,
                                                  const char* unversioned, std::string* why) {
  std::vector<std::string> names;
  for (const auto& [major, name] : versioned) {
    if (driver && major > *driver / 1000) {
      if (why) {
        *why += std::string(why->empty() ? "" : ", ") + name + " (the CUDA driver supports CUDA " +
                cuda_version_text(*driver) + ")";
      }
      continue;
    }
    names.push_back(name);
  }
  names.push_back(unversioned);
  return names;
}

std::string cuda_library_name() {
  std::optional<std::string> named = env_string("KILN_CUDA_LIBRARY");
  return named ? *named : "libcuda.so.1";
}

std::string error_name(CUresult code) {
  const char* name = nullptr;
  if (const Api* api = g_loaded.load(std::memory_order_acquire)) {
    // The driver knows codes newer than this file; it answers CUDA_ERROR_INVALID_VALUE for a
    // code it does not know, leaving the name unset.
    if (api->GetErrorName(code, &name) != CUDA_SUCCESS) name = nullptr;
  }
  if (!name) name = known_error_name(code);
  return std::string(name ? name : "CUDA error") + " (" + std::to_string(static_cast<int>(code)) + ")";
}

Status cu_error(const char* call, CUresult code, std::string_view where) {
  std::string message = std::string(call) + " failed: " + error_name(code);
  if (!where.empty()) message = std::string(where) + ": " + message;
  StatusCode status = StatusCode::kInternal;
  switch (code) {
    case CUDA_ERROR_OUT_OF_MEMORY: status = StatusCode::kResourceExhausted; break;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: status = StatusCode::kUnavailable; break;
    default: break;
  }
  return Status(status, message);
}

}  // namespace kiln::cuda
