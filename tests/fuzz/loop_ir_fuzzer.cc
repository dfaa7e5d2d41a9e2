// The loop-IR text reader (the interp device's executable format "kiln-loop"): any text gives
// kernels or an error; parsed kernels print to text that parses and prints the same, and stay
// valid through the optimization passes. (Users' loop IR only reaches the interpreter; the C and
// OpenCL emitters see lowering's kernels, which kiln_frontend_fuzzer covers.)
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "kiln/loop/loop.h"
#include "kiln/loop/optimize.h"

using kiln::fuzz::check;

namespace {

std::string print_all(const std::vector<kiln::ir::Kernel>& kernels) {
  std::string text;
  for (const kiln::ir::Kernel& k : kernels) text += kiln::ir::print_kernel(k) + "\n";
  return text;
}

// parse(text) succeeds and prints as `text` again.
void check_reparses(const std::string& text, std::string_view what) {
  kiln::Result<std::vector<kiln::ir::Kernel>> again = kiln::ir::parse_kernels(text);
  check(again.ok(), what, (again.ok() ? std::string() : again.status().to_string()) + "\n" + text);
  check(print_all(*again) == text, "print(parse(print(k))) != print(k)", text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Result<std::vector<kiln::ir::Kernel>> kernels = kiln::ir::parse_kernels(text);
  if (!kernels.ok()) return 0;
  check_reparses(print_all(*kernels), "a printed kernel does not parse");
  for (kiln::ir::Kernel& k : *kernels) kiln::ir::optimize_kernel(k);
  check_reparses(print_all(*kernels), "an optimized kernel does not parse");
  return 0;
}
