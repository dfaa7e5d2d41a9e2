// The arrays `kiln run` puts into a run (--input files, the seed's random inputs) and takes out
// of it (--output files, --print). Where a device's memory is host memory (cpu, interp) they are
// read and written in the device's arrays themselves: a 1 GiB input goes from the file to the
// array with no copy on the host between, and an output from its array to the file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/ir/program.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/node_table.h"
#include "tools/npy.h"

namespace kiln::tools {

// The value of an input or param: its --input file, opened with its header checked, or (no
// file) the deterministic random values that the seed gives an input.
struct RunInput {
  const ir::TensorNode* node = nullptr;
  std::optional<NpyReader> file;
};

// Opens `file` for `node` and checks its header and (for a regular file) its size against the
// declaration without reading data: INVALID_ARGUMENT saying what the file holds and what the
// node is; other codes for a file that cannot be read.
Result<RunInput> open_run_input(const ir::TensorNode& node, const std::string& file);
// The same for a file already open (its header read, as binding sizes reads it: a FIFO cannot be
// opened twice).
Result<RunInput> run_input(const ir::TensorNode& node, NpyReader reader);

// --params DIR: (param, DIR/NAME.npy) for each param of `program` (read from `program_path`)
// with a file there, in name order. INVALID_ARGUMENT where DIR is not a folder or holds a
// NAME.npy that names no param (a misspelt name would otherwise leave its param at its
// initializer without a word).
using ParamFiles = std::vector<std::pair<std::string, std::string>>;
Result<ParamFiles> param_files(const ir::Program& program, const std::string& program_path, const std::string& dir);

// Writes each input into every context's array of it, after linking: in place where the device's
// memory is host memory, else through the host copy and from_host. INVALID_ARGUMENT where a
// file's data turns out not to match its header.
Status set_run_inputs(std::vector<RunInput>& inputs, uint64_t seed, runtime::NodeTable& nodes,
                      std::span<const runtime::ContextRef> contexts);

// Calls `use` with the bytes of `node` after the runs scheduled so far on `context` complete: its
// array in place where the device's memory is host memory, else a host copy of it.
Status with_run_output(const runtime::ContextRef& context, runtime::NodeTable& nodes, const ir::TensorNode& node,
                       const std::function<Status(std::span<const std::byte>)>& use);

}  // namespace kiln::tools
