#include "drivers/opencl/cl_executable.h"

#include <algorithm>
#include <optional>

#include "base/sha256.h"
#include "drivers/opencl/cl_kernel_abi.h"
#include "kiln/base/settings.h"
#include "kiln/base/env.h"
#include "kiln/base/log.h"

namespace kiln::opencl {

namespace {

// Whether the source enables cl_khr_fp64 (what the OpenCL C dialect prints when a program uses
// f64, and what hand-written double code must say under OpenCL 1.2).
bool enables_fp64(const std::string& source) {
  size_t pos = 0;
  while ((pos = source.find("cl_khr_fp64", pos)) != std::string::npos) {
    size_t line = source.rfind('\n', pos);
    line = line == std::string::npos ? 0 : line + 1;
    std::string_view head(source.data() + line, pos - line);
    if (head.find("#pragma") != std::string_view::npos &&
        head.find("OPENCL") != std::string_view::npos) {
      return true;
    }
    pos += 11;
  }
  return false;
}

// Work items per work group for a kernel written for any local size. On a GPU: kGpuWorkItems,
// rounded down to a multiple of the kernel's preferred multiple (the warp), at most what the
// kernel can run. On a CPU device one: PoCL runs a group's work items one after another, each
// striding through the group's chunk, which measured 12x slower than one item walking it
// (relu(a * b + c) over 2^24: 241 ms at 64 items, 20 ms at 1; docs/opencl.md). `wanted`
// (KILN_OPENCL_WORK_ITEMS) overrides the choice, still capped by the kernel's limit. A query
// that fails gives one work item, which is always correct.
constexpr size_t kGpuWorkItems = 64;

size_t choose_local_size(const Api& api, cl_kernel kernel, const ClDeviceRecord& device,
                         std::optional<uint64_t> wanted) {
  size_t most = 0, multiple = 0;
  if (api.GetKernelWorkGroupInfo(kernel, device.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(most),
                                 &most, nullptr) != CL_SUCCESS ||
      most == 0) {
    return 1;
  }
  if (wanted) return std::min<size_t>(*wanted, most);
  if (device.cpu) return 1;
  if (api.GetKernelWorkGroupInfo(kernel, device.device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                 sizeof(multiple), &multiple, nullptr) != CL_SUCCESS ||
      multiple == 0) {
    multiple = 1;
  }
  size_t size = std::max(kGpuWorkItems / multiple, size_t{1}) * multiple;
  while (size > most && size > multiple) size -= multiple;
  return std::min(size, most);
}

}  // namespace

ClExecutable::~ClExecutable() {
  for (auto& k : kernels_) {
    if (k->kernel) api_.ReleaseKernel(k->kernel);
  }
}

ClCompilerStats ClCompiler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

namespace {

std::string build_log(const ClContext& context, cl_program program) {
  const Api& api = context.api();
  size_t size = 0;
  if (api.GetProgramBuildInfo(program, context.device(), CL_PROGRAM_BUILD_LOG, 0, nullptr,
                              &size) != CL_SUCCESS) {
    return "(no build log)";
  }
  std::string log(size, '\0');
  api.GetProgramBuildInfo(program, context.device(), CL_PROGRAM_BUILD_LOG, size, log.data(),
                          nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// The program's binary for its one device (clGetProgramInfo(CL_PROGRAM_BINARIES)).
Result<std::string> program_binary(const Api& api, cl_program program) {
  size_t size = 0;
  cl_int err = api.GetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr);
  if (err != CL_SUCCESS) return cl_error("clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)", err);
  if (size == 0) return unavailable_error("the OpenCL driver gives no binary of the program");
  std::string binary(size, '\0');
  unsigned char* target = reinterpret_cast<unsigned char*>(binary.data());
  err = api.GetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof target, &target, nullptr);
  if (err != CL_SUCCESS) return cl_error("clGetProgramInfo(CL_PROGRAM_BINARIES)", err);
  return binary;
}

}  // namespace

Result<cl_program> build_program_from_source(const ClContext& context, const std::string& full_source,
                                             const std::string& label) {
  const Api& api = context.api();
  const char* text = full_source.c_str();
  size_t length = full_source.size();
  cl_int err = CL_SUCCESS;
  cl_program program = api.CreateProgramWithSource(context.context(), 1, &text, &length, &err);
  if (!program || err != CL_SUCCESS) return cl_error("clCreateProgramWithSource", err, label);
  cl_device_id device = context.device();
  err = api.BuildProgram(program, 1, &device, ClCompiler::kBuildOptions, nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::string log = build_log(context, program);
    api.ReleaseProgram(program);
    // A source that does not build is the caller's error, like a C compile error on the CPU.
    return invalid_argument_error("building OpenCL program '" + label + "' for " +
                                  context.record().info.name + " failed (clBuildProgram: " +
                                  error_name(err) + "):\n" + log);
  }
  return program;
}

Result<cl_program> ClCompiler::build_from_binary(const std::string& binary) {
  const Api& api = context_->api();
  const auto* bytes = reinterpret_cast<const unsigned char*>(binary.data());
  size_t length = binary.size();
  cl_int binary_status = CL_SUCCESS, err = CL_SUCCESS;
  cl_device_id device = context_->device();
  cl_program program = api.CreateProgramWithBinary(context_->context(), 1, &device, &length,
                                                   &bytes, &binary_status, &err);
  if (!program || err != CL_SUCCESS || binary_status != CL_SUCCESS) {
    if (program) api.ReleaseProgram(program);
    return cl_error("clCreateProgramWithBinary", err != CL_SUCCESS ? err : binary_status);
  }
  err = api.BuildProgram(program, 1, &device, kBuildOptions, nullptr, nullptr);
  if (err != CL_SUCCESS) {
    api.ReleaseProgram(program);
    return cl_error("clBuildProgram (binary)", err);
  }
  return program;
}

Result<std::shared_ptr<ClProgram>> ClCompiler::build(const hal::ExecutableSource& source) {
  std::string line_name = source.label;
  for (char& c : line_name) {
    if (c == '"' || c == '\\' || c == '\n' || c == '\r') c = '_';
  }
  const std::string full_source =
      std::string(kKernelAbiText) + "#line 1 \"" + line_name + "\"\n" + source.source;
  const ClDeviceRecord& r = context_->record();
  // Keyed on what is compiled, not on the label in the #line (as the cpu compiler's key).
  Sha256 hasher;
  hasher.update_field("kiln-opencl-program-v2");
  hasher.update_field(kKernelAbiText);
  hasher.update_field(source.source);
  hasher.update_field(kBuildOptions);
  hasher.update_field(r.device_name);
  hasher.update_field(r.device_version);
  hasher.update_field(r.driver_version);
  hasher.update_field(r.platform_name);
  hasher.update_field(r.platform_version);
  const std::string key = hasher.hex_digest();

  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = loaded_.find(key); it != loaded_.end()) {
      if (std::shared_ptr<ClProgram> program = it->second.lock()) {
        ++stats_.memory_hits;
        return program;
      }
    }
  }

  cl_program program = nullptr;
  bool from_binary = false, refused = false;
  if (cache_.enabled()) {
    Result<std::optional<std::string>> hit = cache_.load(key, "clbin");
    if (hit.ok() && hit->has_value()) {
      Result<cl_program> loaded = build_from_binary(**hit);
      if (loaded.ok()) {
        program = *loaded;
        from_binary = true;
      } else {
        // A binary the driver refuses (another driver build, a corrupt file) is rebuilt.
        refused = true;
        KILN_LOG(kWarn, "cached OpenCL binary refused, rebuilding from source: " +
                            loaded.status().to_string());
      }
    } else if (!hit.ok()) {
      KILN_LOG(kWarn, "OpenCL program cache lookup failed: " + hit.status().to_string());
    }
  }
  if (!program) {
    KILN_ASSIGN_OR_RETURN(program, build_program_from_source(*context_, full_source, source.label));
    // Asked for even without a cache: PoCL generates its kernels' machine code (work-group
    // functions) only when its binary is asked for or at the first dispatch, and compile() is
    // where a caller expects to wait for the compiler.
    Result<std::string> binary = program_binary(context_->api(), program);
    if (!binary.ok()) {
      KILN_LOG(kWarn, binary.status().to_string());
    } else if (cache_.enabled()) {
      if (Result<std::string> stored = cache_.store(key, "clbin", *binary); !stored.ok()) {
        KILN_LOG(kWarn, "cannot store the OpenCL binary: " + stored.status().to_string());
      }
    }
  }
  auto shared = std::make_shared<ClProgram>(context_, program);
  std::lock_guard<std::mutex> lock(mutex_);
  if (from_binary) ++stats_.binary_loads; else ++stats_.source_builds;
  if (refused) ++stats_.refused_binaries;
  loaded_[key] = shared;
  return shared;
}

Result<hal::ExecutableRef> ClCompiler::compile(const hal::ExecutableSource& source,
                                               const void* device_tag) {
  const ClDeviceRecord& r = context_->record();
  if (enables_fp64(source.source) && !r.info.capabilities.fp64) {
    return unimplemented_error("executable '" + source.label + "' uses f64 (cl_khr_fp64), which " +
                               r.info.name + " (" + r.device_name + ") does not support");
  }
  // Read once, and before building, for an executable that has kernels it applies to.
  std::optional<uint64_t> wanted_work_items;
  if (std::any_of(source.exports.begin(), source.exports.end(),
                  [](const hal::ExportInfo& e) { return e.any_local_size; })) {
    KILN_ASSIGN_OR_RETURN(wanted_work_items, setting_uint("KILN_OPENCL_WORK_ITEMS"));
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<ClProgram> program, build(source));
  const Api& api = context_->api();
  std::vector<std::unique_ptr<ClKernel>> kernels;
  auto release = [&] {
    for (auto& k : kernels) api.ReleaseKernel(k->kernel);
  };
  for (const hal::ExportInfo& info : source.exports) {
    cl_int err = CL_SUCCESS;
    cl_kernel kernel = api.CreateKernel(program->get(), info.name.c_str(), &err);
    if (!kernel || err != CL_SUCCESS) {
      release();
      Status status = cl_error("clCreateKernel", err, "executable '" + source.label + "'");
      if (err == -46) {  // CL_INVALID_KERNEL_NAME
        return not_found_error("executable '" + source.label + "' has no __kernel named '" +
                               info.name + "' (" + status.message() + ")");
      }
      return status;
    }
    kernels.push_back(std::make_unique<ClKernel>());
    kernels.back()->kernel = kernel;
    if (info.any_local_size) {
      kernels.back()->local_size = choose_local_size(api, kernel, r, wanted_work_items);
    }
  }
  return hal::ExecutableRef(std::make_shared<ClExecutable>(device_tag, source.exports,
                                                           std::move(program), std::move(kernels),
                                                           api));
}

}  // namespace kiln::opencl
