// The `interp` device's compiler: executable format "kiln-loop", whose source is the text of
// loop-IR kernels (ir::print_kernel), one per export, concatenated in any order. Each export is
// the kernel of the same name; its binding_count must be the kernel's node count and its
// constant_count 0 (the dispatch convention of kiln/loop/loop.h has no push constants). Kernels
// that no export names are ignored.
//
// Errors: the parser's INVALID_ARGUMENT (with line:column), NOT_FOUND for an export without a
// kernel, INVALID_ARGUMENT for a count mismatch or a local array larger than kMaxLocalElements;
// every message starts with "executable 'LABEL'".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "drivers/cpu/host_executable.h"

namespace kiln::interp {

inline constexpr const char* kLoopFormat = "kiln-loop";
// The largest local array the interpreter allocates (elements).
inline constexpr int64_t kMaxLocalElements = int64_t{1} << 24;

class InterpCompiler final : public cpu::HostCompiler {
 public:
  std::vector<std::string> formats() const override { return {kLoopFormat}; }
  Result<std::shared_ptr<cpu::HostExecutable>> compile(const hal::ExecutableSource& source,
                                                       const void* device_tag) override;
};

}  // namespace kiln::interp
