// A framework's own kernel run by kiln's runtime between kiln routines.
//
// The "framework" below has its own code generator, which writes a C kernel for an operation the
// .kiln program does not express: a running sum (scan) along a vector. kiln compiles the rest:
// `prepare` (h = 2x + 1) before the kernel and `finish` (the total of the running sums) after
// it. The kernel is handed to the runtime as a KernelSet: its source in the cpu device's format,
// and one routine that dispatches it over the nodes h (read) and cum (written). Linked into the
// same context tree, it runs on the same stream; kiln's per-node semaphores order it after
// `prepare` and before `finish`, and the automatic transfers upload x and read back the results.
#include <cstdio>
#include <string>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/backend.h"

using namespace kiln;

static const char* kProgram = R"(
input  x     : f32[8]
param  h     : f32[8]
param  cum   : f32[8]
output total : f32
routine prepare {
  h[i] = x[i] * 2 + 1
}
routine finish {
  total = sum(cum[i])
}
)";

// The framework's code generator: a scan over `n` floats in the cpu driver's kernel ABI
// (kiln/kernel_abi.h): binding 0 is the input, binding 1 the output, one workgroup.
static std::string generate_scan(const std::string& name, int n) {
  return "int " + name +
         "(const kiln_dispatch_state_t* s, const kiln_workgroup_id_t* id) {\n"
         "  const float* in = (const float*)s->bindings[0];\n"
         "  float* out = (float*)s->bindings[1];\n"
         "  float acc = 0;\n"
         "  for (int i = 0; i < " + std::to_string(n) + "; ++i) out[i] = acc += in[i];\n"
         "  return 0;\n"
         "}\n";
}

static runtime::KernelBinding binding(const char* node, runtime::KernelAccess access) {
  runtime::KernelBinding b;
  b.node = node;
  b.dtype = ir::DType::kF32;
  b.dims = {8};
  b.access = access;
  return b;
}

static int fail(const Status& status) {
  std::fprintf(stderr, "own_kernels: %s\n", status.to_string().c_str());
  return 1;
}

int main() {
  Result<ir::Program> program = lang::parse_program(kProgram, "own_kernels.kiln");
  if (!program.ok()) return fail(program.status());
  Result<std::shared_ptr<runtime::NodeTable>> nodes = runtime::NodeTable::create(*program);
  if (!nodes.ok()) return fail(nodes.status());
  Result<hal::DeviceRef> device = drivers::builtin_registry().create_device("cpu");
  if (!device.ok()) return fail(device.status());
  Result<std::shared_ptr<runtime::Backend>> backend = runtime::Backend::create(*device);
  if (!backend.ok()) return fail(backend.status());
  runtime::Backend& kiln = **backend;
  Result<runtime::StreamRef> stream = kiln.new_stream();
  if (!stream.ok()) return fail(stream.status());

  // kiln's routines, and the framework's kernel as a routine named "scan".
  const std::vector<std::string> routines = {"prepare", "finish"};
  Result<runtime::CodeRef> code = kiln.compile_batch(*program, routines);
  if (!code.ok()) return fail(code.status());
  runtime::KernelSet set;
  set.source.format = "c";
  set.source.source = generate_scan("scan8", 8);
  set.source.exports = {{"scan8", /*binding_count=*/2, /*constant_count=*/0}};
  set.source.label = "framework_scan";
  runtime::KernelDispatch dispatch;
  dispatch.kernel = "scan8";
  dispatch.workgroups = {1, 1, 1};
  dispatch.bindings = {binding("h", runtime::KernelAccess::kRead), binding("cum", runtime::KernelAccess::kWrite)};
  runtime::KernelRoutine scan;
  scan.name = "scan";
  scan.dispatches = {dispatch};
  set.routines = {scan};
  Result<runtime::CodeRef> kernels = kiln.compile_kernels(*program, std::move(set));
  if (!kernels.ok()) return fail(kernels.status());

  // One context tree: prepare → scan → finish, each linked into the one before.
  Result<runtime::ContextRef> root = kiln.make_context(*stream, *nodes);
  if (!root.ok()) return fail(root.status());
  Result<runtime::Linked> prepare = kiln.link(*root, *code, "prepare");
  if (!prepare.ok()) return fail(prepare.status());
  Result<runtime::Linked> scanned = kiln.link(prepare->context, *kernels, "scan");
  if (!scanned.ok()) return fail(scanned.status());
  Result<runtime::Linked> finish = kiln.link(scanned->context, *code, "finish");
  if (!finish.ok()) return fail(finish.status());

  Result<runtime::HostTensor> x = (*nodes)->tensor("x");
  Result<runtime::HostTensor> cum = (*nodes)->tensor("cum");
  Result<runtime::HostTensor> total = (*nodes)->tensor("total");
  if (!x.ok() || !cum.ok() || !total.ok()) return fail(!x.ok() ? x.status() : !cum.ok() ? cum.status() : total.status());
  int mismatches = 0;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> input(8);
    for (int i = 0; i < 8; ++i) input[i] = static_cast<float>(i - 3 * step);
    if (Status s = x->write_from(input); !s.ok()) return fail(s);
    // Three actions on one stream; run() returns at once.
    for (const runtime::RoutineRef& r : {prepare->routine, scanned->routine, finish->routine}) {
      if (Status s = r->run(); !s.ok()) return fail(s);
    }
    Result<std::vector<float>> sums = cum->read_as<float>(Timeout::after_ms(60000));
    Result<std::vector<float>> result = total->read_as<float>(Timeout::after_ms(60000));
    if (!sums.ok()) return fail(sums.status());
    if (!result.ok()) return fail(result.status());
    // Small integers: every sum is exact in f32.
    float acc = 0, want_total = 0;
    for (int i = 0; i < 8; ++i) {
      acc += input[i] * 2 + 1;
      want_total += acc;
      if ((*sums)[i] != acc) ++mismatches;
    }
    if ((*result)[0] != want_total) ++mismatches;
    std::printf("step %d: cum[7] = %g, total = %g (expected %g, %g)\n", step, (*sums)[7], (*result)[0], acc,
                want_total);
  }
  if (Status s = (*stream)->await(Timeout::after_ms(60000)); !s.ok()) return fail(s);
  if (mismatches) {
    std::fprintf(stderr, "own_kernels: %d values differ from the host's\n", mismatches);
    return 1;
  }
  std::printf("own_kernels: the framework's kernel ran between kiln's routines; results match\n");
  return 0;
}
