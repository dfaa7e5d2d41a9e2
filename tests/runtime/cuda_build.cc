#include "runtime/cuda_build.h"

#include <fstream>
#include <iterator>
#include <span>

#include "base/process.h"
#include "common/temp_dir.h"
#include "kiln/drivers/drivers.h"
#include "kiln/runtime/code.h"

#ifndef KILN_PTXAS
#define KILN_PTXAS ""
#endif

namespace kiln::e2e {

namespace {

// ptxas from PATH, else where CMake found the CUDA toolkit.
Result<std::string> ptxas_path() {
  Result<std::string> found = find_program("ptxas");
  if (found.ok()) return found;
  if (std::string(KILN_PTXAS).empty()) return not_found_error("ptxas is not on PATH and CMake found no CUDA toolkit");
  return std::string(KILN_PTXAS);
}

}  // namespace

Status cuda_toolchain_available() {
  KILN_RETURN_IF_ERROR(drivers::check_cuda_arch(kCudaTestArchs[0]));
  return ptxas_path().status();
}

Result<std::string> cuda_source_of(const ir::LoweredProgram& lowered) {
  hal::DeviceInfo cuda;
  cuda.driver = "cuda";
  cuda.capabilities.executable_formats = {"cuda-c"};
  std::string format;
  return runtime::generate_source(lowered, cuda, &format);
}

Status check_cuda_builds(const ir::LoweredProgram& lowered, std::string_view label, bool every_arch) {
  KILN_ASSIGN_OR_RETURN(std::string source, cuda_source_of(lowered));
  return check_cuda_source_builds(source, label, every_arch);
}

Status check_cuda_source_builds(const std::string& source, std::string_view label, bool every_arch) {
  KILN_ASSIGN_OR_RETURN(std::string ptxas, ptxas_path());
  test::TempDir dir("kiln-cuda-build");
  const std::span<const int> archs(kCudaTestArchs, every_arch ? std::size(kCudaTestArchs) : 1);
  for (int arch : archs) {
    const std::string sm = "sm_" + std::to_string(arch);
    Result<std::string> ptx = drivers::compile_cuda_ptx(source, arch, label);
    if (!ptx.ok()) return Status(ptx.status().code(), ptx.status().message() + "\nsource:\n" + source);
    const std::string file = dir.file(sm + ".ptx");
    std::ofstream(file, std::ios::binary) << *ptx;
    KILN_ASSIGN_OR_RETURN(ProcessResult assembled,
                          run_process({ptxas, "-arch=" + sm, "--warning-as-error", file, "-o", dir.file(sm + ".cubin")},
                                      120000));
    if (assembled.signalled || assembled.exit_code != 0 || !assembled.output.empty()) {
      return internal_error("ptxas -arch=" + sm + " on the PTX of " + std::string(label) + " (exit " +
                            std::to_string(assembled.exit_code) + "):\n" + assembled.output + "\nsource:\n" + source);
    }
  }
  return Status();
}

}  // namespace kiln::e2e
