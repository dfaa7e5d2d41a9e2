// The whole front end on any text, short of running a C compiler: parse → validate → lower (the
// default lowering and the plainest one) → the lowered text re-parses → C and OpenCL source. A
// program with sizes (language version 2) goes through as it is (its kernels reading the sizes),
// and bound and specialized at sizes 0, 1 and 3.
// Lowering and emitting may refuse a program with a Status but must not crash, hang or throw.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "kiln/codegen/c_emitter.h"
#include "kiln/ir/sizes.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"

using kiln::fuzz::check;

namespace {

void lower_and_emit(const kiln::ir::Program& program, const kiln::ir::LowerOptions& options) {
  kiln::Result<kiln::ir::LoweredProgram> lowered = kiln::ir::lower_program(program, options);
  if (!lowered.ok()) return;
  std::vector<kiln::ir::Kernel> kernels;
  for (const kiln::ir::LoweredRoutine& r : lowered->routines) {
    kernels.insert(kernels.end(), r.kernels.begin(), r.kernels.end());
  }
  // What `kiln compile --emit lowered` writes is what the interp device reads back.
  const std::string text = kiln::ir::print_lowered(*lowered);
  kiln::Result<std::vector<kiln::ir::Kernel>> reparsed = kiln::ir::parse_kernels(text);
  check(reparsed.ok(), "the lowered program's text does not parse",
        (reparsed.ok() ? std::string() : reparsed.status().to_string()) + "\n" + text);
  check(!reparsed.ok() || reparsed->size() == kernels.size(),
        "the lowered text re-parses to another kernel count", text);
  for (kiln::codegen::Dialect dialect : {kiln::codegen::Dialect::kC, kiln::codegen::Dialect::kOpenCL}) {
    kiln::Result<std::string> source = kiln::codegen::emit_kernels(kernels, &lowered->program, {dialect});
    check(source.ok(), "lowering's kernels are refused by the emitter",
          (source.ok() ? std::string() : source.status().to_string()) + "\n" + text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Result<kiln::ir::Program> program = kiln::lang::parse_program(text, "fuzz.kiln");
  if (!program.ok()) return 0;
  check(kiln::ir::validate_program(*program).ok(), "a parsed program does not validate");
  kiln::ir::LowerOptions plain;
  plain.inline_virtual = plain.fuse = plain.collapse = plain.local_arrays = plain.optimize = false;
  // A program with sizes lowers as it is (kernels reading the sizes), and at a few sizes.
  lower_and_emit(*program, {});
  lower_and_emit(*program, plain);
  if (!program->has_sizes()) return 0;
  for (int64_t value : {0, 1, 3}) {
    std::map<std::string, int64_t, std::less<>> host;
    for (const kiln::ir::SizeDecl& size : program->sizes) host[size.name] = value;
    kiln::Result<std::vector<int64_t>> values = kiln::ir::bind_sizes(*program, {}, host);
    if (!values.ok()) continue;  // a dimension negative at these sizes
    kiln::Result<kiln::ir::Program> specialized = kiln::ir::specialize_sizes(*program, *values);
    if (!specialized.ok()) continue;
    lower_and_emit(*specialized, {});
    lower_and_emit(*specialized, plain);
  }
  return 0;
}
