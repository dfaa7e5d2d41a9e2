// Uses the C++ runtime of an installed kiln: parses a program, runs it on the cpu device and
// checks the result. Exits 0 when it matches.
#include <cstdio>
#include <vector>

#include "kiln/drivers/drivers.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/backend.h"

int main() {
  using namespace kiln;
  Result<ir::Program> program = lang::parse_program(
      "input x : f32[4]\noutput y : f32[4]\ny[i] = x[i] * 2 + 1\n", "consumer.kiln");
  if (!program.ok()) return std::fprintf(stderr, "%s\n", program.status().to_string().c_str()), 1;
  auto device = drivers::builtin_registry().create_device("cpu");
  auto nodes = runtime::NodeTable::create(*program);
  if (!device.ok() || !nodes.ok()) return std::fprintf(stderr, "no device or node table\n"), 1;
  auto backend = runtime::Backend::create(*device);
  auto stream = (*backend)->new_stream();
  auto code = (*backend)->compile(*program, "main");
  auto root = (*backend)->make_context(*stream, *nodes);
  if (!code.ok() || !root.ok()) return std::fprintf(stderr, "compile or context failed\n"), 1;
  auto linked = (*backend)->link(*root, *code, "main");
  if (!linked.ok()) return std::fprintf(stderr, "%s\n", linked.status().to_string().c_str()), 1;
  Status wrote = (*nodes)->tensor("x")->write_from(std::vector<float>{1, 2, 3, 4});
  Status ran = wrote.ok() ? linked->routine->run() : wrote;
  auto y = (*nodes)->tensor("y")->read_as<float>();
  if (!ran.ok() || !y.ok()) return std::fprintf(stderr, "run failed\n"), 1;
  const std::vector<float> want = {3, 5, 7, 9};
  if (*y != want) return std::fprintf(stderr, "wrong result\n"), 1;
  std::printf("C++ consumer of the installed kiln: y = 3 5 7 9\n");
  return 0;
}
