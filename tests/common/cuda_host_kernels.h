// The CUDA library kernels (ral/library/cuda_kernels.h) built as C++ by the host's compiler and
// run on the host: the launch indices are globals, and a launch runs its blocks and threads one
// after another. That is exact for these kernels, whose threads never share an element within a
// launch, so the tests can check what they compute without a GPU.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>
#include <string>
#include <utility>

#include "base/process.h"
#include "common/temp_dir.h"
#include "kiln/base/status.h"
#include "ral/library/cuda_kernels.h"

#ifndef KILN_CXX_COMPILER
#define KILN_CXX_COMPILER "c++"
#endif

namespace kiln::test {

// What the CUDA source needs from the language, in host C++. The grid is run serially, so plain
// globals serve as the launch indices.
inline constexpr const char* kHostPrelude = R"(
#include <cmath>
struct KilnDim { unsigned x, y, z; };
extern "C" { KilnDim blockIdx, threadIdx, blockDim, gridDim; }
#define __global__
#define __device__
#define __forceinline__ inline
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
)";

struct KilnDim {
  unsigned x, y, z;
};

class HostKernels {
 public:
  HostKernels() : dir_("kiln-cuda-kernels") {}
  ~HostKernels() {
    if (handle_) ::dlclose(handle_);
  }

  // Compiles and loads the kernels.
  Status build() {
    const std::string source = dir_.file("kernels.cc"), object = dir_.file("kernels.so");
    std::ofstream(source) << kHostPrelude << ral::library::cuda_library_source();
    // -ffp-contract=off: NVRTC builds them with --fmad=false.
    KILN_ASSIGN_OR_RETURN(ProcessResult built, run_process({KILN_CXX_COMPILER, "-std=c++17", "-O1", "-fPIC", "-shared",
                                                            "-ffp-contract=off", "-w", source, "-o", object},
                                                           120000));
    if (built.signalled || built.exit_code != 0) return internal_error("compiling the kernels: " + built.output);
    handle_ = ::dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) return internal_error(std::string("dlopen: ") + ::dlerror());
    for (auto [dim, name] : {std::pair{&block_idx_, "blockIdx"}, {&thread_idx_, "threadIdx"},
                             {&block_dim_, "blockDim"}, {&grid_dim_, "gridDim"}}) {
      *dim = static_cast<KilnDim*>(::dlsym(handle_, name));
      if (!*dim) return internal_error(std::string("no ") + name);
    }
    return Status();
  }

  // Runs kernel `name` over a grid of 3 blocks of 5 threads, so that every grid-stride loop
  // strides. The argument types must be the kernel's parameter types.
  template <typename... A>
  void launch(const std::string& name, A... args) {
    launch_grid(name, 3, 5, args...);
  }

  // The same over `grid` blocks of `block` threads, one thread after another, one launch at a
  // time (the indices are globals; the stand-in's streams run on threads of their own).
  template <typename... A>
  void launch_grid(const std::string& name, unsigned grid, unsigned block, A... args) {
    auto kernel = reinterpret_cast<void (*)(A...)>(::dlsym(handle_, name.c_str()));
    ASSERT_NE(kernel, nullptr) << name;
    std::lock_guard<std::mutex> lock(launch_mutex_);
    *grid_dim_ = {grid, 1, 1};
    *block_dim_ = {block, 1, 1};
    for (unsigned b = 0; b < grid; ++b) {
      for (unsigned t = 0; t < block; ++t) {
        *block_idx_ = {b, 0, 0};
        *thread_idx_ = {t, 0, 0};
        kernel(args...);
      }
    }
  }

 private:
  TempDir dir_;
  void* handle_ = nullptr;
  std::mutex launch_mutex_;
  KilnDim *block_idx_ = nullptr, *thread_idx_ = nullptr, *block_dim_ = nullptr, *grid_dim_ = nullptr;
};

}  // namespace kiln::test
