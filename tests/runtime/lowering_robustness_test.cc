// Robustness of lowering and linking on random valid programs: every program that
// ProgramGenerator writes (program_generator.h) lowers under several option sets without a C++
// exception escaping and without an error, every kernel binds exactly the nodes it accesses
// (what the runtime links buffers for), and the whole `kiln run` path (lower, compile, link,
// run through runtime::Routine on the interpreter) succeeds.
//
// Seeds: KILN_LOWER_SEED (base, default 1) and KILN_LOWER_COUNT (default 200) reproduce one.
#include <gtest/gtest.h>

#include <algorithm>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include "kiln/base/env.h"
#include "kiln/lang/parser.h"
#include "kiln/loop/lower.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/transfer.h"
#include "runtime/e2e_util.h"
#include "runtime/program_generator.h"

namespace kiln::e2e {
namespace {

// The nodes a kernel binds that it neither loads nor stores, as text ("" when none).
std::string unaccessed_bindings(const ir::LoweredProgram& lowered) {
  std::string out;
  for (const ir::LoweredRoutine& r : lowered.routines) {
    for (const ir::Kernel& k : r.kernels) {
      const ir::NodeAccess access = ir::node_access(k);
      for (int node : k.nodes) {
        const bool used = std::binary_search(access.read.begin(), access.read.end(), node) ||
                          std::binary_search(access.written.begin(), access.written.end(), node);
        if (!used) out += " " + k.name + " binds node " + std::to_string(node);
      }
    }
  }
  return out;
}

// Lowers, then compiles, links and runs the default routines on `device`, the way `kiln run`
// does; any exception is turned into a failure status.
Status run_like_cli(const hal::DeviceRef& device, const ir::Program& program) {
  try {
    KILN_ASSIGN_OR_RETURN(ir::LoweredProgram lowered, ir::lower_program(program));
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::NodeTable> nodes, runtime::NodeTable::create(program, 1));
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Backend> backend, runtime::Backend::create(device));
    const std::vector<std::string> routines = default_routines(program);
    KILN_ASSIGN_OR_RETURN(runtime::CodeRef code, backend->compile_lowered(std::move(lowered), routines));
    KILN_ASSIGN_OR_RETURN(runtime::StreamRef stream, backend->new_stream());
    KILN_ASSIGN_OR_RETURN(runtime::ContextRef root, backend->make_context(stream, nodes));
    KILN_ASSIGN_OR_RETURN(runtime::LinkedBatch linked, backend->link_batch(root, code));
    for (const runtime::RoutineRef& r : linked.routines) {
      if (!r->merge_node().empty()) {
        KILN_RETURN_IF_ERROR(runtime::device_to_device(r->merge_node(), runtime::MergeMode::kCopy,
                                                       linked.context, linked.context)
                                 .status());
      }
      KILN_RETURN_IF_ERROR(r->run());
    }
    return backend->await();
  } catch (const std::exception& e) {
    return internal_error(std::string("exception escaped: ") + e.what());
  }
}

// Programs whose folding removes every load of a node (a select on a const, a subscript out of
// range at every point, an integer product by 0) run through runtime::Routine on every device;
// the kernels once kept binding those nodes, and linking threw map::at.
TEST(LoweringRobustnessTest, ProgramsWhoseLoadsFoldAwayRunOnEveryDevice) {
  const std::string text = R"(
input x2 : f64[8, 8, 5]
input x3 : f32[3]
input w : i32[4]
const c4 : f64 = 2
output y5 : i32
output z : f32[3]
output v : i32[4]
y5 = sum((select(c4, 1, i32(x2[r2, 1, 2*r0] - x3[r0])) >= -1e-3))
z[i] = x3[i] + x3[i + 5]
v[i] = w[i] * 0 + 1
)";
  Result<ir::Program> program = lang::parse_program(text, "fold.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<std::string> devices = {"interp", "cpu"};
  auto opencl = drivers::builtin_registry().find("opencl");
  if (opencl.ok() && (*opencl)->availability().ok()) devices.push_back("opencl");
  TempDir cache;
  for (const std::string& name : devices) {
    Result<hal::DeviceRef> device = open_device(name, cache.path());
    ASSERT_TRUE(device.ok()) << device.status();
    Status st = run_like_cli(*device, *program);
    EXPECT_TRUE(st.ok()) << name << ": " << st;
  }
}

TEST(LoweringRobustnessTest, RandomProgramsLowerLinkAndRunWithoutExceptions) {
  Result<std::optional<uint64_t>> seed = env_uint("KILN_LOWER_SEED", 0, UINT64_MAX / 2);
  Result<std::optional<uint64_t>> count = env_uint("KILN_LOWER_COUNT", 0, 100000);
  ASSERT_TRUE(seed.ok() && count.ok());
  const uint64_t base = seed->value_or(1), n = count->value_or(200);
  TempDir cache;
  Result<hal::DeviceRef> device = open_device("interp", cache.path());
  ASSERT_TRUE(device.ok()) << device.status();

  std::vector<ir::LowerOptions> variants(3);
  variants[1].optimize = false;
  ir::LowerOptions& plain = variants[2];
  plain.inline_virtual = plain.fuse = plain.collapse = plain.local_arrays = plain.optimize = false;
  plain.auto_calls = false;
  int failures = 0;
  for (uint64_t s = base; s < base + n && failures < 5; ++s) {
    const std::string text = ProgramGenerator(s, "p_", s % 4 == 0).generate();
    const std::string where = "seed " + std::to_string(s) + " (KILN_LOWER_SEED=" + std::to_string(s) +
                              " KILN_LOWER_COUNT=1):\n" + text;
    Result<ir::Program> program = lang::parse_program(text, "gen.kiln");
    ASSERT_TRUE(program.ok()) << program.status() << "\n" << where;
    for (size_t v = 0; v < variants.size(); ++v) {
      std::string problem;
      try {
        Result<ir::LoweredProgram> lowered = ir::lower_program(*program, variants[v]);
        if (!lowered.ok()) {
          problem = lowered.status().to_string();
        } else {
          problem = unaccessed_bindings(*lowered);
        }
      } catch (const std::exception& e) {
        problem = std::string("exception escaped: ") + e.what();
      }
      if (!problem.empty()) {
        ++failures;
        ADD_FAILURE() << "options variant " << v << ": " << problem << "\n" << where;
      }
    }
    Status st = run_like_cli(*device, *program);
    if (!st.ok()) {
      ++failures;
      ADD_FAILURE() << st << "\n" << where;
    }
  }
}

}  // namespace
}  // namespace kiln::e2e
