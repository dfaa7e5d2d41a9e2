#include "drivers/cuda/cu_executable.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include "base/sha256.h"
#include "kiln/base/settings.h"
#include "kiln/base/env.h"
#include "kiln/base/log.h"

namespace kiln::cuda {

namespace {

// Threads per block for a kernel written for any block size: kThreadsPerBlock (a few warps,
// enough to cover a load's latency while a small chunk still fills them), or `wanted`
// (KILN_CUDA_BLOCK_SIZE), at most what the kernel can run and a whole number of warps when it
// can. A query that fails gives one thread, which is always correct.
constexpr int kThreadsPerBlock = 128;
constexpr int kWarp = 32;

unsigned choose_block_size(const Api& api, CUfunction function, std::optional<uint64_t> wanted) {
  int most = 0;
  if (api.FuncGetAttribute(&most, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function) != CUDA_SUCCESS || most <= 0) {
    return 1;
  }
  int size = wanted ? static_cast<int>(*wanted) : kThreadsPerBlock;
  size = std::min(size, most);
  if (size > kWarp) size -= size % kWarp;
  return static_cast<unsigned>(std::max(size, 1));
}

}  // namespace

CuModule::~CuModule() {
  ContextScope scope(context_->target());
  if (scope.status("unloading a module").ok()) context_->api().ModuleUnload(module_);
}

Result<std::shared_ptr<CuModule>> CuCompiler::load(const hal::ExecutableSource& source) {
  Sha256 hasher;
  hasher.update_field("kiln-cuda-module-v1");
  hasher.update_field(source.source);
  const std::string key = hasher.hex_digest();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = loaded_.find(key); it != loaded_.end()) {
    if (std::shared_ptr<CuModule> module = it->second.lock()) return module;
  }
  KILN_ASSIGN_OR_RETURN(KernelImage image, images_.build(source.source, context_->arch(), source.label));
  ContextScope scope(context_->target());
  KILN_RETURN_IF_ERROR(scope.status("loading '" + source.label + "'"));
  KILN_ASSIGN_OR_RETURN(CUmodule module, load_module(context_->api(), image, "executable '" + source.label + "' on " +
                                                                               context_->record().info.name));
  auto shared = std::make_shared<CuModule>(context_, module);
  loaded_[key] = shared;
  return shared;
}

Status CuCompiler::reserve_printf_buffer() {
  size_t bytes = 0;
  KILN_RETURN_IF_ERROR(call_in_context(context_->target(), "cuCtxGetLimit", "the device printf buffer",
                                       [&](const Api& api) { return api.CtxGetLimit(&bytes, CU_LIMIT_PRINTF_FIFO_SIZE); }));
  if (bytes >= kPrintfBufferBytes) return Status();
  Status grown = call_in_context(context_->target(), "cuCtxSetLimit", "the device printf buffer", [&](const Api& api) {
    return api.CtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, kPrintfBufferBytes);
  });
  if (grown.ok() || !context_->lost().ok()) return grown;
  // CUDA takes the limit only before a kernel that prints has run in the context, which another
  // library in the process may have done: tracing still works, in the buffer there is.
  static std::once_flag warned;
  std::call_once(warned, [&] {
    KILN_LOG(kWarn, grown.to_string() + ": the device printf buffer stays at " + std::to_string(bytes) +
                        " bytes (a kernel that printed ran in this context before, another library's?); an "
                        "action that traces more than that loses its oldest lines");
  });
  return Status();
}

Result<hal::ExecutableRef> CuCompiler::compile(const hal::ExecutableSource& source, const void* device_tag) {
  std::optional<uint64_t> wanted_threads;
  if (std::any_of(source.exports.begin(), source.exports.end(),
                  [](const hal::ExportInfo& e) { return e.any_local_size; })) {
    KILN_ASSIGN_OR_RETURN(wanted_threads, setting_uint("KILN_CUDA_BLOCK_SIZE"));
  }
  const bool prints = source.source.find("printf(") != std::string::npos;
  if (prints) KILN_RETURN_IF_ERROR(reserve_printf_buffer());
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CuModule> module, load(source));
  const Api& api = context_->api();
  ContextScope scope(context_->target());
  KILN_RETURN_IF_ERROR(scope.status("executable '" + source.label + "'"));
  std::vector<CuKernel> kernels;
  for (const hal::ExportInfo& info : source.exports) {
    CuKernel kernel;
    kernel.prints = prints;
    kernel.may_fail = info.may_fail;
    kernel.min_bytes = info.binding_min_bytes;
    CUresult result = api.ModuleGetFunction(&kernel.function, module->get(), info.name.c_str());
    if (result == CUDA_ERROR_NOT_FOUND) {
      return not_found_error("executable '" + source.label + "' has no kernel named '" + info.name + "'");
    }
    if (result != CUDA_SUCCESS) return cu_error("cuModuleGetFunction", result, "executable '" + source.label + "'");
    if (info.any_local_size) kernel.block_size = choose_block_size(api, kernel.function, wanted_threads);
    kernels.push_back(kernel);
  }
  return hal::ExecutableRef(
      std::make_shared<CuExecutable>(device_tag, source.exports, std::move(module), std::move(kernels)));
}

}  // namespace kiln::cuda
