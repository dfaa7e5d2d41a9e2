#include "drivers/cuda/nvrtc.h"

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "drivers/cuda/cu_api.h"
#include "drivers/cuda/cuda_kernel_abi.h"
#include "kiln/base/shared_library.h"

namespace kiln::cuda {

namespace {

// NVRTC's C API, declared here so that kiln builds without the CUDA toolkit.
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;
constexpr nvrtcResult kNvrtcSuccess = 0;

struct NvrtcApi {
  const char* (*GetErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int*, int*);
  nvrtcResult (*GetNumSupportedArchs)(int*);
  nvrtcResult (*GetSupportedArchs)(int*);
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*);
  nvrtcResult (*DestroyProgram)(nvrtcProgram*);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetPTX)(nvrtcProgram, char*);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char*);
};

struct Loaded {
  NvrtcApi api{};
  Status status;
  std::vector<int> archs;  // supported sm_NN, ascending
  std::string version;
};

const Loaded& loaded() {
  static const Loaded* out = [] {
    auto* l = new Loaded();
    std::string left_out;
    Result<void*> library = load_shared_library(library_names_for_driver(
        driver_or_none(), {{13, "libnvrtc.so.13"}, {12, "libnvrtc.so.12"}, {11, "libnvrtc.so.11.2"}}, "libnvrtc.so", &left_out));
    if (!library.ok()) {
      l->status = unavailable_error("NVRTC was not found (" + library.status().message() + ")" +
                                    (left_out.empty() ? "" : "; left out as newer than the driver: " + left_out) +
                                    "; install the CUDA toolkit's NVRTC (cuda-nvrtc)");
      return l;
    }
    SymbolBinder binder(*library);
    NvrtcApi& a = l->api;
#define KILN_NVRTC_BIND(name) binder.bind(a.name, "nvrtc" #name)
    KILN_NVRTC_BIND(GetErrorString);
    KILN_NVRTC_BIND(Version);
    KILN_NVRTC_BIND(GetNumSupportedArchs);
    KILN_NVRTC_BIND(GetSupportedArchs);
    KILN_NVRTC_BIND(CreateProgram);
    KILN_NVRTC_BIND(DestroyProgram);
    KILN_NVRTC_BIND(CompileProgram);
    KILN_NVRTC_BIND(GetProgramLogSize);
    KILN_NVRTC_BIND(GetProgramLog);
    KILN_NVRTC_BIND(GetPTXSize);
    KILN_NVRTC_BIND(GetPTX);
    KILN_NVRTC_BIND(GetCUBINSize);
    KILN_NVRTC_BIND(GetCUBIN);
#undef KILN_NVRTC_BIND
    if (!binder.missing().empty()) {
      l->status = unavailable_error("NVRTC is older than 11.2 (missing " + binder.missing() + ")");
      return l;
    }
    int major = 0, minor = 0, count = 0;
    if (a.Version(&major, &minor) != kNvrtcSuccess || a.GetNumSupportedArchs(&count) != kNvrtcSuccess ||
        count <= 0) {
      l->status = unavailable_error("NVRTC does not report its version and architectures");
      return l;
    }
    l->version = std::to_string(major) + "." + std::to_string(minor);
    // The unversioned name may still be a newer NVRTC than the driver: its PTX would be refused
    // (CUDA_ERROR_UNSUPPORTED_PTX_VERSION) when every module loads.
    if (Result<int> driver = driver_version(); driver.ok() && major > *driver / 1000) {
      l->status = unavailable_error("NVRTC " + l->version + " is newer than the CUDA driver (CUDA " +
                                    cuda_version_text(*driver) + "), which cannot load what it builds; install NVRTC " +
                                    std::to_string(*driver / 1000) + " or update the driver");
      return l;
    }
    l->archs.resize(static_cast<size_t>(count));
    a.GetSupportedArchs(l->archs.data());
    std::sort(l->archs.begin(), l->archs.end());
    return l;
  }();
  return *out;
}

Status nvrtc_error(const char* call, nvrtcResult result, std::string_view label) {
  return internal_error(std::string(call) + " failed for " + std::string(label) + ": " +
                        loaded().api.GetErrorString(result));
}

}  // namespace

Status nvrtc_available() { return loaded().status; }

Result<std::string> nvrtc_version() {
  KILN_RETURN_IF_ERROR(loaded().status);
  return loaded().version;
}

Status check_cuda_arch(int arch) {
  const Loaded& l = loaded();
  KILN_RETURN_IF_ERROR(l.status);
  if (std::find(l.archs.begin(), l.archs.end(), arch) != l.archs.end()) return Status();
  std::string list;
  for (int a : l.archs) list += (list.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return invalid_argument_error("NVRTC " + l.version + " cannot build for sm_" + std::to_string(arch) +
                                "; it supports " + list);
}

std::string nvrtc_options(int arch, CudaImage image) {
  return std::string("--gpu-architecture=") + (image == CudaImage::kPtx ? "compute_" : "sm_") +
         std::to_string(arch) + " --std=c++17 --fmad=false --prec-div=true --prec-sqrt=true";
}

Result<std::string> nvrtc_compile(std::string_view source, int arch, CudaImage image,
                                  std::string_view label) {
  KILN_RETURN_IF_ERROR(check_cuda_arch(arch));
  const NvrtcApi& a = loaded().api;
  const std::string text = std::string(kKernelAbiText) + std::string(source);
  const std::string name = std::string(label) + ".cu";
  nvrtcProgram program = nullptr;
  nvrtcResult r = a.CreateProgram(&program, text.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (r != kNvrtcSuccess) return nvrtc_error("nvrtcCreateProgram", r, label);

  // Split the option line into NVRTC's argument vector.
  const std::string line = nvrtc_options(arch, image);
  std::vector<std::string> words;
  for (size_t pos = 0; pos < line.size();) {
    size_t end = line.find(' ', pos);
    if (end == std::string::npos) end = line.size();
    words.push_back(line.substr(pos, end - pos));
    pos = end + 1;
  }
  std::vector<const char*> options;
  for (const std::string& w : words) options.push_back(w.c_str());

  const nvrtcResult compiled = a.CompileProgram(program, static_cast<int>(options.size()), options.data());
  size_t log_size = 0;
  std::string log;
  if (a.GetProgramLogSize(program, &log_size) == kNvrtcSuccess && log_size > 1) {
    log.resize(log_size);
    a.GetProgramLog(program, log.data());
    log.resize(log_size - 1);
  }
  Result<std::string> out = std::string();
  if (compiled != kNvrtcSuccess) {
    out = invalid_argument_error("NVRTC could not build " + std::string(label) + " for sm_" +
                                 std::to_string(arch) + " (" + a.GetErrorString(compiled) + "):\n" + log);
  } else {
    const bool ptx = image == CudaImage::kPtx;
    size_t size = 0;
    r = ptx ? a.GetPTXSize(program, &size) : a.GetCUBINSize(program, &size);
    if (r != kNvrtcSuccess) {
      out = nvrtc_error(ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize", r, label);
    } else {
      out->resize(size);
      r = ptx ? a.GetPTX(program, out->data()) : a.GetCUBIN(program, out->data());
      if (r != kNvrtcSuccess) out = nvrtc_error(ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN", r, label);
      // PTX comes with its terminating NUL, which is not part of the text.
      if (out.ok() && ptx && !out->empty() && out->back() == '\0') out->pop_back();
    }
  }
  a.DestroyProgram(&program);
  return out;
}

}  // namespace kiln::cuda
