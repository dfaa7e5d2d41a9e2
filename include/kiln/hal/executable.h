// Executable: device code built by a device's compiler, with named exports.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"

namespace kiln::hal {

// What a kernel expects: its buffer bindings and 32-bit push constants, by count.
struct ExportInfo {
  std::string name;
  uint32_t binding_count = 0;
  uint32_t constant_count = 0;
  // The kernel is correct for any number of work-items per workgroup (its work-items share the
  // workgroup's work, and only work-item 0 does what must happen once), so a driver whose
  // workgroups have work-items (OpenCL) may choose how many. Otherwise a workgroup runs one.
  bool any_local_size = false;
  // Per binding, the alignment in bytes its start must have: the size of the element the kernel
  // reads it as. A GPU faults on a misaligned access a CPU forgives, so every driver refuses such
  // a dispatch (INVALID_ARGUMENT). Empty, or 0 for one binding, requires nothing.
  std::vector<uint32_t> binding_alignment = {};
  // What the kernel's failed checks mean (kiln/loop/loop.h, kFail; drivers/kernel_failure.h): a
  // dispatch that fails with code kFirstFailureCode + i reports failures[i] followed by the
  // 64-bit value the kernel recorded. Empty for a kernel without checks.
  std::vector<std::string> failures = {};
  // Per binding, the fewest bytes the kernel's entry check accepts (0: none), and whether it can
  // fail otherwise (checks, KILN_FAIL in a hand-written kernel). `may_fail` is false only where
  // kiln's code generator knows: a driver may then run a dispatch that binds at least
  // binding_min_bytes without reading a status back (cuda: no status slot, so no copy of it
  // after the kernels and no wait gate for the actions that wait for them).
  std::vector<uint64_t> binding_min_bytes = {};
  bool may_fail = true;
};

struct ExecutableSource {
  // The code's format: "c" (CPU driver), "opencl-c", "cuda-c", ... A device refuses formats it
  // does not list in its capabilities (UNIMPLEMENTED).
  std::string format;
  std::string source;
  std::vector<ExportInfo> exports;
  // For diagnostics only: where the source came from.
  std::string label = "executable";
};

// One step of building an executable, as its driver took it: a compile (or a part of one), a
// link, a cache lookup. What `kiln compile --timings` and the trace report.
struct BuildStep {
  std::string what;
  double seconds = 0;
};

class Executable {
 public:
  Executable(const void* device_tag, std::vector<ExportInfo> exports)
      : device_tag_(device_tag), exports_(std::move(exports)) {}
  virtual ~Executable() = default;

  const std::vector<ExportInfo>& exports() const { return exports_; }
  // NOT_FOUND for an unknown name.
  Result<uint32_t> lookup_export(std::string_view name) const;
  // INVALID_ARGUMENT for an ordinal past the end (a malformed argument, as in a dispatch).
  Result<const ExportInfo*> export_info(uint32_t ordinal) const;
  const void* device_tag() const { return device_tag_; }
  // How the driver built it (empty where the driver does not say). Set by the driver before it
  // hands the executable out.
  const std::vector<BuildStep>& build_steps() const { return build_steps_; }
  void set_build_steps(std::vector<BuildStep> steps) { build_steps_ = std::move(steps); }

 private:
  const void* device_tag_;
  std::vector<ExportInfo> exports_;
  std::vector<BuildStep> build_steps_;
};

using ExecutableRef = std::shared_ptr<Executable>;

}  // namespace kiln::hal
