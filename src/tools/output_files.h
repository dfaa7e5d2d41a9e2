// The files a `kiln` command writes (--output, --trace, --trace-values, -o), checked against what
// it reads before anything runs.
#pragma once

#include <optional>

#include "kiln/ir/program.h"
#include "tools/options.h"

namespace kiln::tools {

// Refuses, before anything runs, an output that is the program, an --input file or another
// output: the same file by identity, whatever the names (links, "./x", hard links), or the same
// name where nothing exists yet; and one that cannot be written (a missing or read-only
// directory). One exception: a param's own --input may be its --output (`--input w=w.npy
// --output w=w.npy` updates a checkpoint in place), since inputs are read before the run and
// outputs replace their files after it. `program`, where given, says which inputs are params.
std::optional<Failure> check_outputs(const Options& o, const ir::Program* program = nullptr);

}  // namespace kiln::tools
