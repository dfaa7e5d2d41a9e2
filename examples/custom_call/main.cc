// A framework's own kernel inside a kiln program, end to end:
//  1. write the function in C++ against kiln's memrefs and register it with KILN_RAL_API for
//     the devices it should run on;
//  2. call it by name from a .kiln program (soft_threshold.kiln): `call soft_threshold(...)`;
//  3. compile, link and run the program as any other. The function runs as a step of the
//     routine, between the kernels before and after it, on the routine's queue.
//
//   custom_call [DEVICE]     DEVICE: cpu (the default), interp or opencl
//
// It checks the results against the same computation on the host and exits 1 on a mismatch
// (77 when the device is not available here).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kiln/base/file.h"
#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/registry.h"
#include "kiln/runtime/backend.h"

namespace {

using kiln::ral::MemRef;

// y = sign(x) * max(|x| - lambda, 0), row by row. Attributes arrive as double (docs/ral.md).
// The memory belongs to the runtime: use it during the call, keep no pointer to it.
kiln::Status soft_threshold(kiln::ral::ExecutionContext*, MemRef<float, 2> x, MemRef<float, 2> y, double lambda) {
  if (lambda < 0) return kiln::invalid_argument_error("lambda must not be negative");
  if (x.sizes != y.sizes) return kiln::invalid_argument_error("x and y differ in shape");
  for (int64_t i = 0; i < x.element_count(); ++i) {
    const float magnitude = std::max(std::fabs(x.data[i]) - static_cast<float>(lambda), 0.0f);
    y.data[i] = std::copysign(magnitude, x.data[i]);
  }
  return kiln::Status();
}

// One registration per device; each gets the full name
// soft_threshold___DEVICE___pvoid_m2df32_m2df32_f64___void.
KILN_RAL_API("soft_threshold", "cpu", &soft_threshold);
KILN_RAL_API("soft_threshold", "interp", &soft_threshold);
KILN_RAL_API("soft_threshold", "opencl", &soft_threshold);

int fail(const std::string& what, const kiln::Status& status) {
  std::fprintf(stderr, "custom_call: %s: %s\n", what.c_str(), status.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string device_name = argc > 1 ? argv[1] : "cpu";
  auto text = kiln::read_bounded_file(KILN_CUSTOM_CALL_PROGRAM, 1 << 20, "program");
  if (!text.ok()) return fail("reading the program", text.status());
  auto program = kiln::lang::parse_program(*text, "soft_threshold.kiln");
  if (!program.ok()) return fail("parsing", program.status());

  auto device = kiln::drivers::builtin_registry().create_device(device_name);
  if (!device.ok()) {
    std::fprintf(stderr, "custom_call: %s is not available here: %s\n", device_name.c_str(),
                 device.status().to_string().c_str());
    return 77;
  }
  auto nodes = kiln::runtime::NodeTable::create(*program);
  auto backend = kiln::runtime::Backend::create(*device);
  if (!nodes.ok() || !backend.ok()) return fail("setting up", nodes.ok() ? backend.status() : nodes.status());
  auto stream = (*backend)->new_stream();
  if (!stream.ok()) return fail("creating a stream", stream.status());
  auto code = (*backend)->compile(*program, "main");
  if (!code.ok()) return fail("compiling", code.status());
  auto root = (*backend)->make_context(*stream, *nodes);
  if (!root.ok()) return fail("creating a context", root.status());
  // Linking binds each call to its registered function; an unknown name fails here, with
  // NOT_FOUND naming the function and the device.
  auto linked = (*backend)->link(*root, *code, "main");
  if (!linked.ok()) return fail("linking", linked.status());

  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 1.7f);
  if (auto st = (*nodes)->tensor("x")->write_from(x); !st.ok()) return fail("writing x", st);
  if (auto st = linked->routine->run(); !st.ok()) return fail("running", st);
  auto y = (*nodes)->tensor("y")->read_as<float>();
  auto best = (*nodes)->tensor("best")->read_as<float>();
  auto at = (*nodes)->tensor("at")->read_as<int32_t>();
  if (!y.ok()) return fail("reading y", y.status());
  if (!best.ok() || !at.ok()) return fail("reading best and at", best.ok() ? at.status() : best.status());

  // The same on the host.
  int mismatches = 0;
  for (int r = 0; r < 4; ++r) {
    std::vector<float> row(8);
    for (int j = 0; j < 8; ++j) {
      const float s = x[static_cast<size_t>(r * 8 + j)] * 2;
      row[static_cast<size_t>(j)] = std::copysign(std::max(std::fabs(s) - 0.5f, 0.0f), s);
      if ((*y)[static_cast<size_t>(r * 8 + j)] != row[static_cast<size_t>(j)]) ++mismatches;
    }
    std::printf("row %d: top 3", r);
    for (int k = 0; k < 3; ++k) {
      const int32_t position = (*at)[static_cast<size_t>(r * 3 + k)];
      std::printf(" %.4f (at %d)", (*best)[static_cast<size_t>(r * 3 + k)], position);
      if (position < 0 || position >= 8 || row[static_cast<size_t>(position)] != (*best)[static_cast<size_t>(r * 3 + k)]) {
        ++mismatches;
      }
      if (k > 0 && (*best)[static_cast<size_t>(r * 3 + k)] > (*best)[static_cast<size_t>(r * 3 + k - 1)]) ++mismatches;
    }
    std::printf("\n");
  }
  if (mismatches) {
    std::fprintf(stderr, "custom_call: %d values differ from the host's\n", mismatches);
    return 1;
  }
  std::printf("custom_call on %s: soft_threshold and topk agree with the host\n", device_name.c_str());
  return 0;
}
